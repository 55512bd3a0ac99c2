"""Appends written without an fdatasync of their own (``durable=False``): no sync, readable at
once, durable and listened to with the next commit, and never a refusal after a power cut."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from glove.journal import (
    Entry,
    JournalError,
    JournalKind,
    PosixStorage,
    Receipt,
    iter_entries,
    open_journal,
    verify,
)
from glove.testing import CrashStorage, SimulatedCrash

CRASH_SEEDS = 40


class CountingStorage(PosixStorage):
    """The real storage, counting fdatasync calls."""

    def __init__(self) -> None:
        self.syncs = 0

    def fdatasync(self, fd: int) -> None:
        """Count, then fdatasync."""
        self.syncs += 1
        super().fdatasync(fd)


async def test_an_unsynced_append_waits_for_the_next_commit(jdir: Path, key: bytes) -> None:
    """Two appends with durable=False make no fdatasync and reach no listener, yet another
    reader sees them at once; the next durable append's one fdatasync covers all three and
    the listener gets them in order."""
    storage = CountingStorage()
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, storage=storage)
    heard: list[int] = []

    def listen(entries: Sequence[Entry]) -> None:
        heard.extend(e.seq for e in entries)

    journal.writer.add_commit_listener(listen)
    before = storage.syncs
    lazy = [await journal.append(b"lazy %d" % i, durable=False) for i in range(2)]
    assert storage.syncs == before
    assert heard == []
    written = [e.payload for e in iter_entries(PosixStorage(), jdir, key)]
    assert written == [b"lazy 0", b"lazy 1"]  # in the kernel: a kill -9 keeps them
    last = await journal.append(b"durable")
    assert storage.syncs == before + 1
    assert heard == [lazy[0].seq, lazy[1].seq, last.seq]
    await journal.append(b"closing", durable=False)
    await journal.close()
    assert heard[-1] == last.seq + 1  # the close made it durable and told the listener
    report = verify(jdir, key)
    assert report.ok, report


@pytest.mark.parametrize("seed", range(CRASH_SEEDS))
async def test_a_power_cut_behind_unsynced_records_is_a_torn_tail(
    jdir: Path, key: bytes, seed: int
) -> None:
    """Power fails in the fdatasync of a durable append that follows unsynced ones (their
    bytes land, vanish or turn to garbage independently): the journal reopens (no
    corruption claimed), keeps every record acknowledged durable, and keeps a prefix."""
    storage = CrashStorage(0, mode="random", seed=seed, sector_bytes=512)
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, storage=storage)
    first = await journal.append(b"acknowledged")
    storage.crash_at = storage.syncs + 1
    payloads = [b"state %d " % i + bytes(300) for i in range(3)]
    for payload in payloads[:2]:
        await journal.append(payload, durable=False)
    with contextlib.suppress(JournalError, SimulatedCrash):
        await journal.append(payloads[2])
    assert storage.crashed
    with contextlib.suppress(SimulatedCrash, JournalError):
        await journal.close()
    reopened = await open_journal(jdir, key, kind=JournalKind.SESSION)
    try:
        status = await reopened.status()
        assert status.seq >= first.seq
        found = [e.payload for e in iter_entries(PosixStorage(), jdir, key)]
        assert found[0] == b"acknowledged"
        assert found[1:] == payloads[: len(found) - 1]
        more: Receipt = await reopened.append(b"after")
    finally:
        await reopened.close()
    assert verify(jdir, key, (more.seq, more.tag)).ok


async def test_appends_interleave_in_order(jdir: Path, key: bytes) -> None:
    """Concurrent durable and unsynced appends keep one chain: every receipt is in the
    journal at its seq, and the journal verifies."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    receipts = await asyncio.gather(
        *(journal.append(b"r%d" % i, durable=i % 3 != 0) for i in range(30))
    )
    await journal.close()
    entries = {e.seq: e.payload for e in iter_entries(PosixStorage(), jdir, key)}
    for i, receipt in enumerate(receipts):
        assert entries[receipt.seq] == b"r%d" % i
    assert verify(jdir, key).ok
