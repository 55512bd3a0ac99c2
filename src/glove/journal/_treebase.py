"""The tree base: what the Merkle tree keeps of the segments a receipts journal deletes.

A receipts journal deletes its oldest segment once every receipt in it is acknowledged (see
:mod:`glove.journal._limits`). Its records stay leaves of the Merkle tree, so before the
writer unlinks a segment it folds that segment's entries into the **tree base** and writes it
durably (temp file, fsync, rename, fsync dir)::

    PATH/tree-base   "GLVT" | u16 version 1 | u16 0 | u64 size | u32 count
                     | count hashes of 32 bytes
                     | HMAC-SHA256(K, "glove/tree-base/v1" ‖ journal id ‖ everything before)

``size`` is the number of leaves deleted (the first retained record is ``size + 1``) and the
hashes are the compact range of those leaves: one perfect-subtree hash per set bit of ``size``,
biggest first. That is all a proof about a retained leaf, or a tree head of a size at least
``size``, ever needs of the deleted part, so the tree recovers from the tree base plus the
retained segments. A tree base that does not continue exactly where the segment begins is
refused (:class:`LogMismatch`) and the segment is not deleted.
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from glove.journal._merkle import HASH_BYTES, CompactRange, leaf_hash
from glove.journal._recovery import scan_segment
from glove.journal._storage import Storage
from glove.journal.errors import LogMismatch

BASE_NAME: Final = "tree-base"
BASE_VERSION: Final = 1
MAX_BASE_NODES: Final = 64
_MAGIC: Final = b"GLVT"
_HEAD: Final = struct.Struct("<4sHHQI")
_DOMAIN: Final = b"glove/tree-base/v1"
_TAG_BYTES: Final = 32


@dataclass(frozen=True, slots=True)
class TreeBase:
    """The compact range of the ``size`` deleted leaves."""

    size: int
    nodes: tuple[bytes, ...]

    def compact_range(self) -> CompactRange:
        """A mutable compact range starting from this base."""
        return CompactRange(self.size, self.nodes)


EMPTY_BASE: Final = TreeBase(0, ())


def _tag(key: bytes, journal_id: bytes, body: bytes) -> bytes:
    return hmac.digest(key, _DOMAIN + journal_id + body, "sha256")


def encode_base(key: bytes, journal_id: bytes, base: TreeBase) -> bytes:
    """The tree base file's bytes, authenticated with the journal's key."""
    body = _HEAD.pack(_MAGIC, BASE_VERSION, 0, base.size, len(base.nodes)) + b"".join(base.nodes)
    return body + _tag(key, journal_id, body)


def decode_base(data: bytes, key: bytes | None, journal_id: bytes) -> TreeBase:
    """Decode a tree base file; with ``key``, check its tag too.

    Raises:
        LogMismatch: wrong size, magic, version, node count or tag.
    """
    if len(data) < _HEAD.size + _TAG_BYTES:
        raise LogMismatch("the tree base file is truncated")
    magic, version, reserved, size, count = _HEAD.unpack_from(data)
    if magic != _MAGIC or version != BASE_VERSION or reserved != 0:
        raise LogMismatch("the tree base file is not a version 1 tree base")
    if count != size.bit_count() or count > MAX_BASE_NODES:
        raise LogMismatch("the tree base file has the wrong number of hashes")
    if len(data) != _HEAD.size + count * HASH_BYTES + _TAG_BYTES:
        raise LogMismatch("the tree base file has the wrong length")
    body, tag = data[:-_TAG_BYTES], data[-_TAG_BYTES:]
    if key is not None and not hmac.compare_digest(tag, _tag(key, journal_id, body)):
        raise LogMismatch("the tree base file's tag does not match (forged or foreign)")
    nodes = tuple(
        data[_HEAD.size + i * HASH_BYTES : _HEAD.size + (i + 1) * HASH_BYTES] for i in range(count)
    )
    return TreeBase(size, nodes)


def read_base(storage: Storage, path: str, key: bytes | None, journal_id: bytes) -> TreeBase:
    """The journal's tree base, or the empty base if no segment was ever deleted.

    Raises:
        LogMismatch: the file is damaged or forged.
        OSError: it cannot be read.
    """
    base_path = str(Path(path) / BASE_NAME)
    if not storage.exists(base_path):
        return EMPTY_BASE
    return decode_base(storage.read_file(base_path), key, journal_id)


def extend_base(
    storage: Storage,
    path: str,
    key: bytes,
    journal_id: bytes,
    *,
    segment: str,
    first_seq: int,
    last_seq: int,
) -> TreeBase:
    """Fold the entries of ``segment`` (about to be deleted) into the tree base, durably.

    Idempotent: a base that already ends at ``last_seq`` (the writer died after writing it
    and before the unlink) is left as it is.

    Raises:
        LogMismatch: the base does not end where the segment begins (or ends), or the
            segment's records do not continue it.
        JournalCorrupt, JournalTampered: the segment does not scan.
        OSError: a file operation failed.
    """
    base = read_base(storage, path, key, journal_id)
    if base.size == last_seq:
        return base
    if base.size != first_seq - 1:
        raise LogMismatch(
            f"the tree base covers {base.size} leaves but segment {segment} starts at "
            f"record {first_seq}: refusing to delete it"
        )
    data = storage.read_file(str(Path(path) / segment))
    scan = scan_segment(data, key, name=segment, keep_records=True)
    if scan.tail is not None or not scan.sealed:
        raise LogMismatch(f"segment {segment} is not a complete sealed segment")
    tree = base.compact_range()
    for record in scan.records:
        if record.seq != tree.size + 1:
            raise LogMismatch(f"segment {segment} does not continue the tree base")
        tree.append(leaf_hash(record.payload))
    if tree.size != last_seq:
        raise LogMismatch(f"segment {segment} ends at {tree.size}, the writer says {last_seq}")
    extended = TreeBase(tree.size, tuple(tree.nodes))
    storage.write_file_durably(str(Path(path) / BASE_NAME), encode_base(key, journal_id, extended))
    return extended
