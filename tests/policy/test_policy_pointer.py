"""JSON pointer parsing, formatting and resolution (RFC 6901)."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.policy._pointer import (
    MAX_POINTER_CHARS,
    MISSING,
    PointerSyntaxError,
    format_pointer,
    parse_pointer,
    resolve_pointer,
)

# The example document of RFC 6901 section 5.
RFC_DOCUMENT = {
    "foo": ["bar", "baz"],
    "": 0,
    "a/b": 1,
    "c%d": 2,
    "e^f": 3,
    "g|h": 4,
    "i\\j": 5,
    'k"l': 6,
    " ": 7,
    "m~n": 8,
}


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("", RFC_DOCUMENT),
        ("/foo", ["bar", "baz"]),
        ("/foo/0", "bar"),
        ("/", 0),
        ("/a~1b", 1),
        ("/c%d", 2),
        ("/e^f", 3),
        ("/g|h", 4),
        ("/i\\j", 5),
        ('/k"l', 6),
        ("/ ", 7),
        ("/m~0n", 8),
    ],
)
def test_rfc6901_examples_resolve(pointer: str, expected: object) -> None:
    """Every example of RFC 6901 section 5 resolves to the value the RFC gives."""
    assert resolve_pointer(parse_pointer(pointer), RFC_DOCUMENT) == expected


@pytest.mark.parametrize(
    "pointer",
    [
        "/nope",
        "/foo/2",
        "/foo/-",
        "/foo/01",
        "/foo/+1",
        "/foo/ 1",
        "/foo/0/x",
        "/a~1b/c",
        "/foo/1e0",
    ],
)
def test_missing_steps_resolve_to_missing(pointer: str) -> None:
    """Absent keys, out-of-range or non-canonical indexes and steps into scalars are missing."""
    assert resolve_pointer(parse_pointer(pointer), RFC_DOCUMENT) is MISSING


def test_huge_index_is_missing_without_converting_it() -> None:
    """An index of a million digits is simply out of range."""
    assert resolve_pointer(("9" * 1_000_000,), [1, 2, 3]) is MISSING


def test_escape_order_is_tilde_one_then_tilde_zero() -> None:
    """``~01`` unescapes to ``~1``, not ``/`` (RFC 6901 section 4)."""
    assert parse_pointer("/~01") == ("~1",)


@pytest.mark.parametrize(
    "pointer", ["foo", "#/foo", "/~", "/a~2b", "/~a", "/" + "x" * MAX_POINTER_CHARS]
)
def test_invalid_pointers_are_refused(pointer: str) -> None:
    """A pointer without a leading slash, with a bad escape or too long is a syntax error."""
    with pytest.raises(PointerSyntaxError):
        parse_pointer(pointer)


def test_missing_sentinel_is_a_falsy_singleton() -> None:
    """MISSING is unique and falsy, so it cannot be confused with a JSON value."""
    assert type(MISSING)() is MISSING
    assert not MISSING
    assert repr(MISSING) == "MISSING"


@settings(deadline=None)  # no wall-clock deadline: CI machines are loaded
@given(st.lists(st.text(max_size=6), max_size=6))
def test_format_then_parse_round_trips(tokens: list[str]) -> None:
    """Any token list survives formatting and parsing unchanged."""
    assert parse_pointer(format_pointer(tuple(tokens))) == tuple(tokens)


json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(deadline=None)  # no wall-clock deadline: CI machines are loaded
@given(json_value, st.data())
def test_every_reachable_value_resolves(document: Any, data: st.DataObject) -> None:
    """A path walked through a random document resolves to the value found by walking it."""
    tokens: list[str] = []
    value = document
    while isinstance(value, list | dict) and value and data.draw(st.booleans()):
        if isinstance(value, list):
            index = data.draw(st.integers(0, len(value) - 1))
            tokens.append(str(index))
            value = value[index]
        else:
            key = data.draw(st.sampled_from(sorted(value)))
            tokens.append(key)
            value = value[key]
    pointer = format_pointer(tuple(tokens))
    assert resolve_pointer(parse_pointer(pointer), document) == value
