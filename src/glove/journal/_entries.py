"""The journal's entries in order, for the Merkle tree: read back from the segment files.

Every record of a journal is one leaf of its Merkle tree: the record with sequence number
``seq`` is leaf ``seq - 1`` and its entry is the record's payload (see ``docs/receipts.md`` for
why the payload and not the frame). Two readers:

* :func:`iter_entries` with the HMAC key checks the whole chain as recovery does (the log
  owner, rebuilding its tree at open);
* without a key it checks only framing, CRCs, journal id, segment and sequence continuity (an
  offline tool that holds no HMAC key: whatever it builds is checked against a signed
  checkpoint before anyone relies on it).

Both stop at the first incomplete or garbled frame of the last segment (a torn or in-flight
tail) and at ``upto``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from glove.journal import _layout
from glove.journal._codec import (
    HEADER_BYTES,
    MAX_RECORD_BYTES,
    RECORD_PREFIX_BYTES,
    TAG_BYTES,
    FrameStatus,
    HeaderError,
    SegmentHeader,
    decode_header,
    decode_record,
)
from glove.journal._recovery import ChainPoint, scan_segment
from glove.journal._storage import Storage
from glove.journal.errors import JournalCorrupt, JournalTampered, LogMismatch


@dataclass(frozen=True, slots=True)
class Entry:
    """One journal record as a tree leaf: its sequence number, kind and payload, and where
    it sits (segment number and byte offset; -1 when unknown)."""

    seq: int
    kind: int
    payload: bytes
    segment: int = -1
    offset: int = -1

    @property
    def index(self) -> int:
        """The record's leaf index (``seq - 1``)."""
        return self.seq - 1

    @property
    def place(self) -> tuple[int, int]:
        """``(segment number, byte offset)``."""
        return self.segment, self.offset


def first_retained_seq(storage: Storage, path: str) -> int:
    """The sequence number of the oldest record still in the journal (1 if none was pruned).

    Raises:
        LogMismatch: the journal has no segment, or its oldest header is unreadable.
        JournalTampered: segments are missing in the middle.
    """
    numbers = _layout.list_segments(storage, path)
    if not numbers:
        raise LogMismatch(f"{path} holds no journal segment")
    head = storage.read_at(str(Path(path) / _layout.segment_name(numbers[0])), 0, HEADER_BYTES)
    try:
        return decode_header(head).first_seq
    except HeaderError as exc:
        raise LogMismatch(f"the oldest segment of {path} has an unreadable header") from exc


def iter_entries(
    storage: Storage, path: str, key: bytes | None, *, upto: int | None = None
) -> Iterator[Entry]:
    """Yield the journal's records in order, oldest retained first, up to seq ``upto``.

    Raises:
        JournalCorrupt, JournalTampered, UnsupportedFormat: the journal is damaged (with a key:
            anything recovery refuses; without: framing, ids, order).
        OSError: a segment cannot be read.
    """
    after: ChainPoint | None = None
    expected: int | None = None
    journal_id: bytes | None = None
    numbers = _layout.list_segments(storage, path)
    for position, number in enumerate(numbers):
        name = _layout.segment_name(number)
        data = storage.read_file(str(Path(path) / name))
        last = position == len(numbers) - 1
        if key is not None:
            scan = scan_segment(data, key, name=name, after=after, keep_records=True)
            if scan.tail is not None and not last:
                raise JournalCorrupt("damaged tail in a rotated segment", segment=name)
            after = scan.end
            records = [(r.seq, r.kind, r.payload, r.offset) for r in scan.records]
        else:
            header, records = _scan_keyless(data, name, last=last)
            if journal_id is not None and header.journal_id != journal_id:
                raise JournalTampered("segment belongs to another journal", segment=name)
            if header.segment != number:
                raise JournalTampered(f"segment file holds segment {header.segment}", segment=name)
            if expected is not None and header.first_seq != expected:
                raise JournalTampered("segment does not continue the chain", segment=name)
            journal_id = header.journal_id
            expected = header.first_seq + len(records)
        for seq, kind, payload, offset in records:
            if upto is not None and seq > upto:
                return
            yield Entry(seq, kind, payload, number, offset)


def _scan_keyless(
    data: bytes, name: str, *, last: bool
) -> tuple[SegmentHeader, list[tuple[int, int, bytes, int]]]:
    try:
        header = decode_header(data[:HEADER_BYTES])
    except HeaderError as exc:
        raise JournalCorrupt(f"segment header unreadable: {exc}", segment=name, offset=0) from exc
    records: list[tuple[int, int, bytes, int]] = []
    offset, expected = HEADER_BYTES, header.first_seq
    view = memoryview(data)
    while offset < len(data):
        status, record = decode_record(view, offset)
        if status is not FrameStatus.OK or record is None:
            if not last:
                raise JournalCorrupt("damaged record in a rotated segment", segment=name)
            break  # a torn or in-flight tail: the entries end here
        if record.seq != expected:
            raise JournalTampered(
                "sequence out of order", segment=name, offset=offset, seq=expected
            )
        records.append((record.seq, record.kind, record.payload, offset))
        offset += record.size
        expected += 1
    return header, records


def read_entry_at(storage: Storage, path: str, segment: int, offset: int, seq: int) -> Entry:
    """Record ``seq`` read from its known place: one frame, its CRC and sequence checked.

    The caller checks the payload against the Merkle tree's leaf, which was built from
    authenticated records, so the HMAC chain need not be walked to reach it.

    Raises:
        FileNotFoundError: the segment was deleted (its receipts were acknowledged).
        LogMismatch: the bytes there are not record ``seq``.
        OSError: the segment cannot be read.
    """
    seg_path = str(Path(path) / _layout.segment_name(segment))
    prefix = storage.read_at(seg_path, offset, RECORD_PREFIX_BYTES)
    if len(prefix) < RECORD_PREFIX_BYTES:
        raise LogMismatch(f"record {seq} is not at {_layout.segment_name(segment)}:{offset}")
    length = int.from_bytes(prefix[4:8], "little")
    if length > MAX_RECORD_BYTES:
        raise LogMismatch(f"record {seq} is not at {_layout.segment_name(segment)}:{offset}")
    frame = storage.read_at(seg_path, offset, RECORD_PREFIX_BYTES + length + TAG_BYTES)
    status, record = decode_record(frame, 0)
    if status is not FrameStatus.OK or record is None or record.seq != seq:
        raise LogMismatch(f"record {seq} is not at {_layout.segment_name(segment)}:{offset}")
    return Entry(seq, record.kind, record.payload, segment, offset)
