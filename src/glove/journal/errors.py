"""Errors raised by the journal: codec, chain, recovery, writer and receipts.

Every class derives from :class:`JournalError`, itself a :class:`glove.errors.GloveError`::

    JournalError
    ├── RecordTooLarge        a payload or a length field over MAX_RECORD_BYTES
    ├── UnsupportedFormat     unknown magic, version or incompatible flag: refuse, never guess
    ├── JournalCorrupt        torn or garbled bytes (CRC mismatch) where a crash cannot explain them
    ├── JournalTampered       CRC fine but the HMAC chain, sequence or journal id disagrees
    ├── JournalTruncated      a checkpoint names a record the journal no longer holds
    ├── JournalLocked         another writer holds the journal's exclusive lock
    ├── JournalFull           a limit or ENOSPC refused the append; nothing was acknowledged
    ├── JournalFailed         a write or fdatasync failed: the journal refuses all appends
    ├── JournalChanged        the file was truncated, grown or replaced under the writer
    ├── JournalClosed         the writer was closed (by its owner)
    ├── ReceiptAckError       an acknowledgement that is not exactly the next receipt
    └── ReceiptError          receipts a third party verifies (keys, notes, proofs, bundles)
        ├── SigningKeyError       a signing or verifier key is missing or malformed
        │   └── SigningKeyUnsafe  a key file that is a symlink, not ours, or open to others
        ├── NoteError             a signed note or checkpoint is malformed
        ├── SignatureInvalid      no signature by the expected key verifies
        │   └── UnverifiedSignature  a signature line of no key given (a claimed witness)
        ├── ProofInvalid          an inclusion or consistency proof does not hold
        ├── BundleMalformed       a bundle is not one (size, JSON, keys, types, encoding)
        ├── EntryMismatch         the bundle's entry and its receipt disagree
        ├── ReceiptPayloadInvalid a receipt payload that is not a JSON object with session_id
        ├── SessionNotFound       the log holds no receipt of that session
        ├── NotSealed             no stored checkpoint covers the session's final receipt yet
        └── LogMismatch           the journal, the tree and the stored checkpoint disagree

``JournalCorrupt`` and ``JournalTampered`` carry the byte ``offset``, the ``seq`` the record
at that offset was expected to hold and the ``segment`` file name, so an operator can find it.
"""

from __future__ import annotations

from glove.errors import GloveError


class JournalError(GloveError):
    """Base class of every journal error."""


class RecordTooLarge(JournalError):
    """A payload or an on-disk length field is over the named maximum record size."""


class UnsupportedFormat(JournalError):
    """The file is not a journal this version can read (magic, version or flags)."""


class _Positioned(JournalError):
    """A finding at a place in the journal: segment file, byte offset and sequence."""

    def __init__(self, reason: str, *, segment: str = "", offset: int = -1, seq: int = -1) -> None:
        where = []
        if segment:
            where.append(f"segment {segment}")
        if offset >= 0:
            where.append(f"offset {offset}")
        if seq >= 0:
            where.append(f"seq {seq}")
        text = f"{reason} ({', '.join(where)})" if where else reason
        super().__init__(text)
        self.reason = reason
        self.segment = segment
        self.offset = offset
        self.seq = seq


class JournalCorrupt(_Positioned):
    """Bytes fail their checksum where a crash cannot explain it (the middle, or a clean file)."""


class JournalTampered(_Positioned):
    """Checksums hold but the HMAC chain, sequence, segment order or journal id do not."""


class JournalTruncated(_Positioned):
    """The journal ends before a checkpoint or receipt the caller holds."""


class JournalLocked(JournalError):
    """Another writer holds the journal's exclusive lock; this one fails fast."""


class JournalFull(JournalError):
    """A configured limit or the disk (ENOSPC) refused the append; nothing was acknowledged."""


class JournalFailed(JournalError):
    """A write or fdatasync failed; the journal refuses every append until it is reopened."""


class JournalChanged(JournalError):
    """The segment was truncated, grown or replaced while open; the writer stopped."""


class JournalClosed(JournalError):
    """The writer was closed by its owner."""


class ReceiptAckError(JournalError):
    """An acknowledgement named anything but the next unacknowledged receipt."""


class ReceiptError(JournalError):
    """Base class of the verifiable-receipt errors (keys, notes, proofs, bundles, the log)."""


class SigningKeyError(ReceiptError):
    """A signing key or verifier key is missing or malformed."""


class SigningKeyUnsafe(SigningKeyError):
    """A key file is a symlink or not a regular file, belongs to another user, or is open
    to group or others; it is refused, never repaired."""


class NoteError(ReceiptError):
    """A signed note or a checkpoint is malformed (format, encoding, bounds)."""


class SignatureInvalid(ReceiptError):
    """No signature by the expected key verifies (or a known key's signature fails)."""


class UnverifiedSignature(SignatureInvalid):
    """A note carries a signature line that is not by any key the verifier was given (an
    unknown key, a witness not named, a key of the same name with another hash): refused,
    since the line would make the note look signed by someone who may never have signed it."""


class ProofInvalid(ReceiptError):
    """An inclusion or consistency proof does not hold for the given tree heads."""


class BundleMalformed(ReceiptError):
    """A receipt bundle is not well-formed: too big, not strict JSON, duplicate or unknown
    keys, wrong types, non-canonical encoding."""


class EntryMismatch(ReceiptError):
    """The bundle's entry (leaf) and the receipt or session it claims to be disagree."""


class ReceiptPayloadInvalid(ReceiptError):
    """A receipt payload is not a strict JSON object carrying a string ``session_id``."""


class SessionNotFound(ReceiptError):
    """The log holds no receipt of that session (never written, or pruned)."""


class NotSealed(ReceiptError):
    """No stored checkpoint covers the session's final receipt yet."""


class LogMismatch(ReceiptError):
    """The journal, the Merkle tree and the stored checkpoint disagree (a cut tail, a
    rewrite, a forged checkpoint or tree file): the log refuses to start or to export."""
