"""Ed25519 signing and verifier keys in the signed-note text formats (sans-IO).

The formats are those of C2SP ``signed-note`` and Go's ``golang.org/x/mod/sumdb/note``, so a
key Glove writes loads in Go's ``note.NewSigner`` / ``note.NewVerifier`` and back::

    verifier key   <name>+<key hash, 8 hex>+<base64(0x01 || 32-byte public key)>
    signer key     PRIVATE+KEY+<name>+<key hash, 8 hex>+<base64(0x01 || 32-byte seed)>
    key hash       first 4 bytes, big-endian, of SHA-256(name || 0x0A || 0x01 || public key)

A key name is non-empty UTF-8 with no Unicode space, no ``+`` and no control character; it is
also the origin line of the log's checkpoints (C2SP tlog-checkpoint: "the log's key name in its
signature line SHOULD match the origin line"). Parsing is strict: the base64 must be the
canonical encoding, the algorithm byte must be 0x01 (Ed25519) and the key hash must match.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from glove.journal.errors import SigningKeyError

ALG_ED25519: Final = 0x01
"""The signed-note signature type byte of Ed25519."""
KEY_HASH_BYTES: Final = 4
SEED_BYTES: Final = 32
PUBLIC_KEY_BYTES: Final = 32
SIGNATURE_BYTES: Final = 64
MAX_KEY_NAME_BYTES: Final = 256
"""Longest key name accepted, in UTF-8 bytes (names are short host/path identifiers)."""
MAX_KEY_TEXT_BYTES: Final = 1024
"""Longest encoded key (either form) accepted, in bytes."""
PRIVATE_PREFIX: Final = "PRIVATE+KEY+"
_HASH_RE: Final = re.compile(r"[0-9a-fA-F]{8}")


def check_key_name(name: str) -> str:
    """Return ``name`` if it is a valid signed-note key name.

    Raises:
        SigningKeyError: empty, too long, or holding a space, a ``+`` or a control character.
    """
    if not name:
        raise SigningKeyError("a key name must not be empty")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_KEY_NAME_BYTES:
        raise SigningKeyError(f"a key name is at most {MAX_KEY_NAME_BYTES} bytes")
    for char in name:
        if char == "+" or char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F:
            raise SigningKeyError(f"key name {name!r} holds {char!r}: no spaces, '+' or controls")
        if 0xD800 <= ord(char) <= 0xDFFF:
            raise SigningKeyError(f"key name {name!r} is not valid UTF-8")
    return name


def key_hash(name: str, public_key: bytes) -> int:
    """The 32-bit key hash (key ID) of an Ed25519 key: SHA-256(name ‖ 0x0A ‖ 0x01 ‖ key)[:4]."""
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ALG_ED25519]) + public_key).digest()
    return int.from_bytes(digest[:KEY_HASH_BYTES], "big")


def b64encode(data: bytes) -> str:
    """Standard base64 (RFC 4648 §4) with padding, as every format here uses."""
    return base64.b64encode(data).decode("ascii")


def b64decode_canonical(text: str, what: str, error: type[Exception]) -> bytes:
    """Decode standard base64, refusing anything but the canonical encoding of the result.

    Canonical means: only the base64 alphabet, correct padding, and zero unused bits, so one
    byte string has exactly one accepted text (a flipped padding bit is not the same text).

    Raises:
        error: the text is not canonical standard base64.
    """
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError) as exc:
        raise error(f"{what} is not base64") from exc
    if b64encode(raw) != text:
        raise error(f"{what} is not canonical base64")
    return raw


def _decode_key_data(data: str, expected: int) -> bytes:
    raw = b64decode_canonical(data, "key data", SigningKeyError)
    if len(raw) != 1 + expected:
        raise SigningKeyError(f"key data is {len(raw)} bytes, expected {1 + expected}")
    if raw[0] == 0x04:  # C2SP tlog-cosignature: a witness's key, not a log's
        raise SigningKeyError("key type 0x04 is a witness cosignature key: pass it as a witness")
    if raw[0] != ALG_ED25519:
        raise SigningKeyError(f"key algorithm {raw[0]:#04x} is not Ed25519 (0x01)")
    return raw[1:]


@dataclass(frozen=True, slots=True)
class VerifierKey:
    """A public Ed25519 note key: its name, 32-bit key hash and 32-byte public key."""

    name: str
    key_hash: int
    public_key: bytes

    @property
    def text(self) -> str:
        """The verifier key line: ``<name>+<hash>+<base64(0x01 || public key)>``."""
        data = b64encode(bytes([ALG_ED25519]) + self.public_key)
        return f"{self.name}+{self.key_hash:08x}+{data}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        if len(signature) != SIGNATURE_BYTES:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except InvalidSignature:
            return False
        return True


def verifier_key(name: str, public_key: bytes) -> VerifierKey:
    """The verifier key for an Ed25519 ``public_key`` under ``name``.

    Raises:
        SigningKeyError: a bad name or a public key that is not 32 bytes.
    """
    if len(public_key) != PUBLIC_KEY_BYTES:
        raise SigningKeyError(f"an Ed25519 public key is {PUBLIC_KEY_BYTES} bytes")
    return VerifierKey(check_key_name(name), key_hash(name, public_key), bytes(public_key))


def _split_key(text: str, parts: int) -> list[str]:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_KEY_TEXT_BYTES:
        raise SigningKeyError(f"an encoded key is at most {MAX_KEY_TEXT_BYTES} bytes")
    fields = text.split("+", parts - 1)  # the base64 key data may itself hold '+'
    if len(fields) != parts:
        raise SigningKeyError("malformed key: expected NAME+HASH+KEYDATA")
    return fields


def split_key_text(text: str) -> tuple[str, str, str]:
    """Split a public key line ``NAME+HASH+DATA``, checking the name and the 8 hex digits.

    Raises:
        SigningKeyError: too long, not three fields, a bad name or a malformed hash.
    """
    name, hash_text, data = _split_key(text, 3)
    check_key_name(name)
    if not _HASH_RE.fullmatch(hash_text):
        raise SigningKeyError("malformed key hash: expected 8 hex digits")
    return name, hash_text, data


def parse_verifier_key(text: str) -> VerifierKey:
    """Parse a verifier key line (surrounding whitespace is ignored).

    Raises:
        SigningKeyError: malformed, not Ed25519, or the key hash does not match.
    """
    text = text.strip()
    if text.startswith(PRIVATE_PREFIX):
        raise SigningKeyError("that is a private signing key, not a public verifier key")
    name, hash_text, data = split_key_text(text)
    public_key = _decode_key_data(data, PUBLIC_KEY_BYTES)
    try:
        Ed25519PublicKey.from_public_bytes(public_key)
    except ValueError as exc:
        raise SigningKeyError("not a valid Ed25519 public key") from exc
    if int(hash_text, 16) != key_hash(name, public_key):
        raise SigningKeyError("the key hash does not match the name and key")
    return VerifierKey(name, int(hash_text, 16), public_key)


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private Ed25519 note key. ``repr`` never shows the seed."""

    name: str
    seed: bytes = field(repr=False)
    _private: Ed25519PrivateKey = field(init=False, repr=False, compare=False)
    verifier: VerifierKey = field(init=False, compare=False)

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if len(self.seed) != SEED_BYTES:
            raise SigningKeyError(f"an Ed25519 seed is {SEED_BYTES} bytes")
        private = Ed25519PrivateKey.from_private_bytes(self.seed)
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        object.__setattr__(self, "_private", private)
        object.__setattr__(self, "verifier", verifier_key(self.name, public))

    @property
    def key_hash(self) -> int:
        """The key's 32-bit key hash."""
        return self.verifier.key_hash

    @property
    def text(self) -> str:
        """The signer key: ``PRIVATE+KEY+<name>+<hash>+<base64(0x01 || seed)>`` (secret)."""
        data = b64encode(bytes([ALG_ED25519]) + self.seed)
        return f"{PRIVATE_PREFIX}{self.name}+{self.key_hash:08x}+{data}"

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message`` (deterministic, RFC 8032)."""
        return self._private.sign(message)


def parse_signing_key(text: str) -> SigningKey:
    """Parse a signer key (``PRIVATE+KEY+...``; surrounding whitespace is ignored).

    Raises:
        SigningKeyError: malformed, not Ed25519, or its key hash does not match its key.
    """
    text = text.strip()
    if not text.startswith(PRIVATE_PREFIX):
        raise SigningKeyError("not a signing key: it does not start with PRIVATE+KEY+")
    name, hash_text, data = _split_key(text[len(PRIVATE_PREFIX) :], 3)
    check_key_name(name)
    if not _HASH_RE.fullmatch(hash_text):
        raise SigningKeyError("malformed key hash: expected 8 hex digits")
    key = SigningKey(name, _decode_key_data(data, SEED_BYTES))
    if int(hash_text, 16) != key.key_hash:
        raise SigningKeyError("the key hash does not match the name and key")
    return key
