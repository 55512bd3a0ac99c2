"""gloved's single-instance lock across restarts (issue 20, item 8): a refused start exits
at once with one line; a lock a killed gloved left to a stray holder is waited for, named,
and refused if it is kept; a gloved killed with a sandbox and an MCP upstream alive is
restarted at once, and only the new gloved holds the lock."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Unpriv
from tests.mcp.conftest import FIXTURES

from ._gloved import HARNESSES, START_DEADLINE_S, Gloved, plan_text

#: How long a test waits for processes to end (an event with a deadline, never a timing).
END_DEADLINE_S = 30.0
WHO = ["root", "unpriv"] if os.getuid() == 0 else ["self"]

#: Holds gloved.lock as a stray child of a killed gloved would, with that gloved's pid in it.
HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.ftruncate(fd, 0)
os.pwrite(fd, (sys.argv[2] + "\n").encode(), 0)
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""

AGENT = r"""
import json, os, subprocess, time
proc = subprocess.Popen([os.environ["GLOVE_MCP_COMMAND"]], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE)
def ask(rid, method, params):
    message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    proc.stdin.write(json.dumps(message).encode() + b"\n"); proc.stdin.flush()
    while True:
        reply = json.loads(proc.stdout.readline())
        if reply.get("id") == rid:
            return reply
ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "t", "version": "1"}})
proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
proc.stdin.flush()
echo = ask(2, "tools/call", {"name": "echo__echo", "arguments": {"text": "up"}})
print(echo["result"]["content"][0]["text"], flush=True)
time.sleep(600)  # still running, with its upstream, when gloved is killed
"""


POLICY = 'version = 1\n\n[[tools]]\nname = "echo__echo"\n'


@dataclass
class Home:
    """A Glove home for one user, with a folder that user can read."""

    gloved: Gloved
    folder: Path
    python: str


@pytest.fixture(params=WHO)
def home(request: pytest.FixtureRequest, unpriv: Unpriv) -> Iterator[Home]:
    """A set-up home (gloved not started) as root and as the unprivileged owner."""
    base = Path(tempfile.mkdtemp(prefix="glove-restart-", dir="/var/tmp"))
    folder = base / "folder"
    folder.mkdir()
    if request.param == "unpriv":
        gloved = Gloved(base / "home", python=unpriv.python, creds=unpriv.credentials())
        python = unpriv.python
    else:
        gloved = Gloved(base / "home")
        python = gloved.python
    gloved.base.mkdir()
    if gloved.creds:
        for path in (base, folder, gloved.base):
            os.chown(path, unpriv.uid, unpriv.gid)
    try:
        yield Home(gloved, folder, python)
    finally:
        if gloved.proc is not None and gloved.proc.poll() is None:
            gloved.kill9()
        shutil.rmtree(base, ignore_errors=True)


def _openers(path: Path) -> list[int]:
    """Pids with ``path`` open (root sees every process)."""
    target = path.stat()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal():
            continue
        try:
            links = list((entry / "fd").iterdir())
        except OSError:
            continue
        for link in links:
            try:
                held = link.stat()
            except OSError:
                continue
            if (held.st_dev, held.st_ino) == (target.st_dev, target.st_ino):
                found.append(int(entry.name))
                break
    return sorted(found)


def _pids_running(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdecimal():
            try:
                if needle.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _until(predicate: Callable[[], bool], what: str | Callable[[], str]) -> None:
    deadline = time.monotonic() + END_DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.05)


def _holder(home: Home, recorded_pid: int) -> subprocess.Popen[str]:
    lock = home.gloved.runtime / "gloved.lock"
    proc = subprocess.Popen(
        [home.python, "-c", HOLDER, str(lock), str(recorded_pid)],
        **home.gloved.creds,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


def _release(holder: subprocess.Popen[str]) -> None:
    """Make the holder let go (its stdin closes) and reap it."""
    assert holder.stdin is not None
    assert holder.stdout is not None
    holder.stdin.close()
    holder.wait(timeout=END_DEADLINE_S)
    holder.stdout.close()


def _gone_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    done = subprocess.Popen(["/bin/true"])
    done.wait(timeout=60)
    return done.pid


def test_a_refused_start_exits_at_once_with_one_line(home: Home) -> None:
    """A second gloved beside a running one exits 2 at once with exactly one line naming
    the running one's pid and the lock; the first serves on."""
    home.gloved.setup()
    home.gloved.start()
    first = home.gloved.proc
    assert first is not None
    second = subprocess.run(
        [home.python, "-m", "glove.daemon"],
        **home.gloved.creds,
        env=home.gloved.env,
        capture_output=True,
        text=True,
        timeout=START_DEADLINE_S,
        check=False,
    )
    lock = home.gloved.runtime / "gloved.lock"
    assert second.returncode == 2
    assert second.stderr.splitlines() == [
        f"gloved: refusing to start: another gloved (pid {first.pid}) holds {lock}; stop it first"
    ]
    assert first.poll() is None
    done = home.gloved.glove("capabilities", "--json")
    assert done.returncode == 0, done.stderr
    assert home.gloved.stop() == 0


