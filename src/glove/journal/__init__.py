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
    from glove.journal._bundle import (
        BUNDLE_FORMAT,
        MAX_BUNDLE_BYTES,
        ConsistencyEvidence,
        ReceiptBundle,
        VerifiedReceipt,
        decode_bundle,
        encode_bundle,
        parse_receipt_payload,
        verify_bundle,
    )
    from glove.journal._chain import KEY_MIN_BYTES
    from glove.journal._checkpoint import (
        Checkpoint,
        SignedCheckpoint,
        open_checkpoint,
        parse_checkpoint_text,
        sign_checkpoint,
    )
    from glove.journal._codec import MAX_PAYLOAD_BYTES, MAX_RECORD_BYTES, RecordKind
    from glove.journal._entries import Entry
    from glove.journal._handle import APPEND_TIMEOUT_S, CLOSE_TIMEOUT_S, Journal, open_journal
    from glove.journal._keyfile import (
        default_signing_key_path,
        generate_signing_key,
        load_signing_key,
        read_verifier_key_file,
    )
    from glove.journal._keys import SigningKey, VerifierKey, parse_signing_key, parse_verifier_key
    from glove.journal._limits import JournalKind, JournalLimits, OnFull
    from glove.journal._merkle import (
        EMPTY_ROOT,
        leaf_hash,
        node_hash,
        verify_consistency,
        verify_inclusion,
    )
    from glove.journal._note import open_note, sign_note
    from glove.journal._offline import consistency_offline, export_offline
    from glove.journal._receipts import MAX_RECEIPT_PAGE, Receipt, ReceiptPage
    from glove.journal._storage import FileStat, PosixStorage, Storage
    from glove.journal._tlog import TransparencyLog, open_transparency_log
    from glove.journal._verify import TailReport, VerifyReport, parse_checkpoint, repair, verify
    from glove.journal._writer import JournalStatus, JournalWriter
    from glove.journal.errors import (
        BundleMalformed,
        EntryMismatch,
        JournalChanged,
        JournalClosed,
        JournalCorrupt,
        JournalError,
        JournalFailed,
        JournalFull,
        JournalLocked,
        JournalTampered,
        JournalTruncated,
        LogMismatch,
        NoteError,
        NotSealed,
        ProofInvalid,
        ReceiptAckError,
        ReceiptError,
        ReceiptPayloadInvalid,
        RecordTooLarge,
        SessionNotFound,
        SignatureInvalid,
        SigningKeyError,
        SigningKeyUnsafe,
        UnsupportedFormat,
    )

