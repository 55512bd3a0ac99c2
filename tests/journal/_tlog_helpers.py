"""Helpers for the transparency-log tests: receipts, acks, and an attacker who holds the key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from glove.journal import Journal, SigningKey, _chain
from glove.journal._codec import HEADER_BYTES, decode_header, encode_body, encode_record
from glove.journal._recovery import scan_segment

SIGNING_KEY = SigningKey("example.com/glove-test-log", bytes(range(100, 132)))
OTHER_SIGNING_KEY = SigningKey("example.com/glove-test-log", bytes(range(200, 232)))


def receipt(session: str, n: int, **extra: object) -> bytes:
    """A receipt payload of ``session`` (a JSON object with a session_id)."""
    return json.dumps({"session_id": session, "n": n, **extra}).encode()


async def ack_all(journal: Journal) -> None:
    """Acknowledge every receipt the journal holds, one at a time (exact acks)."""
    while True:
        status = await journal.status()
        page = await journal.page(after=status.acked)
        if not page.receipts:
            return
        for item in page.receipts:
            await journal.ack(item.seq)


Records = list[tuple[int, int, bytes]]  # (t_ns, kind, payload)


def rewrite_segment(segment: Path, key: bytes, transform: Callable[[Records], Records]) -> None:
    """Rewrite a segment's records as someone holding the HMAC key would: re-chained, CRCs
    recomputed, so the journal's own checks pass and only the Merkle tree can tell."""
    data = segment.read_bytes()
    header = decode_header(data[:HEADER_BYTES])
    records = scan_segment(data, key, name=segment.name, keep_records=True).records
    rows = transform([(r.t_ns, r.kind, r.payload) for r in records])
    out = bytearray(data[:HEADER_BYTES])
    tag = header.start_tag
    for offset, (t_ns, kind, payload) in enumerate(rows):
        seq = header.first_seq + offset
        body = encode_body(seq, t_ns, kind, payload)
        tag = _chain.record_tag(key, header.journal_id, tag, seq, body)
        out += encode_record(body, tag)
    segment.write_bytes(bytes(out))
