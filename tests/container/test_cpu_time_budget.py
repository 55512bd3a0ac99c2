"""``--cpu-time`` is the command's budget: the init's own setup inside the group is not in it.

The CPU-time watchdog reads the whole group's usage (``cpu.stat``), and the sandbox's init is
in that group from before it builds the root. On a slow machine (a TCG guest: 0.13 to 0.38 s
of setup measured) that setup was spent from the command's budget, so a command could be
killed before it printed what it had the time to print. The init reports its setup CPU on
its ``ready`` line and the watchdog leaves it out; here a root with thousands of binds
makes the setup cost about 0.4 s of CPU time against a 0.6 s budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from glove.container._status import Ready, StatusDecoder, StatusLineError, encode
from tests.conftest import Unpriv

#: A budget a little above the setup the binds below cost, and the command's own CPU time
#: at which it prints (about half of it: it never gets there if the setup is counted).
BUDGET_S = 0.6
PRINT_AT_S = 0.35
BINDS = 8000
USER_BINDS = 900
#: Runs each supervisor has to let its command print once (see the test).
ATTEMPTS = 4

_HEAVY_SETUP = f"""
import asyncio, json, os, sys
import msgspec
from glove.container import AsyncSandbox, Bind, build_spec, decode_profile, run

PROFILE = b'extends = "default"\\n[workspace]\\nenabled = false\\n'
SPIN = (
    "import time\\n"
    "while time.process_time() < {PRINT_AT_S}: pass\\n"
    "print('own cpu', round(time.process_time(), 2), flush=True)\\n"
    "while True: pass\\n"
)
spec = build_spec(decode_profile(PROFILE, "<t>"), ["python3", "-c", SPIN], cwd="/",
                  host_env={{}})
# The init holds one descriptor per bind while it builds the root: the user's soft
# RLIMIT_NOFILE (1024) allows fewer; its RLIMIT_CPU is per process, so setup never counted.
count = {BINDS} if os.getuid() == 0 else {USER_BINDS}
binds = tuple(Bind(source="/etc/passwd", target=f"/mnt/b{{i}}") for i in range(count))
spec = msgspec.structs.replace(
    spec, binds=spec.binds + binds,
    limits=msgspec.structs.replace(spec.limits, cpu_time={BUDGET_S}),
)

def report(result, out):
    cpu = result.limits["cpu_time"]
    return [result.outcome, cpu.mechanism, cpu.hit, out.decode() or str(result.error)]

def blocking():
    r, w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY)
    result = run(spec, stdin=devnull, stdout=w, stderr=w)
    os.close(w)
    out = os.read(r, 4096)
    return report(result, out)

async def on_loop():
    got = bytearray()
    box = AsyncSandbox(spec, on_output=lambda stream, data: got.extend(data))
    await box.start()
    return report(await box.wait(), bytes(got))

print(json.dumps([blocking(), asyncio.run(on_loop())]))
"""


@pytest.mark.parametrize("who", ["root", "unpriv"] if os.getuid() == 0 else ["self"])
def test_the_setup_is_not_spent_from_the_commands_cpu_time(who: str, unpriv: Unpriv) -> None:
    """A command that prints at 0.35 s of its own CPU time under --cpu-time 0.6 prints, then
    is ended for cpu_time, though building its root cost the init about 0.4 s, in both
    supervisors (root: the group's cpu.stat; the user: RLIMIT_CPU, per process)."""
    python = unpriv.python if who == "unpriv" else sys.executable
    argv = [python, "-c", _HEAVY_SETUP]
    if who == "unpriv":
        argv = unpriv.command(*argv)
    # Each supervisor must let its command print in one of ATTEMPTS runs: were the setup
    # spent from the budget it never could (0.4 + 0.35 > 0.6). More than one run, because
    # on this 2-core machine the root's group watchdog sometimes still ends the command
    # before it prints (seen at about half the runs under load, on the code before the
    # structure change as well: a known loss of budget the closing note names).
    printed: dict[int, list[str]] = {0: [], 1: []}
    for _ in range(ATTEMPTS):
        done = subprocess.run(
            argv, cwd="/", capture_output=True, text=True, timeout=110, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        for index, (outcome, mechanism, hit, out) in enumerate(json.loads(done.stdout)):
            assert outcome == "limit"
            assert hit is True
            if who == "root":
                assert mechanism.startswith("cgroup-"), mechanism
            printed[index].append(out)
        if all(any(out.startswith("own cpu ") for out in outs) for outs in printed.values()):
            return
    raise AssertionError(f"a supervisor's command never printed in {ATTEMPTS} runs: {printed}")


def test_the_ready_line_carries_the_setup_cpu() -> None:
    """``ready`` round-trips its setup CPU; a bare ``ready`` is zero; a negative, infinite
    or non-numeric value is not a status line."""
    decoder = StatusDecoder()
    line = encode(Ready(setup_cpu_s=0.4125))
    assert line == b"ready 0.412500\n"
    assert decoder.feed(line) == [Ready(setup_cpu_s=0.4125)]
    assert decoder.feed(b"ready\n") == [Ready()]
    for bad in (b"ready -1\n", b"ready inf\n", b"ready nan\n", b"ready soon\n"):
        with pytest.raises(StatusLineError):
            StatusDecoder().feed(bad)
