"""``glove run``: a stock SDK client inside the sandbox, mediated tools, nothing else."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from glove.mcp.errors import INVALID_PARAMS
from tests.conftest import Unpriv

from .conftest import (
    FIXTURES,
    PYTHON,
    REPO,
    npm_server,
    read_audit,
    read_calls,
    sdk_server,
    write_config,
)

POLICY = 'version = 1\n\n[[tools]]\nname = "echo__echo"\n'
RUN_TIMEOUT_S = 90.0
READY_POLL_S = 0.05
GUEST_FILES = {"glove-mcp": "-r-xr-xr-x", "glove-relay": "-r-xr-xr-x"}


async def _when_ready(workspace: Path, probe: Callable[[], Awaitable[None]]) -> None:
    """Wait for the agent's ``ready`` file, run ``probe``, then let the agent go on."""
    try:
        async with asyncio.timeout(RUN_TIMEOUT_S):
            while not (workspace / "ready").exists():
                await asyncio.sleep(READY_POLL_S)
        await probe()
    finally:
        (workspace / "go").write_text("go")


def _host_connect_abstract() -> str:
    """Connect to the relay's abstract name from the host's network namespace."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect("\0glove-mcp")
    except OSError as exc:
        return type(exc).__name__
    return "connected"


async def _glove_run(
    tmp_path: Path,
    *extra: str,
    options: tuple[str, ...] = (),
    launcher: tuple[str, ...] = (PYTHON,),
    probe: Callable[[], Awaitable[None]] | None = None,
    venv: Path = REPO / ".venv",
) -> tuple[int, bytes, bytes]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    shutil.copy(FIXTURES / "sandboxed_agent.py", workspace)
    proc = await asyncio.create_subprocess_exec(
        *launcher,
        "-m",
        "glove",
        "run",
        "--config",
        str(tmp_path / "glove.toml"),
        "--workspace",
        str(workspace),
        "--bind",
        str(venv),
        *options,
        "--",
        str(venv / "bin" / "python"),
        "sandboxed_agent.py",  # relative: the agent starts in its workspace
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
    )
    if probe is not None:
        await _when_ready(workspace, probe)
    out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT_S)
    assert proc.returncode is not None
    return proc.returncode, out, err


async def test_agent_in_the_sandbox_reaches_tools_only_through_glove(tmp_path: Path) -> None:
    """The SDK client inside uses the shim; upstreams, host files and network are out of reach."""
    log = tmp_path / "calls"
    upstream = {"command": sdk_server("echo"), "env": {"GLOVE_TEST_CALL_LOG": str(log)}}
    config = write_config(tmp_path, {"echo": upstream}, POLICY)
    host_paths = [str(log), str(config), str(tmp_path / "audit.log"), str(FIXTURES)]
    from_host: list[str] = []

    async def probe() -> None:
        from_host.append(_host_connect_abstract())

    options = ("--env", "AGENT_HANDSHAKE=1")
    code, out, err = await _glove_run(tmp_path, *host_paths, options=options, probe=probe)
    assert code == 0, err.decode()
    report = json.loads(out)
    assert report["tools"] == ["echo__echo"]
    assert report["echo"] == "from the sandbox"
    assert report["denied"] == INVALID_PARAMS
    assert not [cmd for cmd in report["processes"] if "sdk_server" in cmd]
    assert len(report["processes"]) <= 3
    assert set(report["paths"].values()) == {"FileNotFoundError"}
    assert report["network"] in ("OSError", "ConnectionRefusedError")
    assert read_calls(log) == ["echo"]
    decisions = [record["decision"] for record in read_audit(tmp_path / "audit.log")]
    assert decisions == ["allow", "deny"]
    # The channel: an inherited descriptor the agent never holds, no socket file anywhere,
    # an abstract name that exists only in the sandbox's network namespace.
    assert report["inherited"] == []
    assert report["guest_dir"] == GUEST_FILES
    assert report["abstract"] == "connected"
    assert from_host == ["ConnectionRefusedError"]
    # The relay is one process inside the sandbox (so within its PID limit).
    assert len([cmd for cmd in report["processes"] if "/opt/glove/glove-relay 3 --" in cmd]) == 1


async def test_npm_upstream_inside_the_sandbox(tmp_path: Path) -> None:
    """server-everything on the host answers an SDK client inside the sandbox through Glove."""
    policy = 'version = 1\n\n[[tools]]\nname = "everything__echo"\n'
    write_config(tmp_path, {"everything": {"command": npm_server("mcp-server-everything")}}, policy)
    arguments = json.dumps({"message": "hello"})
    options = ("--env", "AGENT_TOOL=everything__echo", "--env", f"AGENT_ARGS={arguments}")
    code, out, err = await _glove_run(tmp_path, options=options)
    assert code == 0, err.decode()
    report = json.loads(out)
    assert report["tools"] == ["everything__echo"]
    assert report["echo"] == "Echo: hello"
    assert not [cmd for cmd in report["processes"] if "mcp-server-everything" in cmd]


def _readable_sdk_server(folder: Path, unpriv: Unpriv, mode: str) -> list[str]:
    """The SDK fixture server as the test user can run it (the work tree may be 0700)."""
    shutil.copy(FIXTURES / "sdk_server.py", folder)
    return [unpriv.python, str(folder / "sdk_server.py"), mode]


async def test_unprivileged_user_runs_a_mediated_agent(unpriv: Unpriv) -> None:
    """As the unprivileged test user, the sandboxed agent still reaches only the mediated tools."""
    folder = Path(tempfile.mkdtemp(prefix="glove-mcp-run-", dir="/var/tmp"))
    try:
        log = folder / "calls"
        server = _readable_sdk_server(folder, unpriv, "echo")
        upstream = {"command": server, "env": {"GLOVE_TEST_CALL_LOG": str(log)}}
        write_config(folder, {"echo": upstream}, POLICY)
        (folder / "ws").mkdir()
        if os.getuid() == 0:
            for path in (folder, folder / "ws", folder / "glove.toml", folder / "policy.toml"):
                os.chown(path, unpriv.uid, unpriv.gid)
        launcher = tuple(unpriv.command(unpriv.python))
        options = ("--accept-weaker", "all")
        venv = Path(unpriv.python).parent.parent
        code, out, err = await _glove_run(
            folder, str(log), options=options, launcher=launcher, venv=venv
        )
        assert code == 0, err.decode()
        report = json.loads(out)
        assert report["tools"] == ["echo__echo"]
        assert report["echo"] == "from the sandbox"
        assert report["paths"] == {str(log): "FileNotFoundError"}
        assert report["inherited"] == []
        assert report["guest_dir"] == GUEST_FILES
        assert read_calls(log) == ["echo"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_bad_config_refuses_before_running_anything(tmp_path: Path) -> None:
    """A configuration error exits 125 and the agent never starts."""
    write_config(tmp_path, {"echo": {"command": ["/nonexistent/server"]}}, POLICY)
    code, out, err = await _glove_run(tmp_path)
    assert code == 125
    assert out == b""
    assert b"cannot start" in err


FORKS = """
import os
read_fd, write_fd = os.pipe()
children = []
os.write(1, b"0\\n")
while len(children) < 64:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(write_fd)
        os.read(read_fd, 1)
        os._exit(0)
    children.append(pid)
    # Each count is written before the next fork: on a cgroup pids limit the supervisor
    # ends the sandbox at its next poll (50 ms) after the refused fork, never before.
    os.write(1, b"%d\\n" % len(children))
