"""The HMAC-SHA256 chain over records (sans-IO).

::

    genesis = HMAC(K, "glove/genesis/v1" ‖ journal_id)
    tag_i   = HMAC(K, domain(kind_i) ‖ journal_id ‖ tag_{i-1} ‖ u64 seq_i ‖ SHA-256(body_i))
    header  = HMAC(K, "glove/header/v1" ‖ header bytes 0..80, state and crc zeroed)

Because every tag folds in the previous one, the sequence number and the journal id, a
record cannot be reordered, replayed, dropped or spliced in from another journal without the
next tag failing. Receipt and refinement records share one sequence and one chain head but use
distinct domains, so a tag minted for one kind never verifies as the other (the spec's
"distinct receipt and envelope domains"). The key never leaves this module's callers.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from glove.journal._codec import RecordKind, SegmentHeader

KEY_MIN_BYTES = 32
"""Shortest accepted HMAC key: 256 bits."""

_GENESIS_DOMAIN = b"glove/genesis/v1"
_HEADER_DOMAIN = b"glove/header/v1"
_ACK_DOMAIN = b"glove/ack/v1"
_DOMAINS: dict[int, bytes] = {
    RecordKind.DATA: b"glove/rec/v1",
    RecordKind.RECEIPT: b"glove/receipt/v1",
    RecordKind.REFINEMENT: b"glove/refinement/v1",
    RecordKind.SEAL: b"glove/seal/v1",
}
_U64 = struct.Struct("<Q")


def check_key(key: bytes) -> bytes:
    """Return ``key`` if it is long enough to be an HMAC-SHA256 key.

    Raises:
        ValueError: the key is shorter than KEY_MIN_BYTES.
    """
    if len(key) < KEY_MIN_BYTES:
        raise ValueError(f"journal key must be at least {KEY_MIN_BYTES} bytes, got {len(key)}")
    return key


def domain_for(kind: int) -> bytes:
    """The HMAC domain string of a record kind.

    Raises:
        ValueError: an unknown record kind.
    """
    # An IntEnum hashes as its int: the plain kind finds its domain without building the
    # enum member first (this runs for every record appended and verified).
    domain = _DOMAINS.get(kind)
    if domain is None:
        raise ValueError(f"unknown record kind {kind}")
    return domain


def genesis_tag(key: bytes, journal_id: bytes) -> bytes:
    """The chain tag before a journal's first record."""
    return hmac.digest(key, _GENESIS_DOMAIN + journal_id, "sha256")


def record_tag(key: bytes, journal_id: bytes, prev_tag: bytes, seq: int, body: bytes) -> bytes:
    """The chain tag of a record whose encoded body (which holds its kind) is ``body``.

    Raises:
        ValueError: the body names an unknown record kind.
    """
    kind = body[16] if len(body) > 16 else 0
    digest = hashlib.sha256(body).digest()
    message = domain_for(kind) + journal_id + prev_tag + _U64.pack(seq) + digest
    return hmac.digest(key, message, "sha256")


def header_tag(key: bytes, header: SegmentHeader) -> bytes:
    """The tag that authenticates a segment header's immutable fields."""
    return hmac.digest(key, _HEADER_DOMAIN + header.signed_bytes(), "sha256")


def ack_tag(key: bytes, journal_id: bytes, seq: int, record_tag_: bytes) -> bytes:
    """The tag that authenticates a persisted acknowledgement cursor."""
    return hmac.digest(key, _ACK_DOMAIN + journal_id + _U64.pack(seq) + record_tag_, "sha256")


def tags_equal(a: bytes, b: bytes) -> bool:
    """Compare two tags in constant time."""
    return hmac.compare_digest(a, b)
