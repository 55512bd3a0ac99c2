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
    └── ReceiptAckError       an acknowledgement that is not exactly the next receipt

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