os.close(write_fd)
for pid in children:
    os.waitpid(pid, 0)
"""
PIDS_LIMIT = 12


async def _forks_under(
    folder: Path, command: str, *options: str, launcher: tuple[str, ...] = (PYTHON,)
) -> int:
    """Run the fork counter under ``glove COMMAND`` with PIDs capped; return its count."""
    proc = await asyncio.create_subprocess_exec(
        *launcher,
        "-m",
        "glove",
        command,
        *options,
        "--profile",
        str(folder / "pids.toml"),
        "--workspace",
        str(folder / "ws"),
        "--",
        "/usr/bin/python3",
        "forks.py",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=folder,
    )
    out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT_S)
    ended_by_the_limit = proc.returncode == 137 and b"pids limit" in err
    assert proc.returncode == 0 or ended_by_the_limit, err.decode()
    return int(out.split()[-1])


def _prepare_forks(folder: Path, server: list[str] | None = None) -> Path:
    """Write the PID-capped profile, the fork counter and a mediator config into ``folder``."""
    default = REPO / "src" / "glove" / "container" / "profiles" / "default.toml"
    text = default.read_text()
    assert "pids = 1024" in text
    (folder / "pids.toml").write_text(text.replace("pids = 1024", f"pids = {PIDS_LIMIT}"))
    (folder / "ws").mkdir(exist_ok=True)
    (folder / "ws" / "forks.py").write_text(FORKS)
    return write_config(folder, {"echo": {"command": server or sdk_server("echo")}}, POLICY)


async def test_the_relay_takes_one_pid_of_the_sessions_limit(tmp_path: Path) -> None:
    """Under one PID limit, an agent in glove run can fork one child fewer than in glove exec."""
    config = _prepare_forks(tmp_path)
    alone = await _forks_under(tmp_path, "exec")
    behind_relay = await _forks_under(tmp_path, "run", "--config", str(config))
    assert 0 < behind_relay == alone - 1


async def test_the_relay_takes_one_pid_as_the_unprivileged_user(unpriv: Unpriv) -> None:
    """With the per-user PID mechanism of an unprivileged launcher, the relay still counts."""
    folder = Path(tempfile.mkdtemp(prefix="glove-mcp-pids-", dir="/var/tmp"))
    try:
        config = _prepare_forks(folder, _readable_sdk_server(folder, unpriv, "echo"))
        if os.getuid() == 0:
            for path in (folder, *folder.rglob("*")):
                os.chown(path, unpriv.uid, unpriv.gid)
        launcher = tuple(unpriv.command(unpriv.python))
        weaker = ("--accept-weaker", "all")
        alone = await _forks_under(folder, "exec", *weaker, launcher=launcher)
        behind_relay = await _forks_under(
            folder, "run", "--config", str(config), *weaker, launcher=launcher
        )
        assert 0 < behind_relay == alone - 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


CRASHING_AGENT = """
import asyncio, os, time
from mcp import Client, StdioServerParameters

