"""The public surface of glove.control and glove.protocol, their error trees, and the one
table of error codes (in code and in docs/protocol.md)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import glove.control
import glove.control.errors
import glove.protocol
import glove.protocol.errors
from glove.errors import GloveError
from glove.protocol import ERROR_CODES

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


@pytest.mark.parametrize("package", [glove.control, glove.protocol], ids=lambda p: p.__name__)
def test_all_is_sorted_and_exists(package: ModuleType) -> None:
    """Every exported name exists, none is repeated, and the list is in ruff's sorted order."""
    names = package.__all__
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(package, name), name
    constants = [n for n in names if n.isupper()]
    classes = [n for n in names if n[0].isupper() and not n.isupper()]
    functions = [n for n in names if n[0].islower()]
    assert names == sorted(constants) + sorted(classes) + sorted(functions)


@pytest.mark.parametrize(
    ("errors", "package"),
    [(glove.control.errors, glove.control), (glove.protocol.errors, glove.protocol)],
    ids=["control", "protocol"],
)
def test_every_error_roots_at_glove_error_and_is_in_the_tree(
    errors: ModuleType, package: ModuleType
) -> None:
    """Each error class derives from GloveError, is drawn in its errors module docstring and
    is exported by its package."""
    doc = errors.__doc__ or ""
    found = [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if cls.__module__ == errors.__name__
    ]
    assert len(found) >= 7
    for cls in found:
        assert issubclass(cls, GloveError), cls
        assert cls.__name__ in doc, cls
        assert cls.__name__ in package.__all__, cls


def test_every_protocol_error_code_is_in_the_table() -> None:
    """The code each protocol error class carries is a row of ERROR_CODES."""
    codes = {row.code for row in ERROR_CODES}
    for _, cls in inspect.getmembers(glove.protocol.errors, inspect.isclass):
        if cls.__module__ == "glove.protocol.errors" and cls.code not in (
            "protocol_error",
            "request_error",
        ):
            assert cls.code in codes, cls


def test_docs_list_every_error_code_with_its_connection_effect() -> None:
    """docs/protocol.md has one table row per code, saying whether the connection closes."""
    rows = dict(
        re.findall(r"^\| `([a-z_]+)` \| (closes|stays open|[^|]+?) \|", DOC.read_text(), re.M)
    )
    for row in ERROR_CODES:
        assert row.code in rows, row.code
        assert rows[row.code].startswith("closes" if row.closes else "stays open"), row.code
