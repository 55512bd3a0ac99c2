"""Signed notes (C2SP ``signed-note``, Go's ``sumdb/note``): sign, parse and verify (sans-IO).

A signed note is a text ending in a newline, a blank line, and one or more signature lines::

    <text, UTF-8, no control characters but newline, ending in "\\n">
    <blank line>
    — <key name> <base64(4-byte big-endian key hash || signature)>
    ...

(``—`` is U+2014 EM DASH followed by a space.) The signature covers the text including its
final newline, not the blank line; the last blank line separates text and signatures.

Opening a note here is **exact**, stricter than the specification (which says to ignore
signatures from unknown keys): the caller names every key it trusts, the log's
:class:`VerifierKey` and any witnesses' :class:`WitnessKey` (C2SP ``tlog-cosignature``), and a
note is accepted only when its signature lines are exactly one verifying signature of each of
those keys, the log's first and the witnesses' after it sorted by key name (UTF-8 bytes) then
key hash. Any other line (an unknown key, a duplicate, a key of the same name with another
hash, a missing witness), any other order, and any byte outside the canonical encoding (a
non-canonical base64 text, a second space, a CR, a lookalike dash, a missing or extra final
newline) is refused with its reason, so a note verifies only as it was signed: nobody can make
a note look co-signed by a key that never signed it.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from glove.journal._witness import Cosignature, WitnessKey, WitnessSigningKey
from glove.journal.errors import (
    NoteError,
    SignatureInvalid,
    SigningKeyError,
    UnverifiedSignature,
)

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
    note = SignedNote(text, tuple(_parse_signature_line(line) for line in lines))
    if encode_note(note) != data:  # each rule above should already make this impossible
        raise NoteError("the signed note is not in canonical form")
    return note


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


def encode_note(note: SignedNote) -> str:
    """The canonical text of ``note``: its text, a blank line, one line per signature."""
    lines = []
    for sig in note.signatures:
        blob = sig.key_hash.to_bytes(KEY_HASH_BYTES, "big") + sig.signature
        lines.append(f"{SIGNATURE_PREFIX}{sig.name} {b64encode(blob)}\n")
    return f"{note.text}\n{''.join(lines)}"


@dataclass(frozen=True, slots=True)
class OpenedNote:
    """A note whose every signature line verified: its text and the witnesses' cosignatures
    (in the note's order)."""

    text: str
    cosignatures: tuple[Cosignature, ...] = ()


def _signature_order(name: str, key_hash: int) -> tuple[bytes, int]:
    return name.encode("utf-8"), key_hash


def _check_keys(verifier: VerifierKey, witnesses: Sequence[WitnessKey]) -> None:
    seen = {(verifier.name, verifier.key_hash)}
    for witness in witnesses:
        ident = (witness.name, witness.key_hash)
        if ident in seen:
            raise SigningKeyError(
                f"two keys given share the name {witness.name!r} and key hash "
                f"{witness.key_hash:08x}: a note's lines could not be told apart"
            )
        seen.add(ident)


def _line_name(index: int, sig: NoteSignature) -> str:
    return f"signature line {index + 1} ({sig.name} {sig.key_hash:08x})"


def verify_note(
    data: str | bytes, verifier: VerifierKey, *, witnesses: Sequence[WitnessKey] = ()
) -> OpenedNote:
    """Verify a signed note exactly: its signature lines must be one verifying signature of
    ``verifier`` (first) and one verifying cosignature of each of ``witnesses`` (after it,
    sorted by key name then key hash), and nothing else.

    Raises:
        NoteError: the note is malformed or not canonical, a key's line is repeated, or the
            lines are out of order.
        UnverifiedSignature: a line is not by any key given (an unknown key or witness, a key
            of the same name with another hash).
        SignatureInvalid: a given key's line fails to verify, or a given key has no line.
        SigningKeyError: two of the keys given share a name and key hash.
    """
    _check_keys(verifier, witnesses)
    note = parse_note(data)
    message = note.text.encode("utf-8")
    by_ident: dict[tuple[str, int], VerifierKey | WitnessKey] = {
        (verifier.name, verifier.key_hash): verifier
    }
    by_ident.update({(w.name, w.key_hash): w for w in witnesses})
    if all(
        (sig.name, sig.key_hash) != (verifier.name, verifier.key_hash) for sig in note.signatures
    ):
        found = ", ".join(f"{sig.name} {sig.key_hash:08x}" for sig in note.signatures[:3])
        raise SignatureInvalid(
            f"the note carries no signature of key {verifier.name} {verifier.key_hash:08x} "
            f"(its signature lines are by {found}): is this the log's public key?"
        )
    seen: set[tuple[str, int]] = set()
    cosignatures: list[Cosignature] = []
    for index, sig in enumerate(note.signatures):
        ident = (sig.name, sig.key_hash)
        key = by_ident.get(ident)
        if key is None:
            raise UnverifiedSignature(
                f"{_line_name(index, sig)} is not by the log's key or a witness given; "
                "a note verifies only with exactly the signatures it was exported with"
            )
        if ident in seen:
            raise NoteError(f"{_line_name(index, sig)} repeats a signature of the same key")
        seen.add(ident)
        if isinstance(key, VerifierKey):
            if not key.verify(message, sig.signature):
                raise SignatureInvalid(f"the signature of key {key.name} does not verify")
        else:
            timestamp = key.open(note.text, sig.signature)
            if timestamp is None:
                raise SignatureInvalid(f"the cosignature of witness {key.name} does not verify")
            cosignatures.append(Cosignature(key, timestamp))
    for witness in witnesses:
        if (witness.name, witness.key_hash) not in seen:
            raise SignatureInvalid(f"the note carries no cosignature of witness {witness.name}")
    first = note.signatures[0]
    if (first.name, first.key_hash) != (verifier.name, verifier.key_hash):
        raise NoteError("the log's signature must be the note's first signature line")
    rest = [_signature_order(sig.name, sig.key_hash) for sig in note.signatures[1:]]
    if rest != sorted(rest):
        raise NoteError("the witnesses' cosignatures are not sorted by key name and key hash")
    return OpenedNote(note.text, tuple(cosignatures))


def open_note(data: str | bytes, verifier: VerifierKey) -> str:
    """Verify a note signed by ``verifier`` alone (exactly: see :func:`verify_note`) and
    return its text.

    Raises:
        NoteError: the note is malformed or not canonical, or a line is repeated.
        UnverifiedSignature: a line is not ``verifier``'s (a witness or any other key).
        SignatureInvalid: ``verifier``'s signature is absent or fails.
    """
    return verify_note(data, verifier).text


def add_cosignature(data: str | bytes, key: WitnessSigningKey, timestamp: int) -> str:
    """Cosign a note as witness ``key`` at ``timestamp`` (POSIX seconds): the note with the
    witness's line inserted where :func:`verify_note` wants it.

    Only the format is checked: a witness must verify the log's signature (and the
    checkpoint's consistency with what it saw) before it cosigns.

    Raises:
        NoteError: the note is malformed, or this witness has already cosigned it.
        SigningKeyError: the timestamp is out of range.
    """
    note = parse_note(data)
    ident = (key.witness.name, key.witness.key_hash)
    if any((sig.name, sig.key_hash) == ident for sig in note.signatures):
        raise NoteError(f"witness {key.name} has already cosigned this note")
    blob = key.cosign(note.text, timestamp)
    line = NoteSignature(key.witness.name, key.witness.key_hash, blob[KEY_HASH_BYTES:])
    first, *rest = note.signatures
    rest.append(line)
    rest.sort(key=lambda sig: _signature_order(sig.name, sig.key_hash))
    return encode_note(SignedNote(note.text, (first, *rest)))
