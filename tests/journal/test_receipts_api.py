"""The receipts part of glove.journal's public surface, and its error tree, are pinned."""

from __future__ import annotations

import inspect

import glove.journal
from glove.errors import GloveError
from glove.journal import errors

RECEIPT_NAMES = (
    "TransparencyLog",
    "open_transparency_log",
    "generate_signing_key",
    "load_signing_key",
    "default_signing_key_path",
    "parse_verifier_key",
    "read_verifier_key_file",
    "sign_checkpoint",
    "open_checkpoint",
    "verify_bundle",
    "decode_bundle",
    "encode_bundle",
    "export_offline",
    "consistency_offline",
    "verify_inclusion",
    "verify_consistency",
    "ReceiptError",
)


def test_receipt_names_are_exported_and_sorted() -> None:
    """The names the daemon and setup will call are exported; __all__ is sorted and unique."""
    exported = glove.journal.__all__
    for name in RECEIPT_NAMES:
        assert name in exported
        assert getattr(glove.journal, name) is not None
    assert len(set(exported)) == len(exported)
    assert set(exported) == set(glove.journal._EXPORTS)


def test_every_journal_error_roots_at_glove_error_and_is_in_the_tree() -> None:
    """Every error class derives from GloveError and is named in the module's tree."""
    classes = [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, Exception) and obj.__module__ == errors.__name__
    ]
    assert len(classes) > 20
    for cls in classes:
        assert issubclass(cls, GloveError), cls
        if not cls.__name__.startswith("_"):
            assert cls.__name__ in (errors.__doc__ or ""), cls
    assert issubclass(errors.SigningKeyUnsafe, errors.SigningKeyError)
    assert issubclass(errors.ReceiptError, errors.JournalError)
