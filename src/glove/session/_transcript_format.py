"""The transcript's on-disk format and its digest (pure: bytes in, values out).

A PTY session's transcript is every byte the agent's terminal produced, in order, each at a
stable **offset** (its position since the session began). It is kept in two files of the
session's directory (decision 0029)::

    transcript.ring   CAPACITY bytes: the byte at offset o lives at o mod CAPACITY, so the
                      newest CAPACITY bytes are kept and older ones are overwritten (evicted)
    transcript.meta   two 512-byte slots, written alternately; the valid slot with the
                      higher sequence number is the truth (a torn write spoils one slot only)

A meta record says how far the ring is **durable**: ``end`` (every byte below it was
fdatasync'ed before the record was written), the digest chain at ``end``, the capacity and
the *window* (the most the writer may write past the last durable ``end`` before the next
record is durable: it pauses the agent's output rather than exceed it). After a crash the
bytes ``[end + window - capacity, end)`` are intact, since what was written after the
record can only have overwritten older ones; a record written at a clean close (``closed``)
vouches for ``[end - capacity, end)``.

The **digest** commits to every byte of the transcript, evicted ones included, and can be
recomputed from the durable state alone (hashlib cannot save a SHA-256 midway)::

    chain_0 = 32 zero bytes
    chain_i = SHA-256(chain_(i-1) || SHA-256(block_i))     block_i: bytes [(i-1)B, iB), B = 64 KiB
    digest  = SHA-256(chain_k || SHA-256(tail) || uint64_be(n))   tail: bytes [kB, n), k = n // B
"""

from __future__ import annotations

import hashlib
import struct
from typing import Final, NamedTuple

from glove.config import MAX_RING_BYTES, MIN_RING_BYTES
from glove.session.errors import TranscriptCorrupt

#: The digest's block: fixed, so anyone holding the bytes can recompute it.
TRANSCRIPT_BLOCK_BYTES: Final = 64 * 1024
#: Ring sizes gloved.toml may choose (``[terminal] transcript_bytes``): MIN_RING_BYTES and
#: MAX_RING_BYTES, :mod:`glove.config`'s, which checks them when it loads gloved.toml.
#: The most written past the last durable end: a quarter of the ring, at most 4 MiB.
MAX_WINDOW_BYTES: Final = 4 * 1024 * 1024
META_SLOT_BYTES: Final = 512
META_FILE_BYTES: Final = 2 * META_SLOT_BYTES
TRANSCRIPT_FORMAT: Final = "glove-transcript/v1"
RING_FILE: Final = "transcript.ring"
META_FILE: Final = "transcript.meta"

_MAGIC: Final = b"GLVTRNS1"
_VERSION: Final = 1
_FLAG_CLOSED: Final = 1
#: magic, version, flags, seq, capacity, window, block, end, blocks, chain
_BODY: Final = struct.Struct(">8sHHQQQIQQ32s")
_CHECK_BYTES: Final = 32
_ZERO_CHAIN: Final = bytes(32)


