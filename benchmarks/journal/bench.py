"""Journal benchmark: durable appends of glove.journal versus SQLite (WAL, synchronous=FULL).

For 1 and 32 concurrent appenders and 256-byte and 4-KiB payloads, measures durable appends
per second and p50/p99 latency of one append (from call to durable acknowledgement), for:

* glove: ``Journal.append`` (one pwrite per batch over the segment's zero-filled region,
  fdatasync, group commit; a small commit runs on the loop while syncs are quick);
* glove, executor: the same with every commit sent to the writer's executor thread (the
  pacer off), to show what the thread hop costs (1 appender only; decision 0045);
* SQLite: one row per append, ``INSERT`` + ``COMMIT`` before acknowledging, WAL mode,
  ``synchronous=FULL``; concurrent appenders are threads with their own connection.

Both write to the same directory (same disk) in the same run. Prints the table with ratios.

    .venv/bin/python benchmarks/journal/bench.py [--seconds 4] [--rounds 4] [--dir PATH] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import _report
from glove.journal import JournalKind, JournalLimits, open_journal

KEY = os.urandom(32)
LIMITS = JournalLimits(max_segment_bytes=256 * 1024 * 1024, max_segment_records=10_000_000)


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


Sample = tuple[list[float], float]  # latencies of every append, elapsed seconds


def _summary(samples: list[Sample]) -> dict[str, float]:
    latencies = [lat for run, _ in samples for lat in run]
    elapsed = sum(e for _, e in samples)
    return {
        "appends": len(latencies),
        "per_s": len(latencies) / elapsed,
        "p50_ms": _pct(latencies, 0.50) * 1e3,
        "p99_ms": _pct(latencies, 0.99) * 1e3,
    }


def bench_glove(
    root: Path, writers: int, size: int, seconds: float, *, on_loop: bool = True
) -> Sample:
    async def main() -> Sample:
        name = f"glove-{writers}-{size}-{'loop' if on_loop else 'executor'}"
        journal = await open_journal(root / name, KEY, kind=JournalKind.SESSION, limits=LIMITS)
        journal.writer.pacer.enabled = on_loop
        payload = os.urandom(size)
        latencies: list[float] = []
        stop = time.perf_counter() + seconds

        async def appender() -> None:
            while time.perf_counter() < stop:
                start = time.perf_counter()
                await journal.append(payload)
                latencies.append(time.perf_counter() - start)

        began = time.perf_counter()
        await asyncio.gather(*(appender() for _ in range(writers)))
        elapsed = time.perf_counter() - began
        await journal.close()
        return latencies, elapsed

    return asyncio.run(main())


def bench_sqlite(root: Path, writers: int, size: int, seconds: float) -> Sample:
    path = root / f"sqlite-{writers}-{size}.db"
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute(
        "CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, payload BLOB NOT NULL)"
    )
    setup.commit()
    setup.close()
    payload = os.urandom(size)
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def appender() -> None:
        conn = sqlite3.connect(path, timeout=60, isolation_level=None)
        conn.execute("PRAGMA synchronous=FULL")
        local: list[float] = []
        while time.perf_counter() < stop:
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO journal (payload) VALUES (?)", (payload,))
            conn.execute("COMMIT")
            local.append(time.perf_counter() - start)
        conn.close()
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=appender) for _ in range(writers)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per system and cell")
    parser.add_argument(
        "--rounds", type=int, default=4, help="alternate the two systems this many times"
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to write (same disk)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="glove-journal-bench-", dir=args.dir))
    rows = []
    try:
        for writers in (1, 32):
            for size in (256, 4096):
                # Alternate short runs so drift in the shared disk's latency hits both alike.
                slice_s = args.seconds / args.rounds
                glove: list[Sample] = []
                hop: list[Sample] = []
                sqlite: list[Sample] = []
                for _ in range(args.rounds):
                    glove.append(bench_glove(root, writers, size, slice_s))
                    if writers == 1:
                        hop.append(bench_glove(root, writers, size, slice_s, on_loop=False))
                    sqlite.append(bench_sqlite(root, writers, size, slice_s))
                row = {
                    "writers": writers,
                    "size": size,
                    "glove": _summary(glove),
                    "sqlite": _summary(sqlite),
                }
                if hop:
                    row["glove_executor"] = _summary(hop)
                rows.append(row)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"durable appends, {args.seconds:.0f} s per system and cell in {args.rounds} "
        "alternating rounds, same directory"
    )
    print(
        "| appenders | payload | system | appends/s | SQLite appends/s | rate ratio | "
        "p50 / p99 ms | SQLite p50 / p99 ms | p50 glove/SQLite |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        s = row["sqlite"]
        if row["writers"] == 1:
            _report.row(
                "journal",
                f"one appender p50, {row['size']} B",
                row["glove"]["p50_ms"],
                "SQLite WAL FULL",
                s["p50_ms"],
                "ms",
                goal=1.0,
            )
        for label, key in (("glove", "glove"), ("glove, executor", "glove_executor")):
            if key not in row:
                continue
            g = row[key]
            print(
                f"| {row['writers']} | {row['size']} B | {label} | {g['per_s']:.0f} | "
                f"{s['per_s']:.0f} | {g['per_s'] / s['per_s']:.2f}x | "
                f"{g['p50_ms']:.3f} / {g['p99_ms']:.2f} | "
                f"{s['p50_ms']:.3f} / {s['p99_ms']:.2f} | {g['p50_ms'] / s['p50_ms']:.2f}x |"
            )


if __name__ == "__main__":
    main()
