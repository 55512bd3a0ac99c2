"""Segment header and record framing: bytes in, values out (sans-IO).

A journal segment is one file::

    header (HEADER_BYTES)  | record | record | ...

Header, little-endian, fixed size::

    0   magic        4   b"GLVJ"
    4   version      u16 FORMAT_VERSION
    6   incompat     u16 incompatible feature bits; any unknown bit means refuse
    8   state        u8  OFFLINE (closed cleanly), ONLINE (open or crashed), SEALED (rotated)
    9   journal kind u8
    10  reserved     u16 zero
    12  crc32        u32 over the header with the state byte and this field zeroed
    16  journal id   16 random bytes, the same in every segment of one journal
    32  segment      u64 segment number, 0 for the first
    40  first seq    u64 sequence of the first record this segment may hold
    48  start tag    32  chain tag before that record (genesis tag for segment 0)
    80  header tag   32  HMAC over bytes 0..80 with state and crc zeroed (see _chain)
    112 padding      zero up to HEADER_BYTES

The state byte is the one field rewritten in place (journald's rule); it is excluded from both
the CRC and the HMAC and checked structurally instead.

Record::

    magic b"GREC" | u32 body length | u32 crc32(length ‖ body ‖ tag) | body | tag (32)
    body = u64 seq | u64 t_ns | u8 kind | u32 batch_pos | payload

``batch_pos`` is the record's index inside its group-commit batch (the records written
before one ``fdatasync``). Recovery uses it to tell a crash from corruption: after a crash, a
garbled record can only be followed by valid records of *its own* batch (none of which was
acknowledged); a valid record from a *later* batch behind a garbled one means acknowledged
data was damaged. The CRC detects torn and garbled writes, including a garbled tag, so a crash
never looks like tampering; the HMAC tag (see :mod:`glove.journal._chain`) detects deliberate
change. The body length is checked against :data:`MAX_RECORD_BYTES` before anything is
allocated for it.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

from glove.journal.errors import RecordTooLarge, UnsupportedFormat

HEADER_MAGIC = b"GLVJ"
RECORD_MAGIC = b"GREC"
FORMAT_VERSION = 1
KNOWN_INCOMPAT_FLAGS = 0
HEADER_BYTES = 128
TAG_BYTES = 32
JOURNAL_ID_BYTES = 16
MAX_RECORD_BYTES = 1024 * 1024
"""Largest record body (seq, time, kind and payload) in bytes; checked before allocation."""

_HEADER_FIXED = struct.Struct("<4sHHBBHI16sQQ32s")
_HEADER_SIGNED_BYTES = _HEADER_FIXED.size  # 80: what the header tag covers
_STATE_OFFSET = 8
_CRC_OFFSET = 12
_RECORD_PREFIX = struct.Struct("<4sII")
_BODY_PREFIX = struct.Struct("<QQBI")
RECORD_PREFIX_BYTES = _RECORD_PREFIX.size
BODY_PREFIX_BYTES = _BODY_PREFIX.size
RECORD_OVERHEAD_BYTES = RECORD_PREFIX_BYTES + BODY_PREFIX_BYTES + TAG_BYTES
MAX_PAYLOAD_BYTES = MAX_RECORD_BYTES - BODY_PREFIX_BYTES


class SegmentState(enum.IntEnum):
    """The header's mutable state byte."""

    OFFLINE = 0
    ONLINE = 1
    SEALED = 2


