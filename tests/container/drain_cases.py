"""Run by test_output_before_a_kill.py as root and as the unprivileged user (``python -c``).

Each case is a command that writes, then is ended by one limit (or meets it without being
ended: disk). It runs through both supervisors, the blocking ``run`` of ``glove exec`` and
the asyncio ``AsyncSandbox``, on pipes and on a PTY, with a consumer that reads at once and
one that is slow; one JSON line per run says what arrived. It asserts nothing: the test does.

argv: the case names to run (all when none).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time

import msgspec

from glove.container import AsyncSandbox, Limits, build_spec, decode_profile, run

PROFILE = b'extends = "default"\n[workspace]\nenabled = false\n'
#: Bytes of the big write: several pipe buffers, so the writer blocks on the supervisor.
BIG = 300_000
SPIN = "exec python3 -c 'while True: pass'"
BOMB = (
    "exec python3 -c 'import os, time\ntry:\n    while True:\n        if os.fork() == 0:\n"
    "            time.sleep(30)\nexcept OSError:\n    time.sleep(30)\n'"
)
HOG = "exec python3 -c 'b = bytearray(512 * 1024 * 1024); print(\"allocated\")'"
FILL = "dd if=/dev/zero of=/tmp/fill bs=64k count=64 2>/dev/null; echo after-enospc"
#: What each case writes first (a marker, a big block from a child, one from an orphan).
WRITES = f"echo first; head -c {BIG} /dev/zero | tr '\\0' x; echo; (echo orphan &); sleep 0.2; "
CASES: dict[str, tuple[str, dict[str, float | int]]] = {
    # The one case whose limit races the writes (the clock runs from the release): 4 s
    # leaves room for them under a loaded machine's scheduling and the slow consumers.
    "wall_time": (WRITES + "echo last; sleep 30", {"wall_time": 4.0}),
    "cpu_time": (WRITES + "echo last; " + SPIN, {"cpu_time": 0.5}),
    "pids": (WRITES + "echo last; " + BOMB, {"pids": 16}),
    "memory": (WRITES + "echo last; " + HOG, {"memory": 64 * 2**20}),
    "disk": (WRITES + "echo last; " + FILL, {"disk": 1024 * 1024}),
    "output": (WRITES + "echo last; yes", {"output": BIG + 4096}),
}


def spec_for(name: str, pty: bool):  # type: ignore[no-untyped-def]
    """The case's spec (the per-process rlimits accepted, for the unprivileged user)."""
    script, limits = CASES[name]
    spec = build_spec(decode_profile(PROFILE, "<t>"), ["/bin/sh", "-c", script], cwd="/",
                      host_env={})  # fmt: skip
    values = {n: getattr(spec.limits, n) for n in
              ("wall_time", "cpu_time", "memory", "pids", "disk", "output")}  # fmt: skip
    values.update(limits)
    weaker = frozenset({"all"}) if os.getuid() != 0 else frozenset()
    return msgspec.structs.replace(spec, limits=Limits(**values), pty=pty, accept_weaker=weaker)


def blocking(spec, slow: bool) -> tuple[object, bytes]:  # type: ignore[no-untyped-def]
    """Run through ``run``; a thread reads its stdout pipe (slowly: 4 KiB every 2 ms)."""
    read_end, write_end = os.pipe()
    got = bytearray()

    def reader() -> None:
        while chunk := os.read(read_end, 4096 if slow else 65536):
            got.extend(chunk)
            if slow:
                time.sleep(0.002)

    thread = threading.Thread(target=reader)
    thread.start()
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        result = run(spec, stdin=devnull, stdout=write_end, stderr=write_end)
    finally:
        os.close(write_end)
        os.close(devnull)
        thread.join()
        os.close(read_end)
    return result, bytes(got)


async def on_loop(spec, slow: bool) -> tuple[object, bytes]:  # type: ignore[no-untyped-def]
    """Run through ``AsyncSandbox``; a slow consumer holds each chunk for 5 ms."""
    got = bytearray()
    loop = asyncio.get_running_loop()

    def consume(stream: str, data: bytes) -> asyncio.Future[None] | None:
        del stream
        got.extend(data)
        if not slow:
            return None
        future: asyncio.Future[None] = loop.create_future()
        loop.call_later(0.005, future.set_result, None)
        return future

    box = AsyncSandbox(spec, on_output=consume)
    await box.start()
    return await box.wait(), bytes(got)


def main() -> None:
    """Every case, shell, terminal kind and consumer speed; one JSON line each."""
    for name in sys.argv[1:] or list(CASES):
        for pty in (False, True):
            for shell in ("blocking", "async"):
                for slow in (False, True):
                    spec = spec_for(name, pty)
                    if shell == "blocking":
                        result, out = blocking(spec, slow)
                    else:
                        result, out = asyncio.run(on_loop(spec, slow))
                    text = out.replace(b"\r\n", b"\n")
                    lines = [line for line in text.split(b"\n") if not line.startswith(b"x")]
                    limit = result.limits[name]  # type: ignore[attr-defined]
                    print(json.dumps({
                        "case": name, "pty": pty, "shell": shell, "slow": slow,
                        "outcome": result.outcome,  # type: ignore[attr-defined]
                        "exit_code": result.exit_code,  # type: ignore[attr-defined]
                        "mechanism": limit.mechanism, "hit": limit.hit,
                        "xs": text.count(b"x"),
                        "lines": [line.decode(errors="replace") for line in lines if line][:8],
                        "counted": result.output.bytes,  # type: ignore[attr-defined]
                        "received": len(out),
                    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
