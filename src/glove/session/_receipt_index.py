"""Where each terminal envelope sits in the receipt journal, to page and read payloads.

The registry builds the index once at start (a scan of the journal, off the loop) and the
receipt writer's commit listener extends it as receipts become durable. Reads by place are
blocking (one record each): the registry runs them off the loop.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from glove.journal import Entry, PosixStorage, RecordKind, iter_entries, read_entry_at
from glove.journal import Receipt as JournalReceipt
from glove.protocol import JsonObject
from glove.records import Receipt, decode_receipt

#: The record kinds of terminal envelopes (resource receipts, refinement envelopes).
ENVELOPE_KINDS: Final = frozenset({RecordKind.RECEIPT, RecordKind.REFINEMENT})
#: How ``receipts.page`` names each record kind.
KIND_NAMES: Final = {
    int(RecordKind.DATA): "data",
    int(RecordKind.RECEIPT): "receipt",
    int(RecordKind.REFINEMENT): "refinement",
}


class ReceiptRow(msgspec.Struct, frozen=True, kw_only=True):
    """One row of ``receipts.page``: where the receipt sits in the journal and its payload
    as decoded JSON (what was signed, handed on as it is: the client verifies it)."""

    seq: int
    session_id: str | None
    checkpoint: str
    t_ns: int
    receipt: JsonObject
    kind: str


class ReceiptPage(msgspec.Struct, frozen=True):
    """``receipts.page``: receipts in order, each with its decoded payload."""

    receipts: list[ReceiptRow]
    next_cursor: int
    acked: int


class ReceiptIndex:
    """Receipt ``seq`` -> ``(segment, offset)`` of the receipt journal at ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._places: dict[int, tuple[int, int]] = {}

    def scan(self) -> None:
        """Index every envelope the journal holds (blocking)."""
        for entry in iter_entries(PosixStorage(), self.path, None):
            if entry.kind in ENVELOPE_KINDS:
                self._places.setdefault(entry.seq, entry.place)

    def on_commit(self, entries: Sequence[Entry]) -> None:
        """The writer's commit listener: index the envelopes just made durable."""
        for entry in entries:
            if entry.kind in ENVELOPE_KINDS:
                self._places[entry.seq] = entry.place

    def body(self, seq: int) -> JsonObject:
        """The decoded payload of receipt ``seq``; empty when it is not indexed (blocking)."""
        place = self._places.get(seq)
        if place is None:
            return {}
        entry = read_entry_at(PosixStorage(), self.path, place[0], place[1], seq)
        body = json.loads(entry.payload)
        return body if isinstance(body, dict) else {}

    def receipt(self, seq: int) -> Receipt | None:
        """Receipt ``seq``, decoded strictly; None when it is not indexed (blocking).

        Raises:
            RecordInvalid: its payload is no receipt.
        """
        place = self._places.get(seq)
        if place is None:
            return None
        return decode_receipt(read_entry_at(PosixStorage(), self.path, *place, seq).payload)

    def rows(self, receipts: Sequence[JournalReceipt]) -> list[ReceiptRow]:
        """``receipts.page``'s rows for a journal page's receipts (blocking)."""
        out: list[ReceiptRow] = []
        for receipt in receipts:
            body = self.body(receipt.seq)
            session_id = body.get("session_id")
            out.append(
                ReceiptRow(
                    seq=receipt.seq,
                    session_id=session_id if isinstance(session_id, str) else None,
                    checkpoint=receipt.checkpoint,
                    t_ns=receipt.t_ns,
                    receipt=body,
                    kind=KIND_NAMES.get(receipt.kind, str(receipt.kind)),
                )
            )
        return out
