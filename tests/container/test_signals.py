"""What the sandbox's init does with the signals its owner sends (``glove exec``'s relay,
``glove run``'s, gloved's ``session.signal``): INT to the command's whole process group,
TSTP and CONT to the whole tree, in the order they were sent. As root and unprivileged."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import Unpriv

RUN_TIMEOUT_S = 180.0
WHO = ["root", "unpriv"] if os.getuid() == 0 else ["self"]

#: Run as the launching user: a shell that traps USR1 and waits on a sleep, owned from the
#: loop (AsyncSandbox, as gloved and glove run own theirs), driven by signals to its init.
_DRIVE = r"""
import asyncio, json, os, signal, sys
from pathlib import Path
from glove.container import AsyncSandbox, build_spec, decode_profile

MARK = sys.argv[1]
PROFILE = b'extends = "default"\n[workspace]\nenabled = false\n'
SCRIPT = 'trap "echo trapped-usr1 >&2" USR1; while :; do sleep "$1" & wait $!; done'
seen = bytearray()

def states():
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        if Path(argv[0].decode()).name in ("sh", "sleep") and MARK.encode() in argv:
            found[int(entry.name)] = stat.rpartition(")")[2].split()[0]
    return found

async def until(what, check):
    for _ in range(800):
        now = states()
        if check(now):
            return now
        await asyncio.sleep(0.05)
    raise SystemExit(f"never {what}: {states()} {bytes(seen)!r}")

async def main():
    spec = build_spec(decode_profile(PROFILE, "<t>"), ["/bin/sh", "-c", SCRIPT, "sh", MARK],
                      cwd="/", host_env={})
    box = AsyncSandbox(spec, on_output=lambda _stream, data: seen.extend(data))
    await box.start()
    steps = []
    await until("running", lambda s: len(s) >= 2)
    box.send_signal(signal.SIGTSTP)
    await until("all stopped", lambda s: set(s.values()) == {"T"})
    steps.append("stopped")
    box.send_signal(signal.SIGCONT)
    await until("all running", lambda s: "T" not in s.values())
    steps.append("running")
    for _ in range(50):  # the later of each pair wins: the tree ends running
        box.send_signal(signal.SIGTSTP)
        box.send_signal(signal.SIGCONT)
    box.send_signal(signal.SIGUSR1)  # handled only once the init passed on all of the above
    for _ in range(800):
        if b"trapped-usr1" in seen:
            break
        await asyncio.sleep(0.05)
    steps.append("trapped" if b"trapped-usr1" in seen else f"never trapped: {states()}")
    await until("all running after the pairs", lambda s: "T" not in s.values())
    for _ in range(50):  # ... and here it ends stopped
        box.send_signal(signal.SIGCONT)
        box.send_signal(signal.SIGTSTP)
    await until("all stopped after the pairs", lambda s: set(s.values()) == {"T"})
    steps.append("stopped")
    box.send_signal(signal.SIGCONT)
    await until("all running", lambda s: "T" not in s.values())
    box.send_signal(signal.SIGINT)  # the whole group: the shell and its sleep
    result = await box.wait()
    steps.append(result.exit_code)
    steps.append(len(states()))
    print(json.dumps(steps))

asyncio.run(main())
"""


@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
@pytest.mark.parametrize("who", WHO)
def test_the_init_stops_continues_and_interrupts_the_whole_job_in_order(
    unpriv: Unpriv, who: str
) -> None:
    """TSTP stops every process of the tree and CONT resumes them; of fifty stop/continue
    pairs the later signal wins either way round (they are passed on in the order sent);
    INT ends the shell and its child together (exit 130, nothing left)."""
    marker = f"3600.{os.getpid()}{len(who)}"
    argv = [unpriv.python, "-c", _DRIVE, marker]
    if who == "unpriv":
        argv = unpriv.command(*argv)
    else:
        argv[0] = sys.executable
    done = subprocess.run(
        argv, cwd="/", capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout) == ["stopped", "running", "trapped", "stopped", 130, 0]
