"""The public surface of glove.remote and glove.container.macos, and their error trees."""

from __future__ import annotations

import inspect

import glove.container.macos
import glove.remote
import glove.remote.errors
from glove.errors import GloveError


def test_remote_all_is_sorted_and_exists() -> None:
    """Every exported name exists, none is repeated, and the list is in ruff's sorted order."""
    names = glove.remote.__all__
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(glove.remote, name), name
    constants = [n for n in names if n.isupper()]
    classes = [n for n in names if n[0].isupper() and not n.isupper()]
    functions = [n for n in names if n[0].islower()]
    assert names == sorted(constants) + sorted(classes) + sorted(functions)


def test_every_remote_error_roots_at_glove_error_and_is_in_the_tree() -> None:
    """Each error class derives from GloveError and is drawn in the errors module docstring."""
    doc = glove.remote.errors.__doc__ or ""
    found = [
        cls
        for _, cls in inspect.getmembers(glove.remote.errors, inspect.isclass)
        if cls.__module__ == "glove.remote.errors"
    ]
    assert len(found) >= 10
    for cls in found:
        assert issubclass(cls, GloveError), cls
        assert cls.__name__ in doc, cls
        assert cls.__name__ in glove.remote.__all__, cls


def test_macos_all_exists() -> None:
    """glove.container.macos exports names that exist, sorted."""
    names = glove.container.macos.__all__
    for name in names:
        assert hasattr(glove.container.macos, name), name
    constants = [n for n in names if n.isupper()]
    others = [n for n in names if not n.isupper()]
    assert names == sorted(constants) + sorted(others, key=lambda n: (n[0].islower(), n))
