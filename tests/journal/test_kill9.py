"""kill -9 of a real writer process at random moments, hundreds of times, then recovery."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from glove.journal import JournalKind, open_journal, verify

CHILD = Path(__file__).with_name("_writer_child.py")
KEY = bytes(range(32))
ITERATIONS = 300
MAX_DELAY_S = 0.06
SEED = 20261129
MAX_BATCH = 8  # the child's largest concurrent batch


def _wait_gone(pid: int, deadline_s: float = 10.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.001)
    raise AssertionError(f"writer {pid} did not die")


def _read_receipts(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    return [(int(s), t.decode()) for s, t in (ln.split() for ln in lines if ln.count(b" ") == 1)]


async def test_kill9_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """Hundreds of SIGKILLs mid-append: every receipt seen survives and the chain verifies."""
    jdir = tmp_path / "journal"
    rng = random.Random(SEED)
    server = subprocess.Popen(
        [sys.executable, str(CHILD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    seen_total = 0
    try:
        for iteration in range(ITERATIONS):
            receipts_path = tmp_path / f"receipts-{iteration}"
            server.stdin.write(f"{jdir} {rng.randrange(2**32)} {receipts_path}\n")
            pid = int(server.stdout.readline())
            await asyncio.sleep(rng.uniform(0, MAX_DELAY_S))
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid)
            seen = _read_receipts(receipts_path)
            seen_total += len(seen)
            journal = await open_journal(jdir, KEY, kind=JournalKind.SESSION)
            status = await journal.status()
            if seen:
                assert status.seq >= seen[-1][0], (iteration, SEED)
                # At most the batch whose receipts were not printed yet and one in flight.
                assert status.seq - seen[-1][0] <= 2 * MAX_BATCH, (iteration, SEED)
                held: list[tuple[int, str]] = []
                cursor = seen[0][0] - 1
                while len(held) < len(seen):
                    page = await journal.page(cursor, len(seen) - len(held))
                    assert page.receipts, (iteration, SEED)
                    held.extend((r.seq, r.tag.hex()) for r in page.receipts)
                    cursor = page.next_cursor
                assert held == seen, (iteration, SEED)
            await journal.close()
        journal = await open_journal(jdir, KEY, kind=JournalKind.SESSION)
        more = await asyncio.gather(*(journal.append(b"after %d" % i) for i in range(10)))
        await journal.close()
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
    report = verify(jdir, KEY, (more[-1].seq, more[-1].tag))
    assert report.ok, report
    assert seen_total > ITERATIONS // 2  # the kills really landed amid acknowledged appends
