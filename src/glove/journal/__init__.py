"""Tamper-evident, bounded, crash-safe journals with authenticated receipts.

``open_journal(path, key, kind=..., limits=...)`` opens (recovering first) a journal directory
and returns a :class:`Journal` whose ``append(payload)`` returns a :class:`Receipt` only once the
record is durable. ``verify(path, key, checkpoint=None)`` checks a journal offline. The format,
the recovery rules and the receipts are described in ``docs/journal.md``.
"""

from glove.journal._chain import KEY_MIN_BYTES
from glove.journal._codec import MAX_PAYLOAD_BYTES, MAX_RECORD_BYTES, RecordKind
from glove.journal._handle import APPEND_TIMEOUT_S, CLOSE_TIMEOUT_S, Journal, open_journal
from glove.journal._limits import JournalKind, JournalLimits, OnFull
from glove.journal._receipts import MAX_RECEIPT_PAGE, Receipt, ReceiptPage
from glove.journal._storage import FileStat, PosixStorage, Storage
from glove.journal._verify import TailReport, VerifyReport, parse_checkpoint, repair, verify
from glove.journal._writer import JournalStatus, JournalWriter
from glove.journal.errors import (
    JournalChanged,
    JournalClosed,
    JournalCorrupt,
    JournalError,
    JournalFailed,
    JournalFull,
    JournalLocked,
    JournalTampered,
    JournalTruncated,
    ReceiptAckError,
    RecordTooLarge,
    UnsupportedFormat,
)

__all__ = [
    "APPEND_TIMEOUT_S",
    "CLOSE_TIMEOUT_S",
    "KEY_MIN_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_RECEIPT_PAGE",
    "MAX_RECORD_BYTES",
    "FileStat",
    "Journal",
    "JournalChanged",
    "JournalClosed",
    "JournalCorrupt",
    "JournalError",
    "JournalFailed",
    "JournalFull",
    "JournalKind",
    "JournalLimits",
    "JournalLocked",
    "JournalStatus",
    "JournalTampered",
    "JournalTruncated",
    "JournalWriter",
    "OnFull",
    "PosixStorage",
    "Receipt",
    "ReceiptAckError",
    "ReceiptPage",
    "RecordKind",
    "RecordTooLarge",
    "Storage",
    "TailReport",
    "UnsupportedFormat",
    "VerifyReport",
    "open_journal",
    "parse_checkpoint",
    "repair",
    "verify",
]
