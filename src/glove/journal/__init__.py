"""Tamper-evident, bounded, crash-safe journals with authenticated receipts.

``open_journal(path, key, kind=..., limits=...)`` opens (recovering first) a journal directory
and returns a :class:`Journal` whose ``append(payload)`` returns a :class:`Receipt` only once the
record is durable. ``verify(path, key, checkpoint=None)`` checks a journal offline. The format,
the recovery rules and the receipts are described in ``docs/journal.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Imported on first use (PEP 562) so that `glove.journal.cli`, loaded by `glove --help`,
# does not pull in the writer, the actor runtime and msgspec.
_EXPORTS: dict[str, str] = {
    "APPEND_TIMEOUT_S": "glove.journal._handle",
    "CLOSE_TIMEOUT_S": "glove.journal._handle",
    "KEY_MIN_BYTES": "glove.journal._chain",
    "MAX_PAYLOAD_BYTES": "glove.journal._codec",
    "MAX_RECEIPT_PAGE": "glove.journal._receipts",
    "MAX_RECORD_BYTES": "glove.journal._codec",
    "FileStat": "glove.journal._storage",
    "Journal": "glove.journal._handle",
    "JournalChanged": "glove.journal.errors",
    "JournalClosed": "glove.journal.errors",
    "JournalCorrupt": "glove.journal.errors",
    "JournalError": "glove.journal.errors",
    "JournalFailed": "glove.journal.errors",
    "JournalFull": "glove.journal.errors",
    "JournalKind": "glove.journal._limits",
    "JournalLimits": "glove.journal._limits",
    "JournalLocked": "glove.journal.errors",
    "JournalStatus": "glove.journal._writer",
    "JournalTampered": "glove.journal.errors",
    "JournalTruncated": "glove.journal.errors",
    "JournalWriter": "glove.journal._writer",
    "OnFull": "glove.journal._limits",
    "PosixStorage": "glove.journal._storage",
    "Receipt": "glove.journal._receipts",
    "ReceiptAckError": "glove.journal.errors",
    "ReceiptPage": "glove.journal._receipts",
    "RecordKind": "glove.journal._codec",
    "RecordTooLarge": "glove.journal.errors",
    "Storage": "glove.journal._storage",
    "TailReport": "glove.journal._verify",
    "UnsupportedFormat": "glove.journal.errors",
    "VerifyReport": "glove.journal._verify",
    "open_journal": "glove.journal._handle",
    "parse_checkpoint": "glove.journal._verify",
    "repair": "glove.journal._verify",
    "verify": "glove.journal._verify",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its private module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
