"""Witness cosignatures of checkpoints (C2SP ``tlog-cosignature``, Ed25519 type 0x04; sans-IO).

A witness that has checked a checkpoint is consistent with every earlier one it saw adds its
own signature line to the note::

    — <witness name> base64(key ID(4) || timestamp(8, big-endian) || Ed25519 signature(64))

    key ID     SHA-256(name || 0x0A || 0x04 || 32-byte public key)[:4]
    message    "cosignature/v1\\n" "time <timestamp, decimal>\\n" <the whole note text>
    vkey       <name>+<key ID, 8 hex>+<base64(0x04 || 32-byte public key)>

The timestamp is POSIX seconds, at most 2**63 - 1. The message does not commit to the
witness's name, so one public key is one witness.

Where the lines go: a note Glove accepts has the log's signature first, then the
cosignatures sorted by key name (UTF-8 bytes) and key ID, each witness once;
:func:`add_cosignature` writes them so and :func:`glove.journal._note.verify_note` accepts only
that order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from glove.journal._keys import (
    KEY_HASH_BYTES,
    PRIVATE_PREFIX,
    PUBLIC_KEY_BYTES,
    SEED_BYTES,
    SIGNATURE_BYTES,
    b64decode_canonical,
    b64encode,
    check_key_name,
    split_key_text,
)
from glove.journal.errors import SigningKeyError

ALG_COSIGNATURE_V1: Final = 0x04
"""The signed-note signature type byte of Ed25519 tlog cosignatures."""
COSIGNATURE_HEADER: Final = "cosignature/v1\n"
TIMESTAMP_BYTES: Final = 8
COSIGNATURE_BYTES: Final = TIMESTAMP_BYTES + SIGNATURE_BYTES
"""A cosignature's bytes after the key ID: the timestamp and the Ed25519 signature."""
MAX_COSIGNATURE_TIME: Final = 2**63 - 1
"""Latest timestamp a cosignature may carry (C2SP: it MUST NOT exceed 2^63 - 1)."""


def witness_key_id(name: str, public_key: bytes) -> int:
    """The 32-bit key ID of a witness: SHA-256(name ‖ 0x0A ‖ 0x04 ‖ key)[:4]."""
    data = name.encode() + b"\n" + bytes([ALG_COSIGNATURE_V1]) + public_key
    return int.from_bytes(hashlib.sha256(data).digest()[:KEY_HASH_BYTES], "big")


def cosignature_message(text: str, timestamp: int) -> bytes:
    """What a witness signs for note text ``text`` at ``timestamp``.

    Raises:
        SigningKeyError: the timestamp is negative or over :data:`MAX_COSIGNATURE_TIME`.
    """
    if not 0 <= timestamp <= MAX_COSIGNATURE_TIME:
        raise SigningKeyError(f"a cosignature time is from 0 to {MAX_COSIGNATURE_TIME}")
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{text}".encode()


@dataclass(frozen=True, slots=True)
class WitnessKey:
    """A witness's public key: its name, 32-bit key ID and 32-byte Ed25519 public key."""

    name: str
    key_hash: int
    public_key: bytes

    @property
    def text(self) -> str:
        """The witness's vkey: ``<name>+<key ID>+<base64(0x04 || public key)>``."""
        data = b64encode(bytes([ALG_COSIGNATURE_V1]) + self.public_key)
        return f"{self.name}+{self.key_hash:08x}+{data}"

    def open(self, text: str, blob: bytes) -> int | None:
        """The timestamp of ``blob`` (a signature line's bytes after the key ID) if it is
        this witness's cosignature of note text ``text``, else None."""
        if len(blob) != COSIGNATURE_BYTES:
            return None
        timestamp = int.from_bytes(blob[:TIMESTAMP_BYTES], "big")
        if timestamp > MAX_COSIGNATURE_TIME:
            return None
        message = cosignature_message(text, timestamp)
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(
                blob[TIMESTAMP_BYTES:], message
            )
        except InvalidSignature:
            return None
        return timestamp


@dataclass(frozen=True, slots=True)
class Cosignature:
    """A verified cosignature: which witness, and the time it says it signed at."""

    witness: WitnessKey
    timestamp: int


def witness_key(name: str, public_key: bytes) -> WitnessKey:
    """The witness key for an Ed25519 ``public_key`` under ``name``.

    Raises:
        SigningKeyError: a bad name, or a public key that is not 32 valid bytes.
    """
    if len(public_key) != PUBLIC_KEY_BYTES:
        raise SigningKeyError(f"an Ed25519 public key is {PUBLIC_KEY_BYTES} bytes")
    try:
        Ed25519PublicKey.from_public_bytes(public_key)
    except ValueError as exc:
        raise SigningKeyError("not a valid Ed25519 public key") from exc
    check_key_name(name)
    return WitnessKey(name, witness_key_id(name, public_key), bytes(public_key))


def parse_witness_key(text: str) -> WitnessKey:
    """Parse a witness vkey (type 0x04; surrounding whitespace is ignored).

    Raises:
        SigningKeyError: malformed, not a cosignature key (a log's 0x01 key included), or the
            key ID does not match the name and key.
    """
    text = text.strip()
    if text.startswith(PRIVATE_PREFIX):
        raise SigningKeyError("that is a private key, not a witness's public key")
    name, hash_text, data = split_key_text(text)
    raw = b64decode_canonical(data, "key data", SigningKeyError)
    if len(raw) != 1 + PUBLIC_KEY_BYTES:
        raise SigningKeyError(f"key data is {len(raw)} bytes, expected {1 + PUBLIC_KEY_BYTES}")
    if raw[0] != ALG_COSIGNATURE_V1:
        raise SigningKeyError(
            f"key type {raw[0]:#04x} is not a witness cosignature key (0x04); "
            "a log's key (0x01) goes to --public-key"
        )
    key = witness_key(name, raw[1:])
    if int(hash_text, 16) != key.key_hash:
        raise SigningKeyError("the key ID does not match the name and key")
    return key


@dataclass(frozen=True, slots=True)
class WitnessSigningKey:
    """A witness's private Ed25519 key (what a witness, or a test, cosigns with)."""

    name: str
    seed: bytes = field(repr=False)
    _private: Ed25519PrivateKey = field(init=False, repr=False, compare=False)
    witness: WitnessKey = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.seed) != SEED_BYTES:
            raise SigningKeyError(f"an Ed25519 seed is {SEED_BYTES} bytes")
        private = Ed25519PrivateKey.from_private_bytes(self.seed)
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        object.__setattr__(self, "_private", private)
        object.__setattr__(self, "witness", witness_key(self.name, public))

    def cosign(self, text: str, timestamp: int) -> bytes:
        """The signature line's bytes (key ID, timestamp, signature) for note text ``text``.

        Raises:
            SigningKeyError: the timestamp is out of range.
        """
        signature = self._private.sign(cosignature_message(text, timestamp))
        return (
            self.witness.key_hash.to_bytes(KEY_HASH_BYTES, "big")
            + timestamp.to_bytes(TIMESTAMP_BYTES, "big")
            + signature
        )
