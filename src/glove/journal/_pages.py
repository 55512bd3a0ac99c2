"""Read one bounded page of receipts from a segment, authenticated, from a nearby index entry.

The writer remembers every ``INDEX_STRIDE``-th record of each segment (sequence, offset and the
chain tag before it). A page starts at the closest remembered record at or before the cursor,
reads forward in bounded chunks, and checks every record's CRC, sequence and HMAC tag on the
way, so a page costs O(INDEX_STRIDE + limit) records, not a scan of the segment, and never
returns bytes the chain does not vouch for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from glove.journal import _chain
from glove.journal._codec import MAX_RECORD_BYTES, RECORD_OVERHEAD_BYTES, FrameStatus, decode_record
from glove.journal._receipts import RECEIPT_KINDS, Receipt
from glove.journal._recovery import IndexEntry
from glove.journal._storage import Storage
from glove.journal.errors import JournalChanged, JournalCorrupt, JournalTampered

PAGE_READ_BYTES: Final = 256 * 1024
"""Bytes read per chunk while paging."""


def read_receipts(
    storage: Storage,
    seg_path: str,
    key: bytes,
    journal_id: bytes,
    *,
    index: Sequence[IndexEntry],
    end: int,
    after: int,
    limit: int,
    durable: int,
) -> list[Receipt]:
    """Receipts with ``after < seq <= durable`` from one segment, at most ``limit``.

    Raises:
        JournalCorrupt: a record in the durable range fails its checksum.
        JournalTampered: a record's sequence or chain tag is wrong.
        JournalChanged: the segment is shorter than the writer wrote.
    """
    if not index or limit <= 0:
        return []
    start = index[0]
    for entry in index:
        if entry[0] > after + 1:
            break
        start = entry
    expected, offset, prev_tag = start
    name = seg_path.rsplit("/", 1)[-1]
    buffer = b""
    buffer_at = offset
    out: list[Receipt] = []
    while offset < end and len(out) < limit:
        status, record = decode_record(buffer, offset - buffer_at)
        if status is FrameStatus.INCOMPLETE:
            have_to = buffer_at + len(buffer)
            want = max(PAGE_READ_BYTES, MAX_RECORD_BYTES + RECORD_OVERHEAD_BYTES)
            chunk = storage.read_at(seg_path, have_to, min(want, end - have_to))
            if not chunk:
                raise JournalChanged(f"segment {name} ends before offset {end}")
            buffer = buffer[offset - buffer_at :] + chunk
            buffer_at = offset
            continue
        if record is None:
            raise JournalCorrupt(
                "record checksum mismatch", segment=name, offset=offset, seq=expected
            )
        if record.seq != expected:
            raise JournalTampered(
                "sequence out of order", segment=name, offset=offset, seq=expected
            )
        tag = _chain.record_tag(key, journal_id, prev_tag, record.seq, record.body)
        if not _chain.tags_equal(tag, record.tag):
            raise JournalTampered("chain tag mismatch", segment=name, offset=offset, seq=expected)
        if record.seq > durable:
            break
        if record.seq > after and record.kind in RECEIPT_KINDS:
            out.append(Receipt(journal_id, record.seq, record.kind, record.t_ns, record.tag))
        prev_tag = record.tag
        expected += 1
        offset += record.size
    return out
