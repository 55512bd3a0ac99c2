"""The launch API used by ``glove run`` and ``gloved``: specs, passed fds, threads, asyncio."""

from __future__ import annotations

import os
import select
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from glove.container import (
    Bind,
    Limits,
    SandboxProcess,
    SandboxSpec,
    SpecError,
    build_spec,
    launch,
    load_profile,
    run,
    run_async,
)

SYSTEM_BINDS = (
    Bind("/usr"),
    Bind("/bin", optional=True),
    Bind("/lib", optional=True),
    Bind("/lib64", optional=True),
)
ENV = {"PATH": "/usr/bin:/bin"}


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A private host directory used as the sandbox workspace."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as path:
        yield Path(path)


def _capture(spec: SandboxSpec) -> tuple[int, str, str, str]:
    """Run ``spec`` with its output captured in files; return outcome fields and output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with open(os.devnull, "rb") as null:
            result = run(spec, stdin=null.fileno(), stdout=out.fileno(), stderr=err.fileno())
        out.seek(0)
        err.seek(0)
        return result.exit_code, result.outcome, out.read().decode(), err.read().decode()


def test_minimal_spec_runs(workspace: Path) -> None:
    """A spec built in code (no profile) runs and returns the exit code."""
    spec = SandboxSpec(
        argv=("sh", "-c", "pwd; exit 4"), binds=SYSTEM_BINDS, workspace=str(workspace), env=ENV
    )
    code, outcome, out, _ = _capture(spec)
    assert (code, outcome, out) == (4, "exited", "/workspace\n")


def test_passed_socket_is_the_only_extra_fd(workspace: Path) -> None:
    """A socket passed as fd 3 works from inside; no other descriptor reaches the command."""
    host_end, inside_end = socket.socketpair()
    leaked_dir = os.open("/", os.O_RDONLY | os.O_DIRECTORY)  # inheritable-looking host fd
    os.set_inheritable(leaked_dir, True)
    try:
        script = "ls /proc/self/fd; echo ping >&3; read line <&3; echo got=$line"
        spec = SandboxSpec(
            argv=("sh", "-c", script),
            binds=SYSTEM_BINDS,
            workspace=str(workspace),
            env=ENV,
            pass_fds={3: inside_end.fileno()},
        )
        host_end.settimeout(30)
        replies: list[bytes] = []

        def answer() -> None:
            replies.append(host_end.recv(100))
            host_end.sendall(b"pong\n")

        thread = threading.Thread(target=answer)
        thread.start()
        code, _, out, _ = _capture(spec)
        thread.join(30)
    finally:
        os.close(leaked_dir)
        host_end.close()
        inside_end.close()
    assert code == 0
    lines = out.split()
    assert lines[-1] == "got=pong"
    assert replies == [b"ping\n"]
    assert sorted(int(fd) for fd in lines[:-1]) == [0, 1, 2, 3, 4]  # 4: ls's own dir fd


def test_launch_from_a_multithreaded_process(workspace: Path) -> None:
    """clone3 with the GIL held launches correctly while other threads are busy."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    spinners = [threading.Thread(target=spin) for _ in range(3)]
    for thread in spinners:
        thread.start()
    try:
        spec = SandboxSpec(argv=("true",), binds=SYSTEM_BINDS, workspace=str(workspace), env=ENV)
        codes = [_capture(spec)[0] for _ in range(10)]
    finally:
        stop.set()
        for thread in spinners:
            thread.join()
    assert codes == [0] * 10


