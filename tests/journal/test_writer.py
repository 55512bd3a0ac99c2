"""Tests of the journal writer: durable receipts, group commit, lock, faults, limits, acks."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
from pathlib import Path

import pytest

import glove.journal
from glove.actors import running
from glove.journal import (
    JournalChanged,
    JournalClosed,
    JournalCorrupt,
    JournalFailed,
    JournalFull,
    JournalKind,
    JournalLimits,
    JournalLocked,
    JournalWriter,
    ReceiptAckError,
    RecordKind,
    RecordTooLarge,
    UnsupportedFormat,
    open_journal,
    verify,
)
from glove.journal._codec import HEADER_BYTES, RECORD_OVERHEAD_BYTES
from glove.journal._layout import segment_name
from glove.testing import FaultStorage

SMALL = JournalLimits(max_segment_bytes=4096, max_segment_records=1000, max_segments=3)


async def _fill(journal: glove.journal.Journal, kind: RecordKind) -> JournalFull:
    for _ in range(100):
        try:
            await journal.append(b"p" * 200, kind=kind)
        except JournalFull as exc:
            return exc
    raise AssertionError("the journal never filled up")


def test_public_api_is_pinned() -> None:
    """The stable names other parts rely on are exported."""
    for name in ("open_journal", "verify", "Receipt", "VerifyReport", "JournalError"):
        assert name in glove.journal.__all__
    assert len(set(glove.journal.__all__)) == len(glove.journal.__all__)
    for name in glove.journal.__all__:
        assert hasattr(glove.journal, name)


async def test_append_returns_receipt_that_verifies(jdir: Path, key: bytes) -> None:
    """Receipts carry journal id, contiguous seqs and tags that verify as checkpoints."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    receipts = [await journal.append(f"record {i}".encode()) for i in range(5)]
    await journal.close()
    assert [r.seq for r in receipts] == [1, 2, 3, 4, 5]
    assert len({r.journal_id for r in receipts}) == 1
    assert len({r.tag for r in receipts}) == 5
    report = verify(jdir, key, (3, receipts[2].tag))
    assert report.ok, report
    assert report.clean
    assert (report.records, report.last_seq, report.last_tag) == (5, 5, receipts[-1].tag.hex())
    assert not verify(jdir, key, (3, receipts[1].tag)).ok


async def test_reopen_continues_the_chain(jdir: Path, key: bytes) -> None:
    """A reopened journal continues seq and chain; the whole journal verifies."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    first = await journal.append(b"a")
    await journal.close()
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    second = await journal.append(b"b")
    await journal.close()
    assert (first.seq, second.seq) == (1, 2)
    assert first.journal_id == second.journal_id
    assert verify(jdir, key).ok


async def test_group_commit_shares_fdatasync(jdir: Path, key: bytes) -> None:
    """64 concurrent appends all get receipts but need far fewer than 64 fdatasyncs."""
    storage = FaultStorage()
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, storage=storage)
    before = storage.syncs
    receipts = await asyncio.gather(*(journal.append(b"x" * 64) for _ in range(64)))
    syncs = storage.syncs - before
    await journal.close()
    assert sorted(r.seq for r in receipts) == list(range(1, 65))
    assert syncs <= 8, syncs
    assert verify(jdir, key).records == 64


async def test_second_writer_fails_fast(jdir: Path, key: bytes) -> None:
    """A second writer on the same journal raises JournalLocked at once."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    with pytest.raises(JournalLocked):
        await open_journal(jdir, key, kind=JournalKind.SESSION, name="second")
    await journal.append(b"still fine")
    await journal.close()


async def test_wrong_kind_and_wrong_key_are_refused(jdir: Path, key: bytes) -> None:
    """Opening with another kind is UnsupportedFormat; with another key, tampering."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    await journal.append(b"a")
    await journal.close()
    with pytest.raises(UnsupportedFormat):
        await open_journal(jdir, key, kind=JournalKind.PLAN)
    with pytest.raises(glove.journal.JournalTampered):
        await open_journal(jdir, bytes(32), kind=JournalKind.SESSION)


async def test_close_marks_clean_and_refuses_appends(jdir: Path, key: bytes) -> None:
    """After close the header is OFFLINE and appends raise JournalClosed."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    await journal.append(b"a")
    assert not verify(jdir, key).clean
    await journal.close()
    assert verify(jdir, key).clean
    with pytest.raises(JournalClosed):
        await journal.append(b"b")