async def main():
    params = StdioServerParameters(command=os.environ["GLOVE_MCP_COMMAND"], args=[], env={})
    async with Client(params) as client:
        await client.call_tool("echo__crash", {})

try:
    asyncio.run(main())
except BaseException:
    pass
time.sleep(300)  # an agent that would outlive its mediation if nothing stopped it
"""


async def test_a_failed_mediation_stops_the_running_agent(tmp_path: Path) -> None:
    """One strike: an upstream that dies ends the session, and the agent with it (exit 124)."""
    log = tmp_path / "calls"
    upstream = {"command": sdk_server("echo"), "env": {"GLOVE_TEST_CALL_LOG": str(log)}}
    write_config(tmp_path, {"echo": upstream}, 'version = 1\n\n[[tools]]\nname = "echo__*"\n')
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "agent.py").write_text(CRASHING_AGENT)
    loop = asyncio.get_running_loop()
    started = loop.time()
    proc = await asyncio.create_subprocess_exec(
        PYTHON, "-m", "glove", "run", "--config", str(tmp_path / "glove.toml"),
        "--workspace", str(workspace), "--bind", str(REPO / ".venv"), "--",
        str(REPO / ".venv" / "bin" / "python"), "agent.py",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT_S)
    assert read_calls(log) == ["crash"]
    assert proc.returncode == 124, err.decode()
    assert b"the mediation failed" in err
    assert loop.time() - started < RUN_TIMEOUT_S  # not the agent's 300 s sleep


async def test_two_runs_with_one_config_share_its_audit_log(tmp_path: Path) -> None:
    """Two glove run side by side with the same config both work; the shared log tells them
    apart by run id and keeps one strictly increasing sequence."""
    config = write_config(tmp_path, {"echo": {"command": sdk_server("echo")}}, POLICY)
    workspaces = [tmp_path / "ws1", tmp_path / "ws2"]
    procs = []
    for workspace in workspaces:
        workspace.mkdir()
        shutil.copy(FIXTURES / "sandboxed_agent.py", workspace)
        procs.append(
            await asyncio.create_subprocess_exec(
                PYTHON,
                "-m",
                "glove",
                "run",
                "--config",
                str(config),
                "--workspace",
                str(workspace),
                "--bind",
                str(REPO / ".venv"),
                "--env",
                "AGENT_HANDSHAKE=1",
                "--",
                str(REPO / ".venv" / "bin" / "python"),
                "sandboxed_agent.py",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=tmp_path,
            )
        )
    async with asyncio.timeout(RUN_TIMEOUT_S):
        while not all((w / "ready").exists() for w in workspaces):
            await asyncio.sleep(READY_POLL_S)  # both mediations are up at once
    for workspace in workspaces:
        (workspace / "go").write_text("go")
    results = [await asyncio.wait_for(p.communicate(), RUN_TIMEOUT_S) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err.decode()
        assert json.loads(out)["echo"] == "from the sandbox"
    records = read_audit(tmp_path / "audit.log")
    assert [record["seq"] for record in records] == list(range(1, len(records) + 1))
    runs = {record["run"] for record in records}
    assert len(runs) == 2
    for run in runs:
        assert [r["decision"] for r in records if r["run"] == run] == ["allow", "deny"]
