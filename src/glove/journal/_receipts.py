"""Receipts, receipt pages and the acknowledgement cursor (sans-IO).

A :class:`Receipt` is what an append returns once its record is durable: the journal id, the
sequence number, the record kind, the time and the chain tag. Whoever holds one can later show
that the journal still contains that record (``verify(..., checkpoint=(seq, tag))``), and the
file alone cannot show a clean truncation, so receipts are the anchor (the spec: "an HMAC chain
anchored by Sage").

Receipts are read back in bounded pages from a cursor and acknowledged *exactly*: only the
next unacknowledged sequence number is accepted, and the cursor is persisted durably with an
HMAC so it cannot be moved by someone without the key.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

import msgspec

from glove.journal import _chain
from glove.journal._codec import TAG_BYTES, Record, RecordKind
from glove.journal.errors import JournalTampered

MAX_RECEIPT_PAGE: Final = 256
"""Most receipts one page returns."""
RECEIPT_KINDS: Final = frozenset({RecordKind.DATA, RecordKind.RECEIPT, RecordKind.REFINEMENT})
"""Record kinds that produce receipts (seal records are the journal's own)."""

_ACK_MAGIC = b"GLVA"
_ACK = struct.Struct("<4s16sQ32s32s")


class Receipt(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Proof that one record is durable: journal id, sequence, kind, time and chain tag."""

    journal_id: bytes
    seq: int
    kind: int
    t_ns: int
    tag: bytes

    @property
    def checkpoint(self) -> str:
        """The ``SEQ:TAGHEX`` form ``glove journal verify --checkpoint`` takes."""
        return f"{self.seq}:{self.tag.hex()}"


class ReceiptPage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A bounded page of receipts after a cursor; ``next_cursor`` continues the listing."""

    receipts: tuple[Receipt, ...]
    next_cursor: int
    acked: int


def receipt_of(journal_id: bytes, record: Record) -> Receipt:
    """The receipt of a decoded record."""
    return Receipt(journal_id, record.seq, record.kind, record.t_ns, record.tag)


def page_of(
    journal_id: bytes, records: Iterable[Record], *, after: int, limit: int, durable: int
) -> list[Receipt]:
    """Receipt-bearing records with ``after < seq <= durable``, at most ``limit`` of them."""
    out: list[Receipt] = []
    for record in records:
        if len(out) >= limit:
            break
        if after < record.seq <= durable and record.kind in RECEIPT_KINDS:
            out.append(receipt_of(journal_id, record))
    return out


def encode_ack(key: bytes, journal_id: bytes, seq: int, tag: bytes) -> bytes:
    """The durable acknowledgement cursor: journal id, sequence, record tag and its HMAC."""
    return _ACK.pack(_ACK_MAGIC, journal_id, seq, tag, _chain.ack_tag(key, journal_id, seq, tag))


def decode_ack(key: bytes, journal_id: bytes, data: bytes) -> tuple[int, bytes]:
    """Decode and authenticate an acknowledgement cursor; return ``(seq, record tag)``.

    Raises:
        JournalTampered: wrong size, magic, journal id or HMAC.
    """
    if len(data) != _ACK.size:
        raise JournalTampered("acknowledgement cursor has the wrong size")
    magic, jid, seq, tag, mac = _ACK.unpack(data)
    if magic != _ACK_MAGIC or jid != journal_id:
        raise JournalTampered("acknowledgement cursor belongs to another journal")
    if not _chain.tags_equal(mac, _chain.ack_tag(key, journal_id, seq, tag)):
        raise JournalTampered("acknowledgement cursor tag mismatch")
    assert len(tag) == TAG_BYTES
    return seq, tag
