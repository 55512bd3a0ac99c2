"""The terminal filter of ``glove exec``/``glove run``: its throughput, and what it costs a
command whose output goes to a terminal.

Each figure is printed with its peer, measured in the same run on the same machine:

1. **filter throughput** (``glove.session.TerminalFilter``, both modes) on three streams
   cut in 64 KiB reads: plain text (``seq``), a TUI's redraws (an SGR and a cursor move per
   few cells, box drawing, a hyperlink), and a hostile flood (queries, OSC 52, DCS). The
   peer: the UTF-8 decode and encode the filter does around its state machine (the floor
   of looking at the text at all).
2. **end to end**: ``glove exec -- seq 1 N`` and ``glove exec --pty -- seq 1 N`` with a
   host pty as their terminal, read to the end, filtered against ``--raw`` (ratio).

    .venv/bin/python benchmarks/terminal/bench.py [--mib 16] [--lines 2000000]
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable

from glove.session import TerminalFilter

MIB = 1024 * 1024
READ_BYTES = 64 * 1024
RUN_DEADLINE_S = 600.0


def _stream(kind: str, size: int) -> bytes:
    if kind == "text":
        unit = "".join(f"{i}\r\n" for i in range(1, 20000)).encode()
    elif kind == "tui":
        cells = "".join(
            f"\x1b[{1 + i % 40};{1 + i % 120}H\x1b[38;5;{i % 256}m\u2500\u2502ab\x1b[0m"
            for i in range(2000)
        )
        unit = (cells + "\x1b]8;;https://x.test/\x1b\\link\x1b]8;;\x1b\\\r\n").encode()
    else:
        unit = b"\x1b[6n\x1b[c\x1b]52;c;QUFB\x07\x1bP$q m\x1b\\\x1b]11;?\x07text " * 200
    return (unit * (size // len(unit) + 1))[:size]


def _throughput(work: Callable[[bytes], object], data: bytes) -> float:
    """MiB/s of ``work`` over ``data`` in READ_BYTES pieces (best of three)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for at in range(0, len(data), READ_BYTES):
            work(data[at : at + READ_BYTES])
        best = min(best, time.perf_counter() - started)
    return len(data) / MIB / best


def _filtered(mode: str) -> Callable[[bytes], object]:
    flt = TerminalFilter(mode)  # type: ignore[arg-type]
    return flt.feed


def _roundtrip(data: bytes) -> object:
    return data.decode("utf-8", "surrogateescape").encode("utf-8", "surrogateescape")


def _on_terminal(argv: list[str]) -> float:
    """Seconds ``argv`` takes with a host pty as its terminal, read to the end."""
    master, slave = os.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    deadline = started + RUN_DEADLINE_S
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                if not os.read(master, READ_BYTES):
                    break
            except OSError:
                break
        elif proc.poll() is not None:
            break
    proc.wait()
    os.close(master)
    return time.perf_counter() - started


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=16, help="size of each filtered stream")
    parser.add_argument("--lines", type=int, default=2_000_000, help="seq length end to end")
    parser.add_argument(
        "--quick", action="store_true", help="1 MiB streams and 200,000 lines (benchmarks' table)"
    )
    args = parser.parse_args()
    if args.quick:
        args.mib, args.lines = 1, 200_000
    print("1. filter throughput, MiB/s (64 KiB reads)")
    print(f"   {'stream':8} {'decode+encode':>14} {'text mode':>10} {'pty mode':>10}")
    for kind in ("text", "tui", "hostile"):
        data = _stream(kind, args.mib * MIB)
        floor = _throughput(_roundtrip, data)
        text = _throughput(_filtered("text"), data)
        pty = _throughput(_filtered("pty"), data)
        print(f"   {kind:8} {floor:14.0f} {text:10.0f} {pty:10.0f}")
    glove = [sys.executable, "-m", "glove", "exec", "-q"]
    print(f"2. end to end: seq 1 {args.lines} on a terminal, seconds")
    for flags in ([], ["--pty"]):
        seq = ["--", "/usr/bin/seq", "1", str(args.lines)]
        filtered = _on_terminal([*glove, *flags, *seq])
        raw = _on_terminal([*glove, *flags, "--raw", *seq])
        name = "--pty" if flags else "pipes"
        ratio = filtered / raw
        print(f"   {name:6} filtered {filtered:6.2f}  --raw {raw:6.2f}  ratio {ratio:4.2f}")


if __name__ == "__main__":
    main()
