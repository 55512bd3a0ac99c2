"""Tests of the sans-IO record and header codec and of the HMAC chain."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.journal import _chain
from glove.journal._codec import (
    HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_RECORD_BYTES,
    RECORD_PREFIX_BYTES,
    FrameStatus,
    HeaderError,
    RecordKind,
    SegmentHeader,
    SegmentState,
    decode_header,
    decode_record,
    encode_body,
    encode_header,
)
from glove.journal._codec import encode_record as frame
from glove.journal.errors import RecordTooLarge, UnsupportedFormat

KEY = bytes(range(32))


def _header(**overrides: object) -> SegmentHeader:
    fields: dict[str, object] = {
        "journal_id": b"J" * 16,
        "journal_kind": 1,
        "segment": 3,
        "first_seq": 42,
        "start_tag": b"S" * 32,
        "header_tag": b"T" * 32,
        "state": SegmentState.ONLINE,
    }
    fields.update(overrides)
    return SegmentHeader(**fields)  # type: ignore[arg-type]


@given(
    seq=st.integers(0, 2**64 - 1),
    t_ns=st.integers(0, 2**64 - 1),
    kind=st.sampled_from(list(RecordKind)),
    payload=st.binary(max_size=2048),
    pos=st.integers(0, 2**32 - 1),
    tag=st.binary(min_size=32, max_size=32),
)
@settings(max_examples=200)
def test_record_round_trips(
    seq: int, t_ns: int, kind: RecordKind, payload: bytes, pos: int, tag: bytes
) -> None:
    """Any record decodes back to exactly the fields it was encoded from."""
    data = b"prefix" + frame(encode_body(seq, t_ns, kind, payload, pos), tag)
    status, record = decode_record(data, 6)
    assert status is FrameStatus.OK
    assert record is not None
    assert (record.seq, record.t_ns, record.kind, record.batch_pos) == (seq, t_ns, kind, pos)
    assert (record.payload, record.tag, record.offset) == (payload, tag, 6)
    assert record.size == len(data) - 6


@given(payload=st.binary(max_size=300), cut=st.data())
@settings(max_examples=100)
def test_every_prefix_of_a_record_is_incomplete(payload: bytes, cut: st.DataObject) -> None:
    """Every strict prefix of a valid record decodes as INCOMPLETE, never as a record."""
    data = frame(encode_body(1, 2, RecordKind.DATA, payload), b"t" * 32)
    n = cut.draw(st.integers(0, len(data) - 1))
    status, record = decode_record(data[:n], 0) if n else (FrameStatus.INCOMPLETE, None)
    assert status is FrameStatus.INCOMPLETE
    assert record is None


@given(data=st.binary(max_size=200))
@settings(max_examples=300)
def test_garbage_never_raises(data: bytes) -> None:
    """Random bytes decode as a status, never as an exception."""
    status, record = decode_record(data, 0)
    assert (status is FrameStatus.OK) == (record is not None)


def test_flipping_any_bit_of_a_record_is_detected() -> None:
    """A single flipped bit anywhere in a record makes the frame BAD or INCOMPLETE."""
    data = frame(encode_body(7, 8, RecordKind.RECEIPT, b"hello"), b"t" * 32)
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        status, _ = decode_record(bytes(flipped), 0)
        assert status is not FrameStatus.OK, bit


def test_oversized_length_is_rejected_before_reading_the_body() -> None:
    """A length over MAX_RECORD_BYTES is BAD at once, even though the body is absent."""
    data = b"GREC" + (MAX_RECORD_BYTES + 1).to_bytes(4, "little") + b"\0" * 4
    assert decode_record(data, 0) == (FrameStatus.BAD, None)
    exact = b"GREC" + MAX_RECORD_BYTES.to_bytes(4, "little") + b"\0" * 4
    assert decode_record(exact, 0) == (FrameStatus.INCOMPLETE, None)
    assert len(data) == RECORD_PREFIX_BYTES


def test_payload_limit_is_named_and_enforced() -> None:
    """A payload one byte over MAX_PAYLOAD_BYTES raises RecordTooLarge; the maximum fits."""
    assert len(encode_body(1, 1, 1, b"x" * MAX_PAYLOAD_BYTES)) == MAX_RECORD_BYTES
    with pytest.raises(RecordTooLarge):
        encode_body(1, 1, 1, b"x" * (MAX_PAYLOAD_BYTES + 1))


@given(
    segment=st.integers(0, 2**64 - 1),
    first_seq=st.integers(0, 2**64 - 1),
    state=st.sampled_from(list(SegmentState)),
)
@settings(max_examples=100)
def test_header_round_trips(segment: int, first_seq: int, state: SegmentState) -> None:
    """A header decodes to what was encoded, and is exactly HEADER_BYTES long."""
    header = _header(segment=segment, first_seq=first_seq, state=state)
    data = encode_header(header)
    assert len(data) == HEADER_BYTES
    assert decode_header(data) == header


def test_header_state_byte_is_outside_the_checksum() -> None:
    """Rewriting only the state byte keeps the header valid (it is checked structurally)."""
    data = bytearray(encode_header(_header()))
    data[8] = int(SegmentState.SEALED)
    assert decode_header(bytes(data)).state is SegmentState.SEALED
    data[8] = 9
    with pytest.raises(HeaderError, match="state"):
        decode_header(bytes(data))


def test_header_refuses_unknown_version_flags_and_magic() -> None:
    """Unknown magic, version or incompatible flags raise UnsupportedFormat; flips HeaderError."""
    data = encode_header(_header())
    for offset, value in ((0, b"X"), (4, b"\x02"), (6, b"\x01")):
        bad = bytearray(data)
        bad[offset : offset + 1] = value
        with pytest.raises(UnsupportedFormat):
            decode_header(bytes(bad))
    for index in range(16, HEADER_BYTES):
        bad = bytearray(data)
        bad[index] ^= 0x40
        with pytest.raises(HeaderError):
            decode_header(bytes(bad))
    with pytest.raises(HeaderError):
        decode_header(data[:-1])


def test_chain_tags_bind_domain_journal_previous_tag_and_seq() -> None:
    """Changing the kind, journal id, previous tag, seq or body changes the tag."""
    jid, prev = os.urandom(16), os.urandom(32)
    body = encode_body(5, 0, RecordKind.RECEIPT, b"payload")
    base = _chain.record_tag(KEY, jid, prev, 5, body)
    variants = [
        _chain.record_tag(KEY, jid, prev, 5, encode_body(5, 0, RecordKind.REFINEMENT, b"payload")),
        _chain.record_tag(KEY, os.urandom(16), prev, 5, body),
        _chain.record_tag(KEY, jid, os.urandom(32), 5, body),
        _chain.record_tag(KEY, jid, prev, 6, body),
        _chain.record_tag(KEY, jid, prev, 5, encode_body(5, 0, RecordKind.RECEIPT, b"payloaD")),
        _chain.record_tag(bytes(32), jid, prev, 5, body),
    ]
    assert base not in variants
    assert len(set(variants)) == len(variants)
    assert _chain.tags_equal(base, _chain.record_tag(KEY, jid, prev, 5, body))


def test_receipt_and_refinement_domains_are_distinct() -> None:
    """Each record kind has its own HMAC domain string."""
    domains = {_chain.domain_for(kind) for kind in RecordKind}
    assert len(domains) == len(RecordKind)
    with pytest.raises(ValueError, match="unknown record kind"):
        _chain.domain_for(99)


def test_short_keys_are_refused() -> None:
    """A key under 32 bytes is refused."""
    with pytest.raises(ValueError, match="at least 32"):
        _chain.check_key(b"k" * 31)
