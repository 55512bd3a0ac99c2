"""Signed notes (C2SP ``signed-note``, Go's ``sumdb/note``): sign and open (sans-IO).

A signed note is a text ending in a newline, a blank line, and one or more signature lines::

    <text, UTF-8, no control characters but newline, ending in "\\n">
    <blank line>
    — <key name> <base64(4-byte big-endian key hash || Ed25519 signature)>

(``—`` is U+2014 EM DASH followed by a space.) The signature covers the text including its
final newline, not the blank line. Opening a note follows the specification: signatures
from unknown keys (name *and* hash not both matching) are ignored; a signature from the
expected key that fails to verify rejects the whole note; if no signature of the expected key
verifies, the note is rejected. This parser is stricter than Go's in one way: every base64
signature must be the canonical encoding, so a flipped padding bit is a different, refused
note, never the same one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from glove.journal._keys import (
    KEY_HASH_BYTES,
    SigningKey,
    VerifierKey,
    b64decode_canonical,
    b64encode,
    check_key_name,
)
from glove.journal.errors import NoteError, SignatureInvalid, SigningKeyError

SIGNATURE_PREFIX: Final = "\u2014 "
MAX_NOTE_BYTES: Final = 64 * 1024
"""Largest signed note accepted, in UTF-8 bytes (a checkpoint with a signature is ~200)."""
MAX_NOTE_SIGNATURES: Final = 100
"""Most signature lines accepted (C2SP: at least 16; Go's note.Open: 100)."""


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: key name, 32-bit key hash and the signature bytes after it."""

    name: str
    key_hash: int
    signature: bytes


@dataclass(frozen=True, slots=True)
class SignedNote:
    """A parsed (not yet verified) signed note."""

    text: str
    signatures: tuple[NoteSignature, ...]


def check_note_text(text: str) -> str:
    """Return ``text`` if it can be the text of a note.

    Raises:
        NoteError: empty, not ending in a newline, too large, or holding a control character
            other than newline (or a lone surrogate, which is not UTF-8).
    """
    if not text or not text.endswith("\n"):
        raise NoteError("a note text must be non-empty and end with a newline")
    _check_chars(text)
    return text


def _check_chars(text: str) -> None:
    if len(text) > MAX_NOTE_BYTES:
        raise NoteError(f"a signed note is at most {MAX_NOTE_BYTES} bytes")
    for char in text:
        code = ord(char)
        if (code < 0x20 and char != "\n") or 0xD800 <= code <= 0xDFFF:
            raise NoteError(f"a note may not hold the character {char!r}")
    if len(text.encode("utf-8")) > MAX_NOTE_BYTES:
        raise NoteError(f"a signed note is at most {MAX_NOTE_BYTES} bytes")


def sign_note(text: str, key: SigningKey) -> str:
    """Sign ``text`` with ``key``: the text, a blank line and one signature line.

    Raises:
        NoteError: ``text`` cannot be a note text (see :func:`check_note_text`).
    """
    check_note_text(text)
    signature = key.sign(text.encode("utf-8"))
    blob = key.key_hash.to_bytes(KEY_HASH_BYTES, "big") + signature
    return f"{text}\n{SIGNATURE_PREFIX}{key.name} {b64encode(blob)}\n"


def parse_note(data: str | bytes) -> SignedNote:
    """Split a signed note into its text and signature lines, checking only the format.

    Raises:
        NoteError: not UTF-8, too large, a control character, no signature block, or a
            malformed signature line.
    """
    if isinstance(data, bytes):
        if len(data) > MAX_NOTE_BYTES:
            raise NoteError(f"a signed note is at most {MAX_NOTE_BYTES} bytes")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError("a signed note must be UTF-8") from exc
    _check_chars(data)
    split = data.rfind("\n\n")
    if split < 0:
        raise NoteError("a signed note needs a blank line before its signatures")
    text, block = data[: split + 1], data[split + 2 :]
    if not block or not block.endswith("\n"):
        raise NoteError("a signed note must end with a signature line and a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_NOTE_SIGNATURES:
        raise NoteError(f"a signed note has at most {MAX_NOTE_SIGNATURES} signatures")
    return SignedNote(text, tuple(_parse_signature_line(line) for line in lines))


def _parse_signature_line(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_PREFIX):
        raise NoteError("a signature line must start with an em dash and a space")
    name, sep, blob_text = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not sep or not blob_text:
        raise NoteError("a signature line is '— NAME SIGNATURE'")
    try:
        check_key_name(name)
    except SigningKeyError as exc:
        raise NoteError(f"signature line: {exc}") from exc
    blob = b64decode_canonical(blob_text, "a note signature", NoteError)
    if len(blob) <= KEY_HASH_BYTES:
        raise NoteError("a note signature is a key hash and at least one byte")
    return NoteSignature(name, int.from_bytes(blob[:KEY_HASH_BYTES], "big"), blob[KEY_HASH_BYTES:])


def open_note(data: str | bytes, verifier: VerifierKey) -> str:
    """Verify a signed note against ``verifier`` and return its text.

    Raises:
        NoteError: the note is malformed.
        SignatureInvalid: no signature of ``verifier``'s key is present, or one fails.
    """
    note = parse_note(data)
    message = note.text.encode("utf-8")
    verified = False
    for sig in note.signatures:
        if sig.name != verifier.name or sig.key_hash != verifier.key_hash:
            continue  # an unknown key (a witness, a rotated key): ignored, as specified
        if not verifier.verify(message, sig.signature):
            raise SignatureInvalid(f"the signature of key {verifier.name} does not verify")
        verified = True
    if not verified:
        raise SignatureInvalid(f"the note carries no signature of key {verifier.name}")
    return note.text