def window_for(capacity: int) -> int:
    """The writer's window for a ring of ``capacity`` bytes."""
    return min(capacity // 4, MAX_WINDOW_BYTES)


class Meta(NamedTuple):
    """One meta record: how far the ring is durable, and the digest chain there."""

    seq: int
    capacity: int
    window: int
    end: int
    blocks: int
    chain: bytes
    closed: bool

    @property
    def start(self) -> int:
        """The first offset the ring still holds intact, as this record vouches."""
        lost = self.capacity if self.closed else self.capacity - self.window
        return max(0, self.end - lost)

    @property
    def tail_start(self) -> int:
        """Where the last, partial digest block starts."""
        return self.blocks * TRANSCRIPT_BLOCK_BYTES


def encode_meta(meta: Meta) -> bytes:
    """The record as one slot: body, SHA-256 of the body, zero padding."""
    body = _BODY.pack(
        _MAGIC,
        _VERSION,
        _FLAG_CLOSED if meta.closed else 0,
        meta.seq,
        meta.capacity,
        meta.window,
        TRANSCRIPT_BLOCK_BYTES,
        meta.end,
        meta.blocks,
        meta.chain,
    )
    slot = body + hashlib.sha256(body).digest()
    return slot + bytes(META_SLOT_BYTES - len(slot))


def decode_meta(slot: bytes) -> Meta:
    """One slot back into a record.

    Raises:
        TranscriptCorrupt: the slot is torn, not a meta record, or inconsistent.
    """
    size = _BODY.size
    if len(slot) != META_SLOT_BYTES:
        raise TranscriptCorrupt(f"a meta slot is {META_SLOT_BYTES} bytes, not {len(slot)}")
    body, check = slot[:size], slot[size : size + _CHECK_BYTES]
    if hashlib.sha256(body).digest() != check:
        raise TranscriptCorrupt("a meta slot's checksum does not match (torn or altered)")
    magic, version, flags, seq, capacity, window, block, end, blocks, chain = _BODY.unpack(body)
    if magic != _MAGIC or version != _VERSION or flags & ~_FLAG_CLOSED:
        raise TranscriptCorrupt("not a glove transcript meta record of version 1")
    if block != TRANSCRIPT_BLOCK_BYTES:
        raise TranscriptCorrupt(f"digest block {block} is not {TRANSCRIPT_BLOCK_BYTES}")
    if not MIN_RING_BYTES <= capacity <= MAX_RING_BYTES or window != window_for(capacity):
        raise TranscriptCorrupt(f"ring capacity {capacity} / window {window} is out of bounds")
    if not blocks * TRANSCRIPT_BLOCK_BYTES <= end < (blocks + 1) * TRANSCRIPT_BLOCK_BYTES:
        raise TranscriptCorrupt(f"{blocks} digest blocks do not fit an end of {end}")
    if seq < 1:
        raise TranscriptCorrupt("a meta record's sequence starts at 1")
    return Meta(seq, capacity, window, end, blocks, chain, bool(flags & _FLAG_CLOSED))


def pick_meta(data: bytes) -> Meta:
    """The meta file's truth: the valid slot with the higher sequence number.

    Raises:
        TranscriptCorrupt: the file has the wrong size, or neither slot is valid.
    """
    if len(data) != META_FILE_BYTES:
        raise TranscriptCorrupt(f"the meta file is {len(data)} bytes, not {META_FILE_BYTES}")
    found: list[Meta] = []
    reasons: list[str] = []
    for index in range(2):
        slot = data[index * META_SLOT_BYTES : (index + 1) * META_SLOT_BYTES]
        if not any(slot):
            continue  # never written
        try:
            meta = decode_meta(slot)
        except TranscriptCorrupt as exc:
            reasons.append(str(exc))
            continue
        if meta.seq % 2 != index:
            reasons.append(f"record {meta.seq} is in slot {index}")
            continue
        found.append(meta)
    if not found:
        raise TranscriptCorrupt("no valid meta record: " + ("; ".join(reasons) or "empty"))
    if len(found) == 2 and found[0].capacity != found[1].capacity:
        raise TranscriptCorrupt("the two meta records disagree about the ring's capacity")
    return max(found, key=lambda m: m.seq)


def slot_offset(seq: int) -> int:
    """Where record ``seq`` is written in the meta file."""
    return (seq % 2) * META_SLOT_BYTES


def ring_segments(offset: int, length: int, capacity: int) -> list[tuple[int, int]]:
    """``(position, length)`` in the ring file of bytes ``[offset, offset + length)``: one
    segment, or two when they wrap. ``length`` must not exceed ``capacity``."""
    if length <= 0:
        return []
    if length > capacity:
        raise ValueError(f"{length} bytes do not fit a ring of {capacity}")
    position = offset % capacity
    first = min(length, capacity - position)
    if first == length:
        return [(position, length)]
    return [(position, first), (0, length - first)]


def final_digest(chain: bytes, tail: bytes, total: int) -> str:
    """The digest from the chain at the last full block, the partial tail and the count."""
    inner = hashlib.sha256(tail).digest()
    return "sha256:" + hashlib.sha256(chain + inner + total.to_bytes(8, "big")).hexdigest()


def digest_of(data: bytes) -> str:
    """The digest of a whole transcript held in memory (what a third party computes)."""
    chain = DigestChain()
    chain.update(data)
    return chain.digest()


class DigestChain:
    """The digest computed as bytes arrive (see the module docstring)."""

    def __init__(self, blocks: int = 0, chain: bytes = _ZERO_CHAIN) -> None:
        self.blocks = blocks
        self.chain = chain
        self._block = hashlib.sha256()
        self._fill = 0

    @property
    def total(self) -> int:
        """Bytes digested so far."""
        return self.blocks * TRANSCRIPT_BLOCK_BYTES + self._fill

    def update(self, data: bytes | memoryview) -> None:
        """Digest the next bytes."""
        view = memoryview(data)
        while view:
            take = min(len(view), TRANSCRIPT_BLOCK_BYTES - self._fill)
            self._block.update(view[:take])
            self._fill += take
            view = view[take:]
            if self._fill == TRANSCRIPT_BLOCK_BYTES:
                self.chain = hashlib.sha256(self.chain + self._block.digest()).digest()
                self.blocks += 1
                self._block = hashlib.sha256()
                self._fill = 0

    def digest(self) -> str:
        """The digest of everything so far."""
        inner = self._block.digest()
        total = self.total.to_bytes(8, "big")
        return "sha256:" + hashlib.sha256(self.chain + inner + total).hexdigest()
