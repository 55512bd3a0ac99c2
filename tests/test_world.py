"""Every test runs in a private HOME and XDG world (``tests/conftest.py``), so the suite runs
beside the user's own Glove, a running gloved included, and leaves it untouched."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from glove.config import choose_runtime_dir, glove_paths
from tests.conftest import REPO, WORLD_DIRS, Unpriv

START_DEADLINE_S = 60.0
#: A test of the suite that the user's own gloved broke before the worlds: it starts a
#: gloved of its own with only a runtime directory given (tests/control/test_notify.py).
NEIGHBOUR = "tests/control/test_notify.py::test_ready_comes_from_gloved_once_its_socket_answers"
NEIGHBOUR_DEADLINE_S = 300

PROBE = """
import json, os
from glove.config import choose_runtime_dir, glove_paths
paths = glove_paths()
print(json.dumps({
    "env": {var: os.environ.get(var) for var in %r},
    "config": str(paths.config_dir), "state": str(paths.state_dir),
    "runtime": str(choose_runtime_dir().directory), "source": choose_runtime_dir().source,
}))
"""


def test_a_test_runs_in_a_world_of_its_own(private_world: dict[str, str]) -> None:
    """HOME and the five XDG directories are this test's own (0700, ours, one base, not the
    user's home), and Glove's config, state and runtime directories resolve inside them."""
    assert set(private_world) == set(WORLD_DIRS)
    bases = {Path(value).parent for value in private_world.values()}
    assert len(bases) == 1, private_world
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for var, value in private_world.items():
        assert os.environ[var] == value
        info = Path(value).lstat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o700, os.getuid()), var
        assert not Path(value).is_relative_to(real_home) or real_home == Path("/"), value
    paths = glove_paths()
    assert paths.config_dir == Path(private_world["XDG_CONFIG_HOME"]) / "glove"
    assert paths.state_dir == Path(private_world["XDG_STATE_HOME"]) / "glove"
    choice = choose_runtime_dir()
    assert (choice.source, choice.directory.parent) == (
        "XDG_RUNTIME_DIR",
        Path(private_world["XDG_RUNTIME_DIR"]),
    )


def test_the_unprivileged_user_runs_in_a_world_it_owns(
    unpriv: Unpriv, private_world: dict[str, str]
) -> None:
    """A command run as the unprivileged user gets a HOME and XDG directories that user owns
    (0700), its own runtime directory is chosen from them, and ``glove setup`` works there."""
    probe = PROBE % (list(WORLD_DIRS),)
    done = subprocess.run(
        unpriv.command(unpriv.python, "-c", probe), capture_output=True, text=True, timeout=60,
        check=False, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert set(seen["env"]) == set(WORLD_DIRS)
    for var, value in seen["env"].items():
        assert value is not None, var
        info = Path(value).lstat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o700, unpriv.uid), var
        if os.getuid() == 0:
            assert value != private_world[var]  # root's world is root's
    assert seen["source"] == "XDG_RUNTIME_DIR"
    assert seen["runtime"] == str(Path(seen["env"]["XDG_RUNTIME_DIR"]) / "glove")
    assert seen["config"] == str(Path(seen["env"]["XDG_CONFIG_HOME"]) / "glove")
    setup = subprocess.run(
        unpriv.command(unpriv.python, "-m", "glove", "setup", "--json"), capture_output=True,
        text=True, timeout=60, check=False, cwd="/",
    )  # fmt: skip
    assert setup.returncode == 0, setup.stderr
    assert json.loads(setup.stdout)["state_dir"] == str(
        Path(seen["env"]["XDG_STATE_HOME"]) / "glove"
    )


def _digest(home: Path) -> dict[str, str]:
    """Every regular file of Glove's own under ``home``, with its content's digest."""
    found: dict[str, str] = {}
    for top in (".config/glove", ".local/state/glove", ".local/share/glove"):
        for path in sorted((home / top).rglob("*")):
            if path.is_file() and not path.is_symlink():
                found[str(path.relative_to(home))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_the_suite_runs_beside_the_users_own_gloved(tmp_path: Path) -> None:
    """With a gloved of the user's own running in the user's default environment (HOME, no
    XDG variables), a test that starts a gloved of its own still passes when the suite is
    run in that same environment, and the user's Glove files are unchanged."""
    home = Path(tempfile.mkdtemp(prefix="glove-users-home-", dir="/var/tmp"))
    user_env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    user_env["HOME"] = str(home)
    glove = [sys.executable, "-m", "glove"]
    gloved = None
    try:
        setup = subprocess.run(
            [*glove, "setup"], env=user_env, capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        assert setup.returncode == 0, setup.stderr
        gloved = subprocess.Popen(
            [sys.executable, "-m", "glove.daemon"], env=user_env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + START_DEADLINE_S
        while subprocess.run([*glove, "capabilities"], env=user_env, capture_output=True,
                             timeout=60, check=False).returncode != 0:  # fmt: skip
            assert gloved.poll() is None, gloved.stderr.read() if gloved.stderr else ""
            assert time.monotonic() < deadline, "the user's gloved never answered"
            time.sleep(0.1)
        before = _digest(home)
        assert any(name.startswith(".local/state/glove/receipts") for name in before), before
        suite = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--basetemp", str(tmp_path / "basetemp"), NEIGHBOUR],
            env=user_env, cwd=REPO, capture_output=True, text=True,
            timeout=NEIGHBOUR_DEADLINE_S, check=False,
        )  # fmt: skip
        assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
        assert "2 passed" in suite.stdout, suite.stdout[-2000:]
        assert gloved.poll() is None, "the user's gloved died"
        assert _digest(home) == before, "the suite changed the user's Glove files"
    finally:
        if gloved is not None:
            gloved.send_signal(signal.SIGTERM)
            try:
                gloved.wait(timeout=30)
            finally:
                if gloved.poll() is None:
                    gloved.kill()
                    gloved.wait()
                if gloved.stderr is not None:
                    gloved.stderr.close()
        subprocess.run(["rm", "-rf", str(home)], check=False)
