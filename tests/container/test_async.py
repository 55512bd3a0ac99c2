"""The asyncio shell: a sandbox owned from the event loop, with no thread held for its life."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from glove.container import (
    AsyncSandbox,
    Limits,
    SandboxResult,
    SandboxSpec,
    build_spec,
    decode_profile,
)
from tests.conftest import Unpriv

PROFILE = b'extends = "default"\n[workspace]\nenabled = false\n'


def _spec(*argv: str, **limits: float | int) -> SandboxSpec:
    spec = build_spec(decode_profile(PROFILE, "<test>"), list(argv), cwd="/", host_env={})
    if limits:
        import msgspec

        values = {name: getattr(spec.limits, name) for name in ("wall_time", "cpu_time",
                  "memory", "pids", "disk", "output")}  # fmt: skip
        values.update(limits)
        spec = msgspec.structs.replace(spec, limits=Limits(**values))
    return spec


class Collect:
    """An output consumer that keeps everything, optionally slow."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.data: dict[str, bytearray] = {}
        self.delay_s = delay_s
        self.waits = 0

    def __call__(self, stream: str, data: bytes) -> asyncio.Future[None] | None:
        self.data.setdefault(stream, bytearray()).extend(data)
        if not self.delay_s:
            return None
        self.waits += 1
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(self.delay_s, future.set_result, None)
        return future


async def _run(spec: SandboxSpec, consumer: Collect | None = None) -> tuple[SandboxResult, Collect]:
    sink = consumer or Collect()
    box = AsyncSandbox(spec, on_output=sink)
    await box.start()
    return await box.wait(), sink


async def test_a_command_runs_and_its_output_arrives() -> None:
    """stdout and stderr reach the consumer; the result is the pure core's verdict."""
    result, sink = await _run(_spec("/bin/sh", "-c", "echo out; echo err >&2; exit 3"))
    assert (result.outcome, result.exit_code) == ("exited", 3)
    assert bytes(sink.data["stdout"]) == b"out\n"
    assert bytes(sink.data["stderr"]) == b"err\n"


async def test_an_ended_terminal_hands_out_no_closed_master() -> None:
    """Once the sandbox released its terminal, ``master`` is None: the closed master's number
    may already name another thread's file (a late viewer dup'ing it got EBADF, or that file)."""
    import msgspec

    box = AsyncSandbox(msgspec.structs.replace(_spec("/bin/true"), pty=True), on_output=Collect())
    await box.start()
    assert box.master is not None
    await box.wait()
    assert box.master is None
    assert box.write_input(b"x") == 0


async def test_an_empty_stdin_reads_end_of_file() -> None:
    """Without a host stdin the command reads EOF at once (gloved's pipes sessions)."""
    result, sink = await _run(_spec("/bin/sh", "-c", "cat; echo done"))
    assert bytes(sink.data["stdout"]) == b"done\n"
    assert result.exit_code == 0


async def test_denials_are_answered_on_the_loop_and_counted() -> None:
    """Hundreds of denied syscalls never stall the sandbox: the listener is served, and each
    refusal is told apart (an expected probe, or a violation)."""
    script = (
        "import ctypes\nlibc = ctypes.CDLL(None)\n"
        "for _ in range(500): libc.unshare(0x20000)\n"
        "for _ in range(7): libc.mount(b'x', b'/tmp', b'tmpfs', 0, None)\n"
    )
    result, _ = await _run(_spec("/usr/bin/python3", "-c", script))
    assert result.exit_code == 0
    assert result.expected_denials == {"namespace_probe": 500}
    assert result.denied_syscalls == {"mount": 7}
    assert result.violation == "seccomp"


async def test_many_sandboxes_hold_no_thread_each() -> None:
    """Thirty sandboxes run at once from one loop; the process does not grow a thread each."""
    before = threading.active_count()
    peak = before
    boxes = [AsyncSandbox(_spec("sleep", "1"), on_output=Collect()) for _ in range(30)]

    async def start(box: AsyncSandbox) -> None:
        await box.start()

    await asyncio.gather(*(start(box) for box in boxes))
    for _ in range(5):
        peak = max(peak, threading.active_count())
        await asyncio.sleep(0.1)
    results = await asyncio.gather(*(box.wait() for box in boxes))
    assert all(r.outcome == "exited" for r in results)
    assert peak - before < 10, f"{peak - before} threads while 30 sandboxes ran"


async def test_a_slow_consumer_pauses_the_command_not_the_limits() -> None:
    """Backpressure: a consumer that takes its time slows the writer; nothing is lost."""
    sink = Collect(delay_s=0.05)
    spec = _spec("/bin/sh", "-c", "head -c 1000000 /dev/zero")
    result, _ = await _run(spec, sink)
    assert result.exit_code == 0
    assert len(sink.data["stdout"]) == 1_000_000
    assert sink.waits > 1


async def test_the_wall_time_limit_kills_the_tree() -> None:
    """The wall-clock watchdog is a loop timer; its kill is reported as the limit."""
    result, _ = await _run(_spec("sleep", "30", wall_time=0.5))
    assert result.outcome == "limit"
    assert result.limits["wall_time"].hit is True