# Imported on first use (PEP 562) so that `glove.journal.cli`, loaded by `glove --help`,
# does not pull in the writer, the actor runtime and msgspec.
_EXPORTS: dict[str, str] = {
    "APPEND_TIMEOUT_S": "glove.journal._handle",
    "BUNDLE_FORMAT": "glove.journal._bundle",
    "CLOSE_TIMEOUT_S": "glove.journal._handle",
    "EMPTY_ROOT": "glove.journal._merkle",
    "KEY_MIN_BYTES": "glove.journal._chain",
    "MAX_BUNDLE_BYTES": "glove.journal._bundle",
    "MAX_PAYLOAD_BYTES": "glove.journal._codec",
    "MAX_RECEIPT_PAGE": "glove.journal._receipts",
    "MAX_RECORD_BYTES": "glove.journal._codec",
    "BundleMalformed": "glove.journal.errors",
    "Checkpoint": "glove.journal._checkpoint",
    "ConsistencyEvidence": "glove.journal._bundle",
    "Entry": "glove.journal._entries",
    "EntryMismatch": "glove.journal.errors",
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
    "LogMismatch": "glove.journal.errors",
    "NotSealed": "glove.journal.errors",
    "NoteError": "glove.journal.errors",
    "OnFull": "glove.journal._limits",
    "PosixStorage": "glove.journal._storage",
    "ProofInvalid": "glove.journal.errors",
    "Receipt": "glove.journal._receipts",
    "ReceiptAckError": "glove.journal.errors",
    "ReceiptBundle": "glove.journal._bundle",
    "ReceiptError": "glove.journal.errors",
    "ReceiptPage": "glove.journal._receipts",
    "ReceiptPayloadInvalid": "glove.journal.errors",
    "RecordKind": "glove.journal._codec",
    "RecordTooLarge": "glove.journal.errors",
    "SessionNotFound": "glove.journal.errors",
    "SignatureInvalid": "glove.journal.errors",
    "SignedCheckpoint": "glove.journal._checkpoint",
    "SigningKey": "glove.journal._keys",
    "SigningKeyError": "glove.journal.errors",
    "SigningKeyUnsafe": "glove.journal.errors",
    "Storage": "glove.journal._storage",
    "TailReport": "glove.journal._verify",
    "TransparencyLog": "glove.journal._tlog",
    "UnsupportedFormat": "glove.journal.errors",
    "VerifiedReceipt": "glove.journal._bundle",
    "VerifierKey": "glove.journal._keys",
    "VerifyReport": "glove.journal._verify",
    "consistency_offline": "glove.journal._offline",
    "decode_bundle": "glove.journal._bundle",
    "default_signing_key_path": "glove.journal._keyfile",
    "encode_bundle": "glove.journal._bundle",
    "export_offline": "glove.journal._offline",
    "generate_signing_key": "glove.journal._keyfile",
    "leaf_hash": "glove.journal._merkle",
    "load_signing_key": "glove.journal._keyfile",
    "node_hash": "glove.journal._merkle",
    "open_checkpoint": "glove.journal._checkpoint",
    "open_journal": "glove.journal._handle",
    "open_note": "glove.journal._note",
    "open_transparency_log": "glove.journal._tlog",
    "parse_checkpoint": "glove.journal._verify",
    "parse_checkpoint_text": "glove.journal._checkpoint",
    "parse_receipt_payload": "glove.journal._bundle",
    "parse_signing_key": "glove.journal._keys",
    "parse_verifier_key": "glove.journal._keys",
    "read_verifier_key_file": "glove.journal._keyfile",
    "repair": "glove.journal._verify",
    "sign_checkpoint": "glove.journal._checkpoint",
    "sign_note": "glove.journal._note",
    "verify": "glove.journal._verify",
    "verify_bundle": "glove.journal._bundle",
    "verify_consistency": "glove.journal._merkle",
    "verify_inclusion": "glove.journal._merkle",
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
    "BUNDLE_FORMAT",
    "CLOSE_TIMEOUT_S",
    "EMPTY_ROOT",
    "KEY_MIN_BYTES",
    "MAX_BUNDLE_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_RECEIPT_PAGE",
    "MAX_RECORD_BYTES",
    "BundleMalformed",
    "Checkpoint",
    "ConsistencyEvidence",
    "Entry",
    "EntryMismatch",
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
    "LogMismatch",
    "NotSealed",
    "NoteError",
    "OnFull",
    "PosixStorage",
    "ProofInvalid",
    "Receipt",
    "ReceiptAckError",
    "ReceiptBundle",
    "ReceiptError",
    "ReceiptPage",
    "ReceiptPayloadInvalid",
    "RecordKind",
    "RecordTooLarge",
    "SessionNotFound",
    "SignatureInvalid",
    "SignedCheckpoint",
    "SigningKey",
    "SigningKeyError",
    "SigningKeyUnsafe",
    "Storage",
    "TailReport",
    "TransparencyLog",
    "UnsupportedFormat",
    "VerifiedReceipt",
    "VerifierKey",
    "VerifyReport",
    "consistency_offline",
    "decode_bundle",
    "default_signing_key_path",
    "encode_bundle",
    "export_offline",
    "generate_signing_key",
    "leaf_hash",
    "load_signing_key",
    "node_hash",
    "open_checkpoint",
    "open_journal",
    "open_note",
    "open_transparency_log",
    "parse_checkpoint",
    "parse_checkpoint_text",
    "parse_receipt_payload",
    "parse_signing_key",
    "parse_verifier_key",
    "read_verifier_key_file",
    "repair",
    "sign_checkpoint",
    "sign_note",
    "verify",
    "verify_bundle",
    "verify_consistency",
    "verify_inclusion",
]