async def test_enospc_cuts_back_and_appends_resume(jdir: Path, key: bytes) -> None:
    """ENOSPC after a partial write fails the append, leaves the file at its last record."""
    storage = FaultStorage()
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, storage=storage)
    await journal.append(b"one")
    seg = jdir / segment_name(0)
    size = seg.stat().st_size
    storage.write_errno, storage.partial_bytes = errno.ENOSPC, 10
    with pytest.raises(JournalFull, match="No space"):
        await journal.append(b"two")
    assert seg.stat().st_size == size
    assert "No space" in (await journal.status()).degraded
    third = await journal.append(b"three")
    assert (await journal.status()).degraded == ""
    await journal.close()
    assert third.seq == 2
    report = verify(jdir, key)
    assert report.ok
    assert report.records == 2


async def test_failed_fdatasync_is_never_retried(jdir: Path, key: bytes) -> None:
    """EIO from fdatasync fails the append with JournalFailed; the journal refuses more."""
    storage = FaultStorage()
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, storage=storage)
    await journal.append(b"one")
    storage.sync_errno = errno.EIO
    with pytest.raises(JournalFailed, match="not retried"):
        await journal.append(b"two")
    syncs = storage.syncs
    with pytest.raises(JournalFailed):
        await journal.append(b"three")
    assert storage.syncs == syncs
    with pytest.raises(JournalFailed):
        await journal.close()
    reopened = await open_journal(jdir, key, kind=JournalKind.SESSION)
    status = await reopened.status()
    await reopened.close()
    assert status.seq in (1, 2)


@pytest.mark.parametrize("change", ["truncate", "grow", "replace"])
async def test_external_change_while_open_stops_the_writer(
    jdir: Path, key: bytes, change: str
) -> None:
    """Truncation, growth or replacement of the segment makes the next append fail-stop."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    receipts = [await journal.append(b"r" * 100) for _ in range(5)]
    seg = jdir / segment_name(0)
    size_before = seg.stat().st_size
    if change == "truncate":
        # The file is zero-filled past its records: cut into the records themselves.
        record_bytes = RECORD_OVERHEAD_BYTES + 100
        os.truncate(seg, HEADER_BYTES + 2 * record_bytes)
    elif change == "grow":
        os.truncate(seg, size_before + 1024 * 1024)
    else:
        shutil.copy(seg, jdir / "copy")
        (jdir / "copy").replace(seg)
    with pytest.raises(JournalChanged, match="outside the writer"):
        await journal.append(b"never")
    with pytest.raises(JournalFailed):
        await journal.close()
    assert isinstance(journal.writer.exit_reason, JournalChanged)
    if change == "grow":
        assert seg.stat().st_size == size_before + 1024 * 1024
        reopened = await open_journal(jdir, key, kind=JournalKind.SESSION)
        assert (await reopened.append(b"after")).seq == 6
        await reopened.close()
        assert verify(jdir, key).ok
    elif change == "truncate":
        report = verify(jdir, key, (5, receipts[-1].tag))
        assert report.error == "JournalTruncated"
    else:
        assert seg.stat().st_size == size_before


async def test_torn_tail_in_clean_segment_refuses_to_open(jdir: Path, key: bytes) -> None:
    """A damaged tail in a cleanly closed segment is not a crash: open refuses."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    await journal.append(b"a")
    await journal.close()
    with (jdir / segment_name(0)).open("ab") as fh:
        fh.write(b"GREC\x01")
    with pytest.raises(JournalCorrupt, match="closed cleanly"):
        await open_journal(jdir, key, kind=JournalKind.SESSION)


