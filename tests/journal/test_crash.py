"""Simulated power loss (SQLite test6-style CrashStorage) at every k-th fdatasync."""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path

import pytest

from glove.journal import (
    JournalError,
    JournalKind,
    JournalLimits,
    Receipt,
    open_journal,
    verify,
)
from glove.testing import CrashMode, CrashStorage, SimulatedCrash

LIMITS = JournalLimits(max_segment_bytes=8 * 1024, max_segment_records=1000, max_segments=64)
ROUNDS = 25


async def _run_until_crash(
    jdir: Path, key: bytes, storage: CrashStorage, seed: int
) -> list[Receipt]:
    """Append concurrent batches on ``storage`` until it crashes; return the acknowledged."""
    rng = random.Random(seed)
    acked: list[Receipt] = []
    try:
        journal = await open_journal(
            jdir, key, kind=JournalKind.SESSION, limits=LIMITS, storage=storage
        )
    except SimulatedCrash:
        return acked
    for _ in range(ROUNDS):
        payloads = [rng.randbytes(rng.randrange(1, 700)) for _ in range(rng.randrange(1, 6))]
        results = await asyncio.gather(
            *(journal.append(p) for p in payloads), return_exceptions=True
        )
        for result in results:
            if isinstance(result, Receipt):
                acked.append(result)
            else:
                assert isinstance(result, JournalError), result
        if storage.crashed:
            break
    with contextlib.suppress(SimulatedCrash, JournalError):
        await journal.close()
    return acked


async def _check_recovers(jdir: Path, key: bytes, acked: list[Receipt]) -> bool:
    """Everything acknowledged survives; recovery never refuses; True if it cut a tail."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, limits=LIMITS)
    status = await journal.status()
    last = acked[-1].seq if acked else 0
    assert status.seq >= last
    tags = {}
    cursor = 0
    while True:
        page = await journal.page(cursor)
        if not page.receipts:
            break
        tags.update({r.seq: r.tag for r in page.receipts})
        cursor = page.next_cursor
    for receipt in acked:
        assert tags.get(receipt.seq) == receipt.tag, receipt.seq
    more = await asyncio.gather(*(journal.append(b"after %d" % i) for i in range(5)))
    await journal.close()
    report = verify(jdir, key, (more[-1].seq, more[-1].tag))
    assert report.ok, report
    return bool(status.recovered)


@pytest.mark.parametrize(
    ("mode", "sector", "step"),
    [("random", 512, 1), ("random", 4096, 3), ("sequential", 512, 3), ("safe_append", 512, 3)],
)
async def test_power_loss_at_every_sync_loses_nothing_acknowledged(
    tmp_path: Path, key: bytes, mode: CrashMode, sector: int, step: int
) -> None:
    """For each k, a crash at the k-th fdatasync keeps every acknowledged record, verifiably."""
    crashed = cut = 0
    points = range(1, 40, step)
    for k in points:
        jdir = tmp_path / f"{mode}-{sector}-{k}"
        storage = CrashStorage(k, mode=mode, seed=k, sector_bytes=sector)
        acked = await _run_until_crash(jdir, key, storage, seed=k)
        crashed += storage.crashed
        cut += await _check_recovers(jdir, key, acked)
    assert crashed == len(points)
    assert cut > 0  # some crashes really left a torn tail for recovery to cut


def test_crash_storage_loses_only_unsynced_writes(tmp_path: Path) -> None:
    """CrashStorage keeps synced bytes exactly and drops a later unsynced write when told."""
    path = str(tmp_path / "f")
    storage = CrashStorage(2, mode="safe_append", seed=1)
    fd = storage.open_append(path, create=True)
    storage.write(fd, b"synced")
    storage.fdatasync(fd)
    for _ in range(20):
        storage.write(fd, b"-pending")
    assert storage.fstat(fd).size == 6 + 20 * 8
    with pytest.raises(SimulatedCrash):
        storage.fdatasync(fd)
    data = (tmp_path / "f").read_bytes()
    assert data.startswith(b"synced")
    assert len(data) < 6 + 20 * 8
    with pytest.raises(SimulatedCrash):
        storage.write(fd, b"after")
