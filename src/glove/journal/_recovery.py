"""Classify what a forward scan of journal segments finds (pure over bytes).

The rules (research note B.1, "Recovery matrix"):

========================================  ==========================================
finding                                    classification
========================================  ==========================================
EOF exactly on a record boundary           clean
incomplete or garbled frame, nothing       ``TailKind.TORN``: a crash; the opener cuts it
valid after it                             back (bytes kept aside) only if the header
                                           says the segment was open (ONLINE)
all-zero bytes from a boundary to EOF      ``TailKind.ZERO``: preallocation or external
                                           growth; same treatment as a torn tail
garbled frame with a valid record after    :class:`JournalCorrupt` naming offset and seq
CRC fine, HMAC tag wrong                   :class:`JournalTampered`
sequence gap or duplicate                  :class:`JournalTampered`
foreign journal id, segment out of order   :class:`JournalTampered`
record after a seal, sealed w/o seal       :class:`JournalTampered`
========================================  ==========================================

Nothing here repairs anything: the scan reports, the adapter (``_storage``/``_writer``) or the
operator (``glove journal repair``) acts.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from glove.journal import _chain
from glove.journal._codec import (
    HEADER_BYTES,
    RECORD_MAGIC,
    FrameStatus,
    HeaderError,
    Record,
    RecordKind,
    SegmentHeader,
    SegmentState,
    decode_header,
    decode_record,
)
from glove.journal.errors import JournalCorrupt, JournalTampered

INDEX_STRIDE = 64
"""Every INDEX_STRIDE-th record of a segment is remembered (seq, offset, previous tag), so a
receipt page is read and authenticated from a nearby record instead of the segment's start."""

IndexEntry = tuple[int, int, bytes]
"""(seq, byte offset, chain tag before the record)."""


class TailKind(enum.Enum):
    """What lies past the last good record of a segment."""

    TORN = "torn"
    ZERO = "zero"


@dataclass(frozen=True, slots=True)
class TailFinding:
    """Bytes past the last good record: where they start, how many, and what they look like."""

    kind: TailKind
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class ChainPoint:
    """Where a chain stands: the last sequence and tag (``seq = first - 1`` before any record)."""

    journal_id: bytes
    segment: int
    seq: int
    tag: bytes


@dataclass(slots=True)
class SegmentScan:
    """Result of scanning one segment."""

    name: str
    header: SegmentHeader
    end: ChainPoint
    good_end: int
    count: int = 0
    sealed: bool = False
    tail: TailFinding | None = None
    records: list[Record] = field(default_factory=list)
    index: list[IndexEntry] = field(default_factory=list)


def scan_segment(
    data: bytes | memoryview,
    key: bytes,
    *,
    name: str = "",
    after: ChainPoint | None = None,
    keep_records: bool = False,
) -> SegmentScan:
    """Scan one segment's bytes and classify them.

    ``after`` is where the previous segment's chain ended; the header must continue it
    exactly (same journal id, next segment number, next seq, same tag). Without it the
    segment must be a genesis segment or stand on its own authenticated header.

    Raises:
        JournalCorrupt: a garbled header or a garbled frame followed by valid records.
        JournalTampered: header tag, chain tag, sequence, journal id or segment order wrong.
        UnsupportedFormat: not a journal segment this version reads.
    """
    view = memoryview(data)
    try:
        header = decode_header(bytes(view[:HEADER_BYTES]))
    except HeaderError as exc:
        raise JournalCorrupt(f"segment header unreadable: {exc}", segment=name, offset=0) from exc
    if not _chain.tags_equal(_chain.header_tag(key, header), header.header_tag):
        raise JournalTampered("segment header tag mismatch", segment=name, offset=0)
    _check_continuity(header, after, key, name)
    scan = SegmentScan(
        name,
        header,
        ChainPoint(header.journal_id, header.segment, header.first_seq - 1, header.start_tag),
        HEADER_BYTES,
    )
    offset = HEADER_BYTES
    prev_tag = header.start_tag
    expected = header.first_seq
    total = len(view)
    while offset < total:
        status, record = decode_record(view, offset)
        if status is not FrameStatus.OK:
            scan.tail = _classify_tail(view, offset, name, expected)
            break
        assert record is not None
        if scan.sealed:
            raise JournalTampered("record after the seal record", segment=name, offset=offset)
        if record.seq != expected:
            what = "duplicate or reordered" if record.seq < expected else "gap before"
            raise JournalTampered(
                f"sequence {what} record {record.seq}", segment=name, offset=offset, seq=expected
            )
        try:
            tag = _chain.record_tag(key, header.journal_id, prev_tag, record.seq, record.body)
        except ValueError as exc:
            raise JournalTampered(str(exc), segment=name, offset=offset, seq=expected) from exc
        if not _chain.tags_equal(tag, record.tag):
            raise JournalTampered("chain tag mismatch", segment=name, offset=offset, seq=expected)
        if record.kind == RecordKind.SEAL:
            scan.sealed = True
        if keep_records:
            scan.records.append(record)
        if scan.count % INDEX_STRIDE == 0:
            scan.index.append((record.seq, offset, prev_tag))
        prev_tag = record.tag
        expected += 1
        offset += record.size
        scan.count += 1
    scan.good_end = offset if scan.tail is None else scan.tail.offset
    scan.end = ChainPoint(header.journal_id, header.segment, expected - 1, prev_tag)
    if header.state is SegmentState.SEALED and not scan.sealed:
        raise JournalTampered("segment marked sealed has no seal record", segment=name)
    return scan