async def test_session_journal_rotates_and_drops_oldest(jdir: Path, key: bytes) -> None:
    """A SESSION journal rotates into sealed segments and keeps at most max_segments."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, limits=SMALL)
    receipts = [await journal.append(b"p" * 200) for _ in range(60)]
    status = await journal.status()
    await journal.close()
    segments = sorted(p.name for p in jdir.glob("seg-*.glj"))
    assert len(segments) == 3
    assert status.segment >= 3
    for seg in segments:
        assert (jdir / seg).stat().st_size <= SMALL.max_segment_bytes
    report = verify(jdir, key, (60 + status.segment, receipts[-1].tag))
    assert report.ok, report
    assert report.first_seq > 1


async def test_plan_journal_refuses_at_its_limit(jdir: Path, key: bytes) -> None:
    """A PLAN journal refuses with JournalFull at its limit and says it does not rotate."""
    journal = await open_journal(jdir, key, kind=JournalKind.PLAN, limits=SMALL)
    refusal = await _fill(journal, RecordKind.DATA)
    assert "refuses rather than rotates" in str(refusal)
    count = (await journal.status()).seq
    await journal.close()
    assert 10 < count < 20
    assert verify(jdir, key).records == count


async def test_receipts_journal_rotates_only_past_acknowledged(jdir: Path, key: bytes) -> None:
    """A RECEIPTS journal refuses when the oldest segment holds unacknowledged receipts."""
    journal = await open_journal(jdir, key, kind=JournalKind.RECEIPTS, limits=SMALL)
    refusal = await _fill(journal, RecordKind.RECEIPT)
    assert "unacknowledged" in str(refusal)
    page = await journal.page(0, 5)
    for receipt in page.receipts:
        await journal.ack(receipt.seq, receipt.tag)
    cursor = page.next_cursor
    while True:
        page = await journal.page(cursor, 7)
        if not page.receipts:
            break
        for receipt in page.receipts:
            await journal.ack(receipt.seq)
        cursor = page.next_cursor
    after = await journal.append(b"now it fits", kind=RecordKind.RECEIPT)
    await journal.close()
    assert after.seq > cursor


async def test_ack_is_exact_and_durable(jdir: Path, key: bytes) -> None:
    """Only the next unacknowledged receipt may be acked; the cursor survives reopening."""
    journal = await open_journal(jdir, key, kind=JournalKind.RECEIPTS)
    first = await journal.append(b"r1", kind=RecordKind.RECEIPT)
    second = await journal.append(b"e1", kind=RecordKind.REFINEMENT)
    with pytest.raises(ReceiptAckError, match="next unacknowledged receipt is 1"):
        await journal.ack(2)
    with pytest.raises(ReceiptAckError, match="different tag"):
        await journal.ack(1, second.tag)
    assert await journal.ack(1, first.tag) == 1
    with pytest.raises(ReceiptAckError):
        await journal.ack(1)
    await journal.close()
    journal = await open_journal(jdir, key, kind=JournalKind.RECEIPTS)
    page = await journal.page(0)
    assert page.acked == 1
    assert [(r.seq, r.kind) for r in page.receipts] == [(1, 2), (2, 3)]
    assert await journal.ack(2) == 2
    with pytest.raises(ReceiptAckError, match="nothing to acknowledge"):
        await journal.ack(3)
    await journal.close()


async def test_tampered_ack_cursor_refuses_to_open(jdir: Path, key: bytes) -> None:
    """An acknowledgement cursor edited without the key makes the journal refuse to open."""
    journal = await open_journal(jdir, key, kind=JournalKind.RECEIPTS)
    await journal.append(b"r1", kind=RecordKind.RECEIPT)
    await journal.append(b"r2", kind=RecordKind.RECEIPT)
    await journal.ack(1)
    await journal.close()
    data = bytearray((jdir / "acked").read_bytes())
    data[20] = 2  # the sequence field
    (jdir / "acked").write_bytes(bytes(data))
    with pytest.raises(glove.journal.JournalTampered, match="cursor"):
        await open_journal(jdir, key, kind=JournalKind.RECEIPTS)


async def test_pages_are_bounded(jdir: Path, key: bytes) -> None:
    """A page never exceeds MAX_RECEIPT_PAGE and cursors walk every receipt once."""
    journal = await open_journal(jdir, key, kind=JournalKind.RECEIPTS)
    await asyncio.gather(*(journal.append(b"r", kind=RecordKind.RECEIPT) for _ in range(600)))
    seen: list[int] = []
    cursor = 0
    while True:
        page = await journal.page(cursor, 10_000)
        assert len(page.receipts) <= glove.journal.MAX_RECEIPT_PAGE
        if not page.receipts:
            break
        seen.extend(r.seq for r in page.receipts)
        cursor = page.next_cursor
    await journal.close()
    assert seen == list(range(1, 601))


async def test_oversize_payload_is_refused(jdir: Path, key: bytes) -> None:
    """A payload that cannot fit one segment raises RecordTooLarge; nothing is written."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, limits=SMALL)
    with pytest.raises(RecordTooLarge):
        await journal.append(b"x" * 5000)
    assert (await journal.append(b"ok")).seq == 1
    await journal.close()