def test_fork_fallback_path(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork, unshare, fork path gives the same sandbox as clone3."""
    monkeypatch.setenv("GLOVE_SANDBOX_LAUNCH", "fork")
    spec = SandboxSpec(
        argv=("sh", "-c", "echo $$; hostname; grep NoNewPrivs /proc/self/status"),
        binds=SYSTEM_BINDS,
        workspace=str(workspace),
        env=ENV,
    )
    code, outcome, out, _ = _capture(spec)
    assert (code, outcome) == (0, "exited")
    assert out.split() == ["2", "glove", "NoNewPrivs:", "1"]


@pytest.mark.parametrize("mode", ["fork", "clone3"])
def test_the_command_sees_eof_when_the_launcher_closes_its_stdin(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Only the launcher holds the stdin pipe's write end: closing it ends ``cat``.

    (The fork path's reaper once kept every launcher fd open, so a contained agent reading
    its stdin, as ``codex exec`` does, waited for ever.)
    """
    monkeypatch.setenv("GLOVE_SANDBOX_LAUNCH", mode)
    spec = SandboxSpec(argv=("cat",), binds=SYSTEM_BINDS, workspace=str(workspace), env=ENV)
    stdin_read, stdin_write = os.pipe()
    with tempfile.TemporaryFile() as out, open(os.devnull, "wb") as null:
        process = launch(spec, (stdin_read, out.fileno(), null.fileno()))
        os.close(stdin_read)
        os.write(stdin_write, b"to the end\n")
        os.close(stdin_write)
        try:
            ended = select.select([process.pidfd], [], [], 30)[0]
        finally:
            process.close()  # kills what is left
        out.seek(0)
        assert ended, "cat never saw EOF on its stdin"
        assert os.waitstatus_to_exitcode(process.wait()) == 0
        assert out.read() == b"to the end\n"


def test_a_bind_pinned_to_another_directory_is_refused(workspace: Path, tmp_path: Path) -> None:
    """A bind with an ``identity`` is shown only if its source is still that directory: one
    swapped in after it was pinned (an exposure replaced before the launch) is refused."""
    shown = tmp_path / "exposed"
    shown.mkdir()
    info = shown.stat()
    pinned = Bind(source=str(shown), target="/mnt/x", identity=(info.st_dev, info.st_ino))
    base = SandboxSpec(argv=("ls", "/mnt/x"), binds=SYSTEM_BINDS, workspace=str(workspace), env=ENV)
    ok = msgspec.structs.replace(base, binds=(*SYSTEM_BINDS, pinned))
    assert _capture(ok)[:2] == (0, "exited")
    shown.rename(tmp_path / "old")
    shown.mkdir()  # same path, another directory
    with pytest.raises(SpecError, match="not the directory it was pinned as"):
        _capture(ok)


async def test_run_async_does_not_block_the_loop(workspace: Path) -> None:
    """run_async supervises in a worker thread; the event loop keeps running meanwhile."""
    import asyncio

    spec = SandboxSpec(argv=("sleep", "0.5"), binds=SYSTEM_BINDS, workspace=str(workspace), env=ENV)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(tick())
    with open(os.devnull, "wb") as null:
        result = await run_async(
            spec, stdin=null.fileno(), stdout=null.fileno(), stderr=null.fileno()
        )
    ticker.cancel()
    assert result.outcome == "exited"
    assert ticks >= 5


def test_launch_and_kill_the_tree(workspace: Path) -> None:
    """launch() returns a live SandboxProcess whose kill() ends the whole tree."""
    spec = SandboxSpec(
        argv=("sh", "-c", "sleep 100 & sleep 100"),
        binds=SYSTEM_BINDS,
        workspace=str(workspace),
        env=ENV,
    )
    with open(os.devnull, "wb") as null:
        process = launch(spec, (null.fileno(), null.fileno(), null.fileno()))
    try:
        assert process.poll() is None
        process.kill()
        status = process.wait()
        assert os.WIFSIGNALED(status)
    finally:
        process.close()


def test_profile_spec_builds_with_overrides(workspace: Path) -> None:
    """build_spec applies the default profile and the caller's limits."""
    from glove.container import Overrides

    spec = build_spec(
        load_profile("default"),
        ["true"],
        cwd=str(workspace),
        host_env={},
        overrides=Overrides(limits={"wall_time": 5.0}),
    )
    assert spec.workspace == str(workspace)
    assert spec.limits == Limits(
        wall_time=5.0, cpu_time=8 * 3600, memory=4 * 2**30, pids=1024, disk=2**30, output=4 * 2**30
    )
    assert _capture(spec)[:2] == (0, "exited")


def test_no_descriptor_or_cgroup_leaks_across_runs(workspace: Path) -> None:
    """Repeated runs (ok, failing setup, refused limit) leave the launcher's fd count flat."""
    from glove.container import LimitRefused

    ok = SandboxSpec(
        argv=("true",),
        binds=SYSTEM_BINDS,
        workspace=str(workspace),
        env=ENV,
        limits=Limits(pids=64, wall_time=10),
    )
    broken = SandboxSpec(argv=("true",), binds=(*SYSTEM_BINDS, Bind("/nonexistent-glove")), env=ENV)
    refused = SandboxSpec(argv=("true",), binds=SYSTEM_BINDS, env=ENV, limits=Limits(cpu_time=1.0))
    _capture(ok)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        assert _capture(ok)[:2] == (0, "exited")
        with pytest.raises(Exception, match="nonexistent-glove"):
            _capture(broken)
        if os.geteuid() != 0:
            with pytest.raises(LimitRefused):
                _capture(refused)
    assert len(os.listdir("/proc/self/fd")) == before
    leftovers = list(Path("/sys/fs/cgroup/pids/glove").glob(f"sbx-{os.getpid()}-*"))
    assert leftovers == []


async def test_cancelling_run_async_kills_the_sandbox(workspace: Path) -> None:
    """Cancelling the awaiting task kills the sandbox tree before the cancellation lands."""
    import asyncio
    import subprocess

    marker = f"glove-cancel-{os.getpid()}"
    spec = SandboxSpec(
        argv=("bash", "-c", f"(exec -a {marker} sleep 300) & exec -a {marker} sleep 300"),
        binds=SYSTEM_BINDS,
        workspace=str(workspace),
        env=ENV,
    )
    with open(os.devnull, "wb") as null:
        task = asyncio.create_task(
            run_async(spec, stdin=null.fileno(), stdout=null.fileno(), stderr=null.fileno())
        )
        for _ in range(200):
            await asyncio.sleep(0.05)
            found = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, check=False)
            if len(found.stdout.split()) == 2:
                break
        assert len(found.stdout.split()) == 2, "control: the sandbox is running"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    left = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, check=False)
    assert left.stdout == b""


def test_sandbox_outlives_the_launching_thread(workspace: Path) -> None:
    """A sandbox launched from a thread that then ends keeps running until killed."""
    spec = SandboxSpec(argv=("sleep", "30"), binds=SYSTEM_BINDS, workspace=str(workspace), env=ENV)
    launched: list[object] = []
    with open(os.devnull, "wb") as null:
        thread = threading.Thread(
            target=lambda: launched.append(launch(spec, (null.fileno(),) * 3))
        )
        thread.start()
        thread.join()
    process = launched[0]
    assert isinstance(process, SandboxProcess)
    try:
        import time

        time.sleep(0.5)
        assert process.poll() is None  # the launching thread is gone, the sandbox is not
    finally:
        process.close()
    assert process.reaped_status is not None
