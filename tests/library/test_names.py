"""Bundle references, the error codes (a contract) and the package's public surface."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import glove.library
from glove.errors import GloveError
from glove.library import (
    BUNDLE_NAME_PATTERN,
    ERROR_CODES,
    BundleNameError,
    LibraryError,
    ProjectionError,
    bundle_name,
    digest_of,
    is_bundle_name,
)
from glove.library import errors as library_errors
from tests._ast import parse as parse_source

HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("ref", "name"),
    [(f"sha256:{HEX}", f"sha256-{HEX}"), (f"sha256-{HEX}", f"sha256-{HEX}")],
)
def test_a_digest_and_a_bundle_name_both_resolve_to_the_name(ref: str, name: str) -> None:
    """``sha256:<hex>`` and ``sha256-<hex>`` name the same bundle file; digest_of inverts."""
    assert bundle_name(ref) == name
    assert is_bundle_name(name)
    assert digest_of(name) == f"sha256:{HEX}"


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("/etc/passwd", "projection_name_absolute"),
        (f"/sha256-{HEX}", "projection_name_absolute"),
        (f"../sha256-{HEX}", "projection_name_traversal"),
        ("sha256:../../etc/passwd", "projection_name_traversal"),
        ("..", "projection_name_traversal"),
        (f"sha256:{HEX.upper()}", "projection_name_invalid"),
        (f"sha256:{HEX[:-1]}", "projection_name_invalid"),
        (f"sha256:{HEX}0", "projection_name_invalid"),
        (f"sha256:{HEX}\n", "projection_name_invalid"),
        (f"sha512:{HEX}{HEX}", "projection_name_invalid"),
        (f"blake3:{HEX}", "projection_name_invalid"),
        (f"sha256-{HEX}/x", "projection_name_invalid"),
        (f"sha256:{HEX[:-1]}\u0661", "projection_name_invalid"),  # a non-ASCII digit
        ("", "projection_name_invalid"),
    ],
)
def test_anything_else_is_refused_by_kind(ref: str, code: str) -> None:
    """An absolute path, a '..' walk, upper-case or short or long hex, a trailing newline,
    another algorithm, a path under a name, a non-ASCII digit: each refused with its code
    before any system call."""
    with pytest.raises(BundleNameError) as caught:
        bundle_name(ref)
    assert caught.value.code == code
    assert isinstance(caught.value, ProjectionError)
    assert not is_bundle_name(ref)


def test_the_name_pattern_is_the_documented_one() -> None:
    """The exported pattern is exactly the one the store and the docs use."""
    assert BUNDLE_NAME_PATTERN == "^sha256-[0-9a-f]{64}$"


def test_the_error_codes_are_pinned() -> None:
    """The codes are a contract (receipts and the CLI carry them): this list only grows."""
    assert ERROR_CODES == (
        "freeze_failed",
        "freeze_not_permitted",
        "freeze_unavailable",
        "library_bundle_mode",
        "library_root_missing",
        "library_root_mode",
        "library_root_not_directory",
        "library_root_symlink",
        "library_root_unusable",
        "library_root_wrong_owner",
        "library_source_changed",
        "library_source_not_regular",
        "library_source_too_large",
        "library_source_unreadable",
        "library_stray_entry",
        "library_write_failed",
        "mount_check_failed",
        "mount_failed",
        "mount_target_invalid",
        "projection_changed",
        "projection_cross_device",
        "projection_digest_mismatch",
        "projection_escape",
        "projection_hardlinked",
        "projection_missing",
        "projection_name_absolute",
        "projection_name_invalid",
        "projection_name_traversal",
        "projection_not_regular",
        "projection_size_mismatch",
        "projection_symlink",
        "projection_too_large",
        "projection_unreadable",
        "projection_writable",
        "projection_wrong_owner",
    )


def _error_classes() -> list[type[LibraryError]]:
    return [
        value
        for value in vars(library_errors).values()
        if isinstance(value, type) and issubclass(value, LibraryError)
    ]


def test_every_code_belongs_to_exactly_one_class_rooted_at_glove_error() -> None:
    """Each code is carried by one class; every class derives from GloveError; a class
    refuses a code that is not its own (a caller's bug, never a silent mislabel)."""
    owners: dict[str, str] = {}
    for cls in _error_classes():
        assert issubclass(cls, GloveError)
        for code in cls.codes:
            assert code not in owners, (code, owners.get(code), cls.__name__)
            owners[code] = cls.__name__
    assert sorted(owners) == list(ERROR_CODES)
    with pytest.raises(ValueError, match="no error code"):
        BundleNameError("projection_missing", "wrong class")


def test_the_docstring_tree_names_every_class_and_code() -> None:
    """The error tree in errors.py's docstring lists every class and every code."""
    doc = library_errors.__doc__ or ""
    for cls in _error_classes():
        assert cls.__name__ in doc, cls.__name__
    for code in ERROR_CODES:
        assert code in doc, code


def test_all_is_sorted_and_complete() -> None:
    """``__all__`` is sorted (as ruff sorts it), every name in it exists, and every public
    name the package's modules define for callers is exported."""
    exported = glove.library.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    for name in exported:
        assert hasattr(glove.library, name), name
    for name in ("Library", "freeze", "open_bundle", "FrozenProjection", "ERROR_CODES"):
        assert name in exported


def test_the_package_imports_no_other_glove_package() -> None:
    """glove.library imports nothing of Glove but glove.errors and itself (it sits in the
    lowest layers, beside journal and evaluate)."""
    package = Path(glove.library.__file__).parent
    for module in package.glob("*.py"):
        tree = parse_source(module.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.startswith("glove"):
                    assert name == "glove.errors" or name.startswith("glove.library"), (
                        module.name,
                        name,
                    )
