"""Shared fixtures: the unprivileged test user and its readable virtualenv."""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

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

    def command(self, *argv: str) -> list[str]:
        """Return ``argv`` wrapped to run as the unprivileged user (direct when not root)."""
        if os.getuid() == 0:
            return ["runuser", "-u", self.user, "--", *argv]
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