class RecordKind(enum.IntEnum):
    """What a record holds; each kind has its own HMAC domain (see ``_chain.domain_for``)."""

    DATA = 1
    RECEIPT = 2
    REFINEMENT = 3
    SEAL = 4


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    """A decoded segment header."""

    journal_id: bytes
    journal_kind: int
    segment: int
    first_seq: int
    start_tag: bytes
    header_tag: bytes
    state: SegmentState

    def signed_bytes(self) -> bytes:
        """The header bytes the header tag covers (state and CRC zeroed)."""
        return _HEADER_FIXED.pack(
            HEADER_MAGIC,
            FORMAT_VERSION,
            0,
            0,
            self.journal_kind,
            0,
            0,
            self.journal_id,
            self.segment,
            self.first_seq,
            self.start_tag,
        )


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record: where it sits, what it says, and its chain tag."""

    offset: int
    seq: int
    t_ns: int
    kind: int
    batch_pos: int
    payload: bytes
    body: bytes
    tag: bytes

    @property
    def size(self) -> int:
        """Bytes the record occupies on disk."""
        return RECORD_PREFIX_BYTES + len(self.body) + TAG_BYTES


def encode_header(header: SegmentHeader) -> bytes:
    """Encode a header (with its tag already computed) to exactly HEADER_BYTES bytes."""
    signed = bytearray(header.signed_bytes())
    out = bytearray(HEADER_BYTES)
    out[: len(signed)] = signed
    out[_HEADER_SIGNED_BYTES : _HEADER_SIGNED_BYTES + TAG_BYTES] = header.header_tag
    struct.pack_into("<I", out, _CRC_OFFSET, zlib.crc32(out))
    out[_STATE_OFFSET] = int(header.state)
    return bytes(out)


def state_byte_offset() -> int:
    """Byte offset of the mutable state field inside the header."""
    return _STATE_OFFSET


class HeaderError(ValueError):
    """The header bytes are short, garbled or of an unknown format (decoder-internal)."""


def decode_header(data: bytes) -> SegmentHeader:
    """Decode the first HEADER_BYTES of a segment.

    Raises:
        UnsupportedFormat: wrong magic, unknown version or an unknown incompatible flag.
        HeaderError: too short, CRC mismatch, a bad state byte or non-zero padding.
    """
    if len(data) < HEADER_BYTES:
        raise HeaderError(f"header is {len(data)} bytes, expected {HEADER_BYTES}")
    raw = bytearray(data[:HEADER_BYTES])
    (magic, version, incompat, _state, kind, reserved, crc, jid, segment, first_seq, start) = (
        _HEADER_FIXED.unpack_from(raw)
    )
    if magic != HEADER_MAGIC:
        raise UnsupportedFormat(f"not a glove journal segment (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise UnsupportedFormat(f"journal format version {version} is not supported")
    if incompat & ~KNOWN_INCOMPAT_FLAGS:
        raise UnsupportedFormat(f"unknown incompatible feature flags {incompat:#06x}")
    state = raw[_STATE_OFFSET]
    raw[_STATE_OFFSET] = 0
    struct.pack_into("<I", raw, _CRC_OFFSET, 0)
    if zlib.crc32(raw) != crc:
        raise HeaderError("header checksum mismatch")
    if reserved != 0 or any(raw[_HEADER_SIGNED_BYTES + TAG_BYTES :]):
        raise HeaderError("header reserved bytes are not zero")
    if state not in SegmentState._value2member_map_:
        raise HeaderError(f"unknown header state {state}")
    tag = bytes(raw[_HEADER_SIGNED_BYTES : _HEADER_SIGNED_BYTES + TAG_BYTES])
    return SegmentHeader(jid, kind, segment, first_seq, start, tag, SegmentState(state))


def encode_body(seq: int, t_ns: int, kind: int, payload: bytes, batch_pos: int = 0) -> bytes:
    """Encode a record body.

    Raises:
        RecordTooLarge: the body would exceed MAX_RECORD_BYTES.
    """
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise RecordTooLarge(
            f"payload of {len(payload)} bytes is over the {MAX_PAYLOAD_BYTES}-byte maximum"
        )
    return _BODY_PREFIX.pack(seq, t_ns, kind, batch_pos) + payload


def encode_record(body: bytes, tag: bytes) -> bytes:
    """Frame an encoded body and its chain tag as one record."""
    length = struct.pack("<I", len(body))
    crc = zlib.crc32(tag, zlib.crc32(body, zlib.crc32(length)))
    return RECORD_MAGIC + length + struct.pack("<I", crc) + body + tag


class FrameStatus(enum.Enum):
    """Outcome of trying to decode one record at an offset."""

    OK = "ok"
    INCOMPLETE = "incomplete"  # fewer bytes than the frame needs: torn or cut
    BAD = "bad"  # magic, length or CRC wrong: garbled


def decode_record(data: bytes | memoryview, offset: int) -> tuple[FrameStatus, Record | None]:
    """Try to decode one record starting at ``offset`` of ``data``.

    Returns ``(OK, record)``, or ``(INCOMPLETE, None)`` when the data ends inside the frame,
    or ``(BAD, None)`` for a wrong magic, an over-limit length or a checksum mismatch. The
    length is checked against MAX_RECORD_BYTES before the body is sliced.
    """
    end = len(data)
    if end - offset < RECORD_PREFIX_BYTES:
        have = min(end - offset, len(RECORD_MAGIC))
        if bytes(data[offset : offset + have]) != RECORD_MAGIC[:have]:
            return FrameStatus.BAD, None
        return FrameStatus.INCOMPLETE, None
    magic, length, crc = _RECORD_PREFIX.unpack_from(data, offset)
    if magic != RECORD_MAGIC or length > MAX_RECORD_BYTES or length < BODY_PREFIX_BYTES:
        return FrameStatus.BAD, None
    body_start = offset + RECORD_PREFIX_BYTES
    tag_start = body_start + length
    if end < tag_start + TAG_BYTES:
        return FrameStatus.INCOMPLETE, None
    body = bytes(data[body_start:tag_start])
    tag = bytes(data[tag_start : tag_start + TAG_BYTES])
    if zlib.crc32(tag, zlib.crc32(body, zlib.crc32(struct.pack("<I", length)))) != crc:
        return FrameStatus.BAD, None
    seq, t_ns, kind, batch_pos = _BODY_PREFIX.unpack_from(body)
    payload = body[BODY_PREFIX_BYTES:]
    return FrameStatus.OK, Record(offset, seq, t_ns, kind, batch_pos, payload, body, tag)