def _check_continuity(
    header: SegmentHeader, after: ChainPoint | None, key: bytes, name: str
) -> None:
    if after is None:
        if header.segment == 0 and (
            header.first_seq != 1
            or not _chain.tags_equal(header.start_tag, _chain.genesis_tag(key, header.journal_id))
        ):
            raise JournalTampered("genesis segment does not start the chain", segment=name)
        return
    if header.journal_id != after.journal_id:
        raise JournalTampered("segment belongs to another journal", segment=name, offset=0)
    if header.segment != after.segment + 1:
        raise JournalTampered(
            f"segment number {header.segment} does not follow {after.segment}",
            segment=name,
            offset=0,
        )
    if header.first_seq != after.seq + 1 or not _chain.tags_equal(header.start_tag, after.tag):
        raise JournalTampered(
            "segment does not continue the previous segment's chain",
            segment=name,
            offset=0,
            seq=after.seq + 1,
        )


def _classify_tail(view: memoryview, offset: int, name: str, expected: int) -> TailFinding:
    rest = view[offset:]
    length = len(rest)
    if not any(rest):
        return TailFinding(TailKind.ZERO, offset, length)
    # A garbled frame is a torn tail only if nothing valid follows it; resync by magic.
    # A valid record of the *same* group-commit batch may follow a garbled one after a crash
    # (writes reach the disk out of order before fdatasync); one from a later batch may not,
    # since a later batch is only written after the earlier one's fdatasync returned.
    probe = bytes(rest)
    at = probe.find(RECORD_MAGIC, 1)
    while at != -1:
        status, found = decode_record(view, offset + at)
        if status is FrameStatus.OK:
            assert found is not None
            batch_start = found.seq - found.batch_pos
            if found.seq < expected or batch_start > expected:
                raise JournalCorrupt(
                    "garbled record with valid records after it",
                    segment=name,
                    offset=offset,
                    seq=expected,
                )
        at = probe.find(RECORD_MAGIC, at + 1)
    return TailFinding(TailKind.TORN, offset, length)


def scan_chain(
    segments: Sequence[tuple[str, bytes | memoryview]],
    key: bytes,
    *,
    keep_records: bool = False,
) -> list[SegmentScan]:
    """Scan consecutive segments, oldest first, checking that each continues the last.

    Every segment but the last must be sealed and have no tail.

    Raises:
        JournalCorrupt, JournalTampered, UnsupportedFormat: as :func:`scan_segment`.
    """
    scans: list[SegmentScan] = []
    after: ChainPoint | None = None
    for index, (name, data) in enumerate(segments):
        scan = scan_segment(data, key, name=name, after=after, keep_records=keep_records)
        last = index == len(segments) - 1
        if not last and (not scan.sealed or scan.tail is not None):
            if scan.tail is not None:
                raise JournalCorrupt(
                    "damaged tail in a rotated segment",
                    segment=name,
                    offset=scan.tail.offset,
                    seq=scan.end.seq + 1,
                )
            raise JournalTampered("a segment before the last is not sealed", segment=name)
        scans.append(scan)
        after = scan.end
    return scans