def test_a_gone_gloveds_lock_kept_by_a_stray_is_named_then_refused(home: Home) -> None:
    """The lock names a gloved that is gone but another process still holds it: gloved says
    so (naming the holder), waits a bounded time, exits 2 with the holder in its one refusal
    line; once the holder lets go, gloved starts."""
    home.gloved.setup()
    gone = _gone_pid()
    holder = _holder(home, gone)
    try:
        refused = home.gloved.spawn()
        refused.wait(timeout=START_DEADLINE_S)
        assert refused.returncode == 2, home.gloved.stderr()
        lines = home.gloved.stderr().splitlines()
        lock = home.gloved.runtime / "gloved.lock"
        held_by = f"its lock {lock} is still held by pid {holder.pid} ({home.python} -c"
        assert len(lines) == 2, lines
        assert f"gloved (pid {gone}) is gone but {held_by}" in lines[0]
        assert "waiting up to 5 s" in lines[0]
        assert lines[1].startswith(f"gloved: refusing to start: gloved (pid {gone}) is gone but")
        assert held_by in lines[1]
    finally:
        _release(holder)
    home.gloved.start()
    assert home.gloved.stop() == 0


def test_a_stray_holder_that_lets_go_during_the_wait_lets_gloved_start(home: Home) -> None:
    """While gloved waits for a gone gloved's stray holder, the holder ends: gloved takes the
    lock and starts (the restart after a kill -9 never depends on who exits first)."""
    home.gloved.setup()
    holder = _holder(home, _gone_pid())
    home.gloved.spawn()
    _until(lambda: "waiting up to" in home.gloved.stderr(), "gloved never said it waits")
    _release(holder)
    home.gloved.wait_ready()
    assert home.gloved.stop() == 0


def _tooled(home: Home) -> tuple[Path, str]:
    """Harness ``tools`` (agent + echo upstream) in gloved.toml; the work directory and the
    agent's path in the sandbox (unique: other runs of this suite may share the host)."""
    work = home.folder / "work"
    work.mkdir()
    name = f"agent-{secrets.token_hex(6)}.py"
    (work / name).write_text(AGENT)
    server = home.folder / "sdk_server.py"
    shutil.copy(FIXTURES / "sdk_server.py", server)
    agent = f"/workspace/work/{name}"
    harness = f'\n[harnesses.tools]\nargv = ["/usr/bin/python3", "{agent}"]\nmcp = "agent.toml"\n'
    home.gloved.setup(HARNESSES + harness)
    command = json.dumps([home.python, str(server), "echo"])
    (home.gloved.config / "agent.toml").write_text(
        f'policy = "policy.toml"\naudit = "unused.log"\n\n[upstreams.echo]\ncommand = {command}\n'
        'inherit_env = ["PATH", "HOME"]\n'
    )
    (home.gloved.config / "policy.toml").write_text(POLICY)
    for config in ("agent.toml", "policy.toml"):
        os.chmod(home.gloved.config / config, 0o600)
    if home.gloved.creds:
        uid, gid = int(home.gloved.creds["user"]), int(home.gloved.creds["group"])
        for path in (work, work / name, server):
            os.chown(path, uid, gid)
        for config in ("agent.toml", "policy.toml"):
            os.chown(home.gloved.config / config, uid, gid)
    return work, agent


def test_kill9_with_a_sandbox_and_an_upstream_alive_then_an_immediate_restart(
    home: Home,
) -> None:
    """gloved is SIGKILLed while a session's sandbox and its MCP upstream run; started again
    at once, it comes up (waiting, if at all, for a stray holder), only it holds the lock,
    the upstream and the sandbox are gone, the session says daemon_lost, a new one runs."""
    gloved = home.gloved
    work, agent = _tooled(home)
    gloved.start()
    made = gloved.glove("init", "work", str(work), "--json")
    assert made.returncode == 0, made.stderr
    plan = home.folder / "tools.json"
    plan.write_text(plan_text("tools", exposures=["work"]))
    ok = home.folder / "ok.json"
    ok.write_text(plan_text("ok"))
    if gloved.creds:
        for path in (plan, ok):
            os.chown(path, int(gloved.creds["user"]), int(gloved.creds["group"]))
    done = gloved.glove("session", "create", str(plan), "--json")
    assert done.returncode == 0, done.stderr
    session_id = json.loads(done.stdout)["session_id"]
    stdout = gloved.state / "sessions-data" / session_id / "stdout"
    _until(
        lambda: stdout.exists() and stdout.read_bytes() == b"up\n",
        lambda: (
            "the agent never reached its upstream: "
            + gloved.glove("session", "status", session_id, "--json").stdout
            + gloved.stderr()
        ),
    )
    upstream = str(home.folder / "sdk_server.py")
    assert _pids_running(upstream), "control: the upstream runs"
    gloved.kill9()
    gloved.start()  # at once: no waiting for the old gloved's children first
    assert gloved.proc is not None
    new_pid = gloved.proc.pid
    lock = gloved.runtime / "gloved.lock"
    _until(lambda: _openers(lock) == [new_pid], f"the lock is held by {_openers(lock)}")
    _until(lambda: not _pids_running(upstream), "the old gloved's upstream outlived it")
    _until(lambda: not _pids_running(agent), "the old gloved's sandbox outlived it")
    waited = gloved.glove("session", "wait", session_id, "--json")
    assert json.loads(waited.stdout)["outcome"]["kind"] == "daemon_lost", waited.stdout
    fresh = gloved.glove("session", "create", str(ok), "--json")
    assert fresh.returncode == 0, fresh.stderr
    again = gloved.glove("session", "wait", json.loads(fresh.stdout)["session_id"])
    assert again.returncode == 0, again.stdout + again.stderr
    assert gloved.stop() == 0
