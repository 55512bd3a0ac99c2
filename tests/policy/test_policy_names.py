"""Exposed tool names and rule globs, with fnmatch as the reference for ``*`` and ``?``."""

import fnmatch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.policy._names import glob_match, is_glob, is_valid_glob, is_valid_tool_name

names = st.text(alphabet="ab_-", min_size=1, max_size=12)
globs = st.text(alphabet="ab_-*?", min_size=1, max_size=10)


@settings(deadline=None)  # no wall-clock deadline: CI machines are loaded
@given(globs, names)
def test_glob_agrees_with_fnmatchcase(pattern: str, name: str) -> None:
    """``*`` and ``?`` mean what fnmatch means by them (there are no classes here)."""
    assert glob_match(pattern, name) == fnmatch.fnmatchcase(name, pattern)


def test_many_stars_stay_fast() -> None:
    """A pattern of many stars against a long non-matching name answers at once."""
    assert not glob_match("*a" * 60 + "b", "a" * 64)
    assert glob_match("*" * 100, "x" * 64)


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("fs__read_file", True),
        ("a", True),
        ("A-Z_0-9", True),
        ("x" * 64, True),
        ("x" * 65, False),
        ("", False),
        ("fs__read file", False),
        ("fs.read", False),
        ("fs__é", False),
        ("fs__x\n", False),
        (None, False),
        (7, False),
    ],
)
def test_tool_names(name: object, valid: bool) -> None:
    """Exposed names are 1-64 characters of ``[A-Za-z0-9_-]``."""
    assert is_valid_tool_name(name) is valid


def test_globs_are_names_plus_wildcards() -> None:
    """Globs add only ``*`` and ``?`` to the name alphabet."""
    assert is_valid_glob("fs__*")
    assert is_valid_glob("*")
    assert not is_valid_glob("fs__[ab]")
    assert not is_valid_glob("fs/*")
    assert is_glob("a?")
    assert is_glob("a*")
    assert not is_glob("abc")