async def test_writer_runs_under_running_as_a_supervised_child(jdir: Path, key: bytes) -> None:
    """The writer actor works when run by ``running()`` and wrapped in a Journal handle."""
    writer = JournalWriter(jdir, key, kind=JournalKind.SESSION)
    async with running(writer):
        journal = glove.journal.Journal(writer)
        receipt = await journal.append(b"supervised")
        await journal.close()
    assert receipt.seq == 1
    assert verify(jdir, key).clean


async def test_pages_from_any_cursor_match_the_receipts(jdir: Path, key: bytes) -> None:
    """Pages read through the sparse index equal the receipts appends returned, any cursor."""
    limits = JournalLimits(max_segment_bytes=16 * 1024, max_segment_records=500, max_segments=1000)
    journal = await open_journal(jdir, key, kind=JournalKind.RECEIPTS, limits=limits)
    receipts = []
    for _ in range(10):
        receipts += await asyncio.gather(
            *(journal.append(b"p" * (i % 90), kind=RecordKind.RECEIPT) for i in range(100))
        )
    assert (await journal.status()).segments > 3
    by_seq = sorted(receipts, key=lambda r: r.seq)
    for cursor in (0, 1, 62, 63, 64, 65, 127, 128, 333, 640, by_seq[-2].seq, by_seq[-1].seq):
        page = await journal.page(cursor, 17)
        want = [r for r in by_seq if r.seq > cursor][:17]
        assert list(page.receipts) == want, cursor
    await journal.close()
    reopened = await open_journal(jdir, key, kind=JournalKind.RECEIPTS, limits=limits)
    page = await reopened.page(by_seq[500].seq - 1, 5)
    await reopened.close()
    assert list(page.receipts) == by_seq[500:505]


async def test_page_over_bytes_rewritten_while_open_fails_stop(jdir: Path, key: bytes) -> None:
    """A page over a record rewritten (CRC fixed) while the writer runs is refused, not served."""
    journal = await open_journal(jdir, key, kind=JournalKind.RECEIPTS)
    await journal.append(b"original-payload", kind=RecordKind.RECEIPT)
    seg = jdir / segment_name(0)
    data = bytearray(seg.read_bytes())
    end = HEADER_BYTES + RECORD_OVERHEAD_BYTES + len(b"original-payload")
    data[end - 20] ^= 0xFF  # inside the tag: the CRC now fails
    with seg.open("r+b") as fh:
        fh.write(bytes(data))
    with pytest.raises(JournalCorrupt):
        await journal.page(0)
    with pytest.raises(JournalFailed):
        await journal.close()


async def test_failed_fsync_escalates_to_the_supervisor(jdir: Path, key: bytes) -> None:
    """Under a one-strike supervisor a failed fdatasync tears the tree down, reason recorded."""
    from glove.actors import ChildSpec, Supervisor

    storage = FaultStorage()
    spec = ChildSpec(
        "journal", lambda: JournalWriter(jdir, key, kind=JournalKind.SESSION, storage=storage)
    )
    sup = Supervisor("session-1", [spec], strategy="one_for_all", intensity=0)
    async with running(sup):
        writer = sup.child("journal")
        assert isinstance(writer, JournalWriter)
        journal = glove.journal.Journal(writer)
        await journal.append(b"fine")
        storage.sync_errno = errno.EIO
        with pytest.raises(JournalFailed):
            await journal.append(b"lost")
        for _ in range(200):
            if sup.state in ("crashed", "stopped"):
                break
            await asyncio.sleep(0.01)
        assert sup.state == "crashed"
    assert any("JournalFailed" in (e.reason or "") for e in sup.exits)
    reopened = await open_journal(jdir, key, kind=JournalKind.SESSION)
    assert (await reopened.status()).seq in (1, 2)
    await reopened.close()
