"""Shared fixtures: a private XDG world for every test, the unprivileged test user and its
readable virtualenv.

Every test runs with ``HOME`` and the five XDG base directories (``XDG_CONFIG_HOME``,
``XDG_STATE_HOME``, ``XDG_DATA_HOME``, ``XDG_CACHE_HOME``, ``XDG_RUNTIME_DIR``) pointing into
a fresh temporary directory of its own, so nothing a test runs can read or lock the
user's own Glove (``~/.config/glove``, ``~/.local/state/glove`` and a gloved running there)
or another test's. Commands run as the unprivileged user through :meth:`Unpriv.command`
get a world of their own, owned by that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent

# No wall-clock deadline per example (hypothesis's default is 200 ms): a timed assertion in
# disguise, which a loaded machine shared by several runs fails. Tests that set their own
# settings inherit this.
settings.register_profile("glove", deadline=None)
settings.load_profile("glove")

#: The variables a test's world sets, each to a directory of the world (``HOME`` included).
WORLD_DIRS: Final = {
    "HOME": "home",
    "XDG_CONFIG_HOME": "config",
    "XDG_STATE_HOME": "state",
    "XDG_DATA_HOME": "data",
    "XDG_CACHE_HOME": "cache",
    "XDG_RUNTIME_DIR": "run",
}


def make_world(base: Path, uid: int | None = None, gid: int | None = None) -> dict[str, str]:
    """Create the world's directories under ``base`` (0700, owned by ``uid`` when given) and
    return the environment that points at them."""
    base.mkdir(mode=0o700, exist_ok=True)
    env: dict[str, str] = {}
    for var, name in WORLD_DIRS.items():
        path = base / name
        path.mkdir(mode=0o700)
        path.chmod(0o700)  # the umask never narrows what glove demands, but make it exact
        env[var] = str(path)
    if uid is not None and gid is not None:
        for path in (base, *(base / name for name in WORLD_DIRS.values())):
            os.chown(path, uid, gid)
    return env


@dataclass
class _Worlds:
    """Where the unprivileged user's worlds go this session, and the current test's one."""

    unpriv_base: Path | None = None
    scripts: Path | None = None
    unpriv_env: dict[str, str] | None = None


_WORLDS = _Worlds()


@pytest.fixture(scope="session", autouse=True)
def _session_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A world for the whole session, for what runs outside a test (session fixtures)."""
    saved = {var: os.environ.get(var) for var in WORLD_DIRS}
    os.environ.update(make_world(tmp_path_factory.mktemp("session-world")))
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        if _WORLDS.unpriv_base is not None:
            shutil.rmtree(_WORLDS.unpriv_base, ignore_errors=True)
        if _WORLDS.scripts is not None:
            shutil.rmtree(_WORLDS.scripts, ignore_errors=True)


@pytest.fixture(autouse=True)
def private_world(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """This test's own ``HOME`` and XDG directories (the environment it set, returned)."""
    base = tmp_path_factory.mktemp("world")
    env = make_world(base)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    _WORLDS.unpriv_env = None
    try:
        yield env
    finally:
        _WORLDS.unpriv_env = None


def unpriv_world(uid: int, gid: int) -> dict[str, str]:
    """The current test's world for the unprivileged user (made on first use), under a
    session directory that user can traverse but not list, each world 0700 and its own."""
    if _WORLDS.unpriv_env is not None:
        return _WORLDS.unpriv_env
    if _WORLDS.unpriv_base is None:
        _WORLDS.unpriv_base = Path(tempfile.mkdtemp(prefix="glove-unpriv-worlds-", dir="/var/tmp"))
        _WORLDS.unpriv_base.chmod(0o711)
    base = Path(tempfile.mkdtemp(prefix="w", dir=_WORLDS.unpriv_base))
    _WORLDS.unpriv_env = make_world(base, uid, gid)
    return _WORLDS.unpriv_env


def readable_copy(script: Path) -> Path:
    """``script`` copied where every user may read it, for a script the unprivileged user
    runs: a clone of the repository may sit in a directory only its owner can enter (CI's
    does). One copy per name for the session."""
    if _WORLDS.scripts is None:
        _WORLDS.scripts = Path(tempfile.mkdtemp(prefix="glove-test-scripts-", dir="/var/tmp"))
        _WORLDS.scripts.chmod(0o755)
    target = _WORLDS.scripts / script.name
    if not target.exists():
        shutil.copyfile(script, target)
        target.chmod(0o644)
    return target


#: The suites' sandbox profile: the default one, with the workspace at ``/workspace`` (as a
#: profile may ask) so probes and scripts can name it without knowing the host path. The
#: default of showing the workspace at its own host path is tested on its own
#: (``tests/container/test_workspace.py``).
AT_WORKSPACE_PROFILE = 'extends = "default"\n\n[workspace]\ntarget = "/workspace"\n'


def at_workspace_profile(directory: Path) -> str:
    """Write :data:`AT_WORKSPACE_PROFILE` into ``directory`` (readable by every user)."""
    path = directory / "at-workspace.toml"
    if not path.exists():
        path.write_text(AT_WORKSPACE_PROFILE)
        path.chmod(0o644)
    return str(path)


@dataclass(frozen=True)
class Unpriv:
    """The unprivileged user tests run sandboxes and daemons as, and its interpreter."""

    user: str
    uid: int
    gid: int
    python: str

    def credentials(self) -> dict[str, object]:
        """Popen keyword arguments that drop to the test user (empty when not root)."""
        if os.getuid() != 0:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def world(self) -> dict[str, str]:
        """The current test's ``HOME`` and XDG directories for this user (its own, 0700):
        the test's own world when not root."""
        if os.getuid() != 0:
            return {var: os.environ[var] for var in WORLD_DIRS}
        return unpriv_world(self.uid, self.gid)

    def command(self, *argv: str) -> list[str]:
        """Return ``argv`` wrapped to run as the unprivileged user (direct when not root), in
        the current test's world for that user."""
        if os.getuid() == 0:
            world = [f"{var}={value}" for var, value in self.world().items()]
            return ["runuser", "-u", self.user, "--", "env", *world, *argv]
        return list(argv)


@pytest.fixture(scope="session")
def unpriv() -> Unpriv:
    """The unprivileged test user made by scripts/setup; fails (never skips) if absent."""
    if os.getuid() != 0:
        me = pwd.getpwuid(os.getuid())
        return Unpriv(me.pw_name, me.pw_uid, me.pw_gid, shutil.which("python3") or "python3")
    user = os.environ.get("GLOVE_UNPRIV_USER", "glovetest")
    python = os.environ.get("GLOVE_UNPRIV_PYTHON", "/var/tmp/glove-unpriv/venv/bin/python")
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        pytest.fail(f"test user {user!r} missing: run scripts/setup as root")
    if not Path(python).exists():
        pytest.fail(f"unprivileged venv {python} missing: run scripts/setup as root")
    return Unpriv(user, entry.pw_uid, entry.pw_gid, python)
