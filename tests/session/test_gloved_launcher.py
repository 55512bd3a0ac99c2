"""gloved's launcher process: gloved's child, a node of ``glove diag tree``, the parent of
every session's sandbox; killed, gloved fails closed (exits nonzero) and leaves no sandbox.

As root and as the unprivileged user, each with a real gloved in a private home.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from glove.exits import EXIT_GLOVED_FAILED
from tests.conftest import Unpriv

from ._gloved import MARKER, Gloved, leaked_sandboxes, plan_text

#: Bounds on events that happen at once; a broken run ends here instead of hanging.
EVENT_DEADLINE_S = 60.0


def _home(request: pytest.FixtureRequest, who: str, unpriv: Unpriv, tmp_path: Path) -> Gloved:
    if who == "root":
        return Gloved(Path(os.path.realpath(tmp_path)))
    base = Path(tempfile.mkdtemp(prefix="glove-launcher-", dir="/var/tmp"))
    os.chown(base, unpriv.uid, unpriv.gid)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    return Gloved(base, python=unpriv.python, creds=unpriv.credentials())


def _status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {field} for {pid}")


def _launcher_node(home: Gloved) -> dict[str, object]:
    done = home.glove("diag", "tree", "--json")
    assert done.returncode == 0, done.stderr
    root = json.loads(done.stdout)["root"]
    nodes = {child["name"]: child for child in root["children"]}
    assert "launcher" in nodes, list(nodes)
    text = home.glove("diag", "tree")
    assert text.returncode == 0, text.stderr
    line = next(line for line in text.stdout.splitlines() if "launcher" in line)
    assert f"pid {nodes['launcher']['pid']}" in line
    return dict(nodes["launcher"])


def _plan_file(home: Gloved, harness: str) -> Path:
    path = home.base / f"{harness}.json"
    path.write_text(plan_text(harness))
    if home.creds:
        os.chown(path, int(home.creds["user"]), int(home.creds["group"]))
    return path


def _create(home: Gloved, harness: str) -> str:
    done = home.glove("session", "create", str(_plan_file(home, harness)), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return str(json.loads(done.stdout)["session_id"])


def _sandbox_pids() -> list[int]:
    """The sandbox inits running the test's sleep harness (their command's parent)."""
    inits = []
    for pid in leaked_sandboxes():
        parent = int(_status(pid, "PPid"))
        if parent and "glove-init" in Path(f"/proc/{parent}/cmdline").read_text(errors="replace"):
            inits.append(parent)
    return inits


@pytest.mark.parametrize("who", ["root", "unpriv"] if os.getuid() == 0 else ["self"])
def test_the_launcher_is_the_daemons_child_and_every_sandboxs_parent(
    request: pytest.FixtureRequest, who: str, unpriv: Unpriv, tmp_path: Path
) -> None:
    home = _home(request, who, unpriv, tmp_path)
    home.setup()
    home.start()
    try:
        assert home.proc is not None
        node = _launcher_node(home)
        pid = int(str(node["pid"]))
        assert node["state"] == "running"
        assert int(_status(pid, "PPid")) == home.proc.pid  # what ps shows as its parent
        assert _status(pid, "Threads") == "1"
        assert Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"glove-launcher")
        session = _create(home, "sleep")
        deadline = time.monotonic() + EVENT_DEADLINE_S
        while not (inits := _sandbox_pids()):
            assert time.monotonic() < deadline, home.stderr()
            time.sleep(0.05)
        assert [int(_status(init, "PPid")) for init in inits] == [pid]
        stopped = home.glove("session", "stop", session)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        home.glove("session", "wait", session, "--json")
    finally:
        assert home.stop() == 0, home.stderr()
    assert not Path(f"/proc/{pid}").exists() or _status(pid, "State").startswith("Z")


@pytest.mark.parametrize("who", ["root", "unpriv"] if os.getuid() == 0 else ["self"])
def test_gloved_fails_closed_when_its_launcher_is_killed(
    request: pytest.FixtureRequest, who: str, unpriv: Unpriv, tmp_path: Path
) -> None:
    """kill -9 of the launcher while a session runs: gloved exits nonzero (one strike at the
    root), names the launcher, and no sandbox outlives it."""
    home = _home(request, who, unpriv, tmp_path)
    home.setup()
    home.start()
    assert home.proc is not None
    pid = int(str(_launcher_node(home)["pid"]))
    _create(home, "sleep")
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while not _sandbox_pids():
        assert time.monotonic() < deadline, home.stderr()
        time.sleep(0.05)
    os.kill(pid, 9)
    code = home.proc.wait(timeout=EVENT_DEADLINE_S)
    assert code == EXIT_GLOVED_FAILED, home.stderr()
    # The root's one line names the child and the cause (gloved's log, not a traceback's
    # last line: a session caught mid-launch is logged there as an internal error too).
    assert "launcher failed, stopping: LauncherGone" in home.stderr(), home.stderr()
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while leaked := leaked_sandboxes():
        assert time.monotonic() < deadline, f"sandboxes outlived the launcher: {leaked}"
        time.sleep(0.05)
    assert MARKER
