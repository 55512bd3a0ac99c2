"""Watchdog cadence: how regularly a real gloved pings systemd, against a bare asyncio pinger.

gloved's ``notify`` actor sends ``WATCHDOG=1`` every half of ``WATCHDOG_USEC``; a service
manager restarts the service when a whole interval passes without one. The peer (a
subprocess running only an asyncio loop that sends the same datagram on the same period)
is the floor any asyncio service sits on: what the machine's scheduling does to a loop that
does nothing else. Both ping one listener (``glove.testing.NotifyListener``) in the same
run; printed for each: the gaps' p50, p99 and max, the share of the interval the worst gap
used, and gloved's figures as ratios to the peer's. (This was a test; on a loaded machine a
gap is a measurement, not a pass/fail fact: tests/control/test_notify.py keeps the events.)

    .venv/bin/python benchmarks/control/bench_watchdog.py [--seconds 10] [--interval 0.6]
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from glove.testing import NotifyListener, pings

REPO = Path(__file__).resolve().parents[2]
START_DEADLINE_S = 30.0

#: The peer: a bare asyncio loop pinging like gloved, on the same period.
PEER = """
import asyncio, os, socket, sys
address = os.environ["NOTIFY_SOCKET"]
address = "\\0" + address[1:] if address.startswith("@") else address
period = int(os.environ["WATCHDOG_USEC"]) / 2e6
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
async def main():
    loop = asyncio.get_running_loop()
    next_at = loop.time()
    while True:
        sock.sendto(b"WATCHDOG=1", address)
        next_at += period
        await asyncio.sleep(max(0.0, next_at - loop.time()))
asyncio.run(main())
"""


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _gaps(argv: list[str], env: dict[str, str], seconds: float, usec: int) -> list[float]:
    with NotifyListener.abstract() as listener:
        proc = subprocess.Popen(
            argv, env={**env, **listener.environ(watchdog_usec=usec)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            listener.wait_for(lambda n: n.fields.get("WATCHDOG") == "1", START_DEADLINE_S)
            time.sleep(seconds)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        times = pings(listener.received, pid=proc.pid)
    return [b - a for a, b in itertools.pairwise(times)]


def main() -> None:
    """Run gloved and the peer one after the other; print their gaps and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="pinging time per side")
    parser.add_argument("--interval", type=float, default=0.6, help="WATCHDOG_USEC, seconds")
    args = parser.parse_args()
    usec = int(args.interval * 1e6)
    with tempfile.TemporaryDirectory(prefix="glove-bench-watchdog-") as scratch:
        base = Path(scratch)
        (base / "run").mkdir(mode=0o700)
        # A home of its own: the daemon must not read the real user's gloved.toml or keys.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "NOTIFY_"))}
        for var, name in (("HOME", ""), ("XDG_CONFIG_HOME", "config"),
                          ("XDG_STATE_HOME", "state"), ("XDG_RUNTIME_DIR", "run")):  # fmt: skip
            env[var] = str(base / name)
        gloved = [sys.executable, "-m", "glove.daemon"]
        figures = {
            "gloved": _gaps(gloved, env, args.seconds, usec),
            "peer": _gaps([sys.executable, "-c", PEER], env, args.seconds, usec),
        }
    print(f"watchdog interval {args.interval:.3f} s, pings every {args.interval / 2:.3f} s")
    for name, gaps in figures.items():
        worst = max(gaps)
        print(
            f"{name:7} {len(gaps) + 1:4d} pings  gap p50 {_percentile(gaps, 0.5) * 1e3:7.1f} ms"
            f"  p99 {_percentile(gaps, 0.99) * 1e3:7.1f} ms  max {worst * 1e3:7.1f} ms"
            f"  ({worst / args.interval:.0%} of the interval)"
        )
    ours, floor = figures["gloved"], figures["peer"]
    for label, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0)):
        ratio = _percentile(ours, q) / _percentile(floor, q)
        print(f"gloved/peer {label}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