async def test_output_is_cut_at_the_cap() -> None:
    """The output cap is counted in the shell exactly as in glove exec."""
    result, sink = await _run(_spec("yes", output=1000))
    assert len(sink.data["stdout"]) == 1000
    assert result.output.truncated is True


async def test_kill_and_stop_end_it_as_cancelled() -> None:
    """kill() is a cancel; stop() waits for the end on the loop."""
    box = AsyncSandbox(_spec("sleep", "30"), on_output=Collect())
    await box.start()
    result = await box.stop()
    assert result.outcome == "signaled"
    assert result.error == "cancelled by the caller"
    assert box.process is not None
    with pytest.raises(ProcessLookupError):
        os.kill(box.process.pid, 0)  # reaped


async def test_a_sandbox_that_cannot_be_built_is_a_setup_result(tmp_path: Path) -> None:
    """A missing binary is an exec error, a bad bind a raised SpecError, as in glove exec."""
    result, _ = await _run(_spec("/nonexistent-command"))
    assert result.outcome == "exec_error"
    assert result.exit_code == 127


async def test_launching_while_another_thread_wants_the_gil_never_hangs() -> None:
    """A Python thread spinning on bytecode keeps asking for the GIL while sandboxes are
    launched from executor threads (gloved's shape): every sandbox still starts and ends
    (a raw clone3 child used to wait forever to hand the GIL to a thread it does not have)."""
    stop = threading.Event()

    def spin() -> None:
        count = 0
        while not stop.is_set():
            count += 1

    spinner = threading.Thread(target=spin, daemon=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a drop request is pending almost all the time
    spinner.start()
    try:
        async with asyncio.timeout(120):
            for _ in range(4):
                results = await asyncio.gather(*(_run(_spec("/bin/true")) for _ in range(8)))
                assert [r.exit_code for r, _ in results] == [0] * 8
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        spinner.join()


@pytest.mark.skipif(os.getuid() != 0, reason="cgroup limits here need root")
async def test_cgroup_hits_end_the_sandbox_on_the_loop() -> None:
    """The loop's cgroup poll ends the tree for CPU time (the v2 group's cpu.stat here) and
    for a refused fork, each reported as its limit with its mechanism."""
    spin, _ = await _run(_spec("python3", "-c", "while True: pass", cpu_time=0.5))
    assert spin.outcome == "limit"
    assert spin.error == "cpu_time limit reached"
    assert spin.limits["cpu_time"].hit is True
    assert spin.limits["cpu_time"].mechanism.startswith("cgroup-")
    forks = (
        "import os, time\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            time.sleep(30)\nexcept OSError:\n    time.sleep(30)\n"
    )
    bomb, _ = await _run(_spec("python3", "-c", forks, pids=16))
    assert bomb.outcome == "limit"
    assert bomb.error == "pids limit reached"
    assert bomb.limits["pids"].hit is True
    assert bomb.limits["pids"].mechanism.startswith("cgroup-")


_NPROC_ON_THE_LOOP = r"""
import asyncio, json
import msgspec
from glove.container import AsyncSandbox, build_spec, decode_profile

PROFILE = b'extends = "default"\n[workspace]\nenabled = false\n'
BOMB = (
    "import os, time\ntry:\n    while True:\n        if os.fork() == 0:\n"
    "            time.sleep(30)\nexcept OSError:\n    time.sleep(30)\n"
)
HOLD = (  # with itself 14 processes, --pids 16 less two, for a second (many polls)
    "import os, time\nfor _ in range(13):\n    if os.fork() == 0:\n"
    "        time.sleep(1); os._exit(0)\nwhile True:\n    try: os.wait()\n"
    "    except ChildProcessError: break\n"
)

async def one(code):
    spec = build_spec(decode_profile(PROFILE, "<t>"), ["python3", "-c", code], cwd="/",
                      host_env={})
    spec = msgspec.structs.replace(spec, limits=msgspec.structs.replace(spec.limits, pids=16))
    box = AsyncSandbox(spec, on_output=lambda stream, data: None)
    await box.start()
    r = await box.wait()
    p = r.limits["pids"]
    return [r.outcome, r.exit_code, r.error, p.mechanism, p.hit]

async def main():
    print(json.dumps([await one(BOMB), await one(HOLD)]))

asyncio.run(main())
"""


def test_the_loop_ends_a_tree_at_its_user_namespace_nproc(unpriv: Unpriv) -> None:
    """Unprivileged, without a cgroup: the loop's poll counts the tree and kills it for pids
    once it reaches RLIMIT_NPROC, and leaves one holding limit-2 processes alone."""
    done = subprocess.run(
        unpriv.command(unpriv.python, "-c", _NPROC_ON_THE_LOOP),
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    bomb, hold = json.loads(done.stdout)
    assert bomb == ["limit", 137, "pids limit reached", "rlimit-nproc-userns", True]
    assert hold == ["exited", 0, None, "rlimit-nproc-userns", None]
