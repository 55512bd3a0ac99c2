"""Fuzz target: bytes -> the journal record decoder, segment header and segment scans.

Contract under test: ``decode_record`` returns a status (never raises) and an OK record
re-encodes to exactly the bytes it was decoded from, while every shorter prefix of it is
INCOMPLETE; ``decode_header`` returns a header or raises ``HeaderError``/``UnsupportedFormat``;
``scan_segment`` (keyed) and the keyless entry scan return a scan or raise
``JournalCorrupt``/``JournalTampered``/``UnsupportedFormat`` only, whatever the bytes.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from journal_common import run

from glove.journal import _chain
from glove.journal._codec import (
    FrameStatus,
    HeaderError,
    RecordKind,
    SegmentHeader,
    SegmentState,
    decode_header,
    decode_record,
    encode_body,
    encode_header,
    encode_record,
)
from glove.journal._entries import _scan_keyless
from glove.journal._recovery import scan_segment
from glove.journal.errors import JournalCorrupt, JournalTampered, UnsupportedFormat

KEY = bytes(range(32))
JOURNAL_ID = bytes(range(16))
ALLOWED = (JournalCorrupt, JournalTampered, UnsupportedFormat)


def _header(state: SegmentState = SegmentState.ONLINE) -> bytes:
    genesis = _chain.genesis_tag(KEY, JOURNAL_ID)
    draft = SegmentHeader(JOURNAL_ID, 1, 0, 1, genesis, b"\0" * 32, state)
    tag = _chain.header_tag(KEY, draft)
    return encode_header(SegmentHeader(JOURNAL_ID, 1, 0, 1, genesis, tag, state))


def _records(payloads: list[tuple[int, bytes]]) -> bytes:
    out, tag = b"", _chain.genesis_tag(KEY, JOURNAL_ID)
    for seq, (kind, payload) in enumerate(payloads, start=1):
        body = encode_body(seq, 1_790_000_000_000_000_000 + seq, kind, payload, seq % 3)
        tag = _chain.record_tag(KEY, JOURNAL_ID, tag, seq, body)
        out += encode_record(body, tag)
    return out


def seed_inputs() -> list[bytes]:
    """Valid records and segments, a torn tail, a zero tail, a sealed segment."""
    receipt = (int(RecordKind.RECEIPT), b'{"session_id":"s1","n":1}')
    data = (int(RecordKind.DATA), bytes(range(40)))
    records = _records([receipt, data, receipt])
    seal = _records([receipt, (int(RecordKind.SEAL), bytes(16))])
    return [
        records[: len(records) // 3 + 30],
        _records([receipt]),
        _header() + records,
        _header() + records[:-9],
        _header() + records + bytes(64),
        _header(SegmentState.SEALED) + seal,
        _header(SegmentState.OFFLINE),
    ]


def one_input(data: bytes) -> None:
    """Decode ``data`` every way the journal does; only the typed outcomes are allowed."""
    status, record = decode_record(data, 0)
    assert isinstance(status, FrameStatus)
    if status is FrameStatus.OK:
        assert record is not None
        frame = data[: record.size]
        assert encode_record(record.body, record.tag) == frame
        for cut in {0, 1, record.size // 2, record.size - 1}:
            assert decode_record(frame[:cut], 0)[0] is FrameStatus.INCOMPLETE
    else:
        assert record is None
    with contextlib.suppress(HeaderError, UnsupportedFormat):
        decode_header(data)
    for segment in (data, _header() + data):
        with contextlib.suppress(ALLOWED):
            scan_segment(segment, KEY, name="fuzz")
        with contextlib.suppress(ALLOWED):
            _scan_keyless(segment, "fuzz", last=True)


if __name__ == "__main__":
    run("record", one_input, seed_inputs)
