"""Checkpoints in the C2SP ``tlog-checkpoint`` format: a signed tree head (sans-IO).

A checkpoint is a signed note whose text is::

    <origin>                 the log's identity; Glove uses the signing key's name
    <tree size>              ASCII decimal, no leading zeros ("0" for the empty tree)
    <base64 root hash>       the RFC 6962 / RFC 9162 Merkle tree hash at that size
    [extension lines]        optional, non-empty, opaque (Glove writes none)

followed by the blank line and the signature lines of :mod:`glove.journal._note`: exactly the
log's signature, then one cosignature per witness the verifier names, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from glove.journal._keys import SigningKey, VerifierKey, b64decode_canonical, b64encode
from glove.journal._merkle import HASH_BYTES
from glove.journal._note import check_note_text, sign_note, verify_note
from glove.journal._witness import Cosignature, WitnessKey
from glove.journal.errors import NoteError

MAX_TREE_SIZE: Final = 2**63 - 1
"""Largest tree size accepted (a signed 64-bit integer, as Go's tlog and CT use)."""
MAX_EXTENSION_LINES: Final = 16


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tree head: the log's origin, its size (leaves) and its root hash."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The checkpoint's note text (what is signed)."""
        lines = [self.origin, str(self.size), b64encode(self.root), *self.extensions]
        return "".join(f"{line}\n" for line in lines)


@dataclass(frozen=True, slots=True)
class SignedCheckpoint:
    """A checkpoint and the signed note that carries it, with the witnesses' cosignatures
    that were verified (none unless witnesses were named)."""

    checkpoint: Checkpoint
    note: str
    cosignatures: tuple[Cosignature, ...] = ()

    @property
    def size(self) -> int:
        """The tree size the checkpoint covers."""
        return self.checkpoint.size

    @property
    def root(self) -> bytes:
        """The root hash at that size."""
        return self.checkpoint.root


def parse_checkpoint_text(text: str) -> Checkpoint:
    """Parse a checkpoint's note text.

    Raises:
        NoteError: fewer than three lines, an empty line, an empty origin, a size that is not
            canonical decimal or is out of range, or a root that is not base64 of 32 bytes.
    """
    check_note_text(text)
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise NoteError("a checkpoint has an origin, a tree size and a root hash line")
    if len(lines) > 3 + MAX_EXTENSION_LINES:
        raise NoteError(f"a checkpoint has at most {MAX_EXTENSION_LINES} extension lines")
    if any(not line for line in lines):
        raise NoteError("checkpoint lines must not be empty")
    origin, size_text, root_text, *extensions = lines
    if (
        len(size_text) > len(str(MAX_TREE_SIZE))
        or not size_text.isascii()
        or not size_text.isdigit()
        or str(int(size_text)) != size_text
    ):
        raise NoteError(f"checkpoint tree size {size_text!r} is not canonical decimal")
    size = int(size_text)
    if size > MAX_TREE_SIZE:
        raise NoteError(f"checkpoint tree size {size} is out of range")
    root = b64decode_canonical(root_text, "the checkpoint root hash", NoteError)
    if len(root) != HASH_BYTES:
        raise NoteError(f"the checkpoint root hash is {len(root)} bytes, not {HASH_BYTES}")
    return Checkpoint(origin, size, root, tuple(extensions))


def sign_checkpoint(checkpoint: Checkpoint, key: SigningKey) -> SignedCheckpoint:
    """Sign ``checkpoint`` with ``key`` (whose name should be the origin).

    Raises:
        NoteError: the checkpoint cannot be encoded (it would not parse back).
    """
    parsed = parse_checkpoint_text(checkpoint.text)
    if parsed != checkpoint:
        raise NoteError("the checkpoint does not encode to itself")
    return SignedCheckpoint(checkpoint, sign_note(checkpoint.text, key))


def open_checkpoint(
    data: str | bytes,
    verifier: VerifierKey,
    *,
    origin: str | None = None,
    witnesses: Sequence[WitnessKey] = (),
) -> SignedCheckpoint:
    """Verify a signed checkpoint against ``verifier`` (and ``witnesses``) and parse it.

    ``origin`` defaults to the verifier's key name: a checkpoint of another log, even one
    signed by the same key, is refused. The note must carry exactly the log's signature and
    one cosignature of each witness named (see :func:`glove.journal._note.verify_note`).

    Raises:
        NoteError: the note or the checkpoint text is malformed, or the origin differs.
        UnverifiedSignature: a signature line is by no key given.
        SignatureInvalid: the checkpoint is not signed by ``verifier``'s key, or a witness
            named did not cosign it.
        SigningKeyError: two of the keys given share a name and key hash.
    """
    opened = verify_note(data, verifier, witnesses=witnesses)
    checkpoint = parse_checkpoint_text(opened.text)
    want = origin if origin is not None else verifier.name
    if checkpoint.origin != want:
        raise NoteError(f"checkpoint origin {checkpoint.origin!r} is not this log ({want!r})")
    note = data if isinstance(data, str) else data.decode("utf-8")
    return SignedCheckpoint(checkpoint, note, opened.cosignatures)
