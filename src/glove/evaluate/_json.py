"""Strict JSON with located refusals: the structural stage of the fixture decoder (sans-IO).

msgspec keeps the last of two members with the same key and says nothing, and a key
spelled ``"\\u0061"`` is the same key as ``"a"`` only after unescaping. So before the typed
decode, the text is parsed once by the standard library with every object kept as its
member list, and walked; the walk refuses, each with the JSON path of the fault:

* bytes that are not UTF-8 (with the byte offset);
* text that is not one RFC 8259 value (the parser's line and column);
* a key repeated in one object, compared after unescaping, at every level;
* nesting deeper than the caller's ``max_depth`` containers;
* ``NaN``, ``Infinity`` and numbers that overflow to them, integers past Python's digit
  limit;
* a string or key holding a lone surrogate (``"\\ud800"``: not Unicode text, and no UTF-8
  encoder can write it back).

What it returns is plain ``dict``/``list``/scalars, ready for ``msgspec.convert``. This is
the same rule set as the code base's other strict parsers (plans, control frames, wallet
frames), written here because ``glove.evaluate`` depends on no other Glove package.
"""

from __future__ import annotations

import json
import math
from typing import Any

from glove.evaluate.errors import FixtureError, member_path


class _Members(list[tuple[str, Any]]):
    """An object as its member list, duplicates kept, until the walk has checked it."""


class _Bad:
    """A scalar strict JSON refuses, kept in place so the walk can name its path."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def _bad_constant(name: str) -> _Bad:
    return _Bad(f"{name} is not JSON")


def _float(text: str) -> float | _Bad:
    value = float(text)
    if not math.isfinite(value):
        return _Bad(f"number {text[:32]} is out of range")
    return value


def _int(text: str) -> int | _Bad:
    try:
        return int(text)
    except ValueError:  # Python's integer digit limit
        return _Bad(f"an integer of {len(text)} digits is out of range")


def _lone_surrogate(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return ord(text[exc.start])
    return None


def loads_located(data: bytes, *, max_depth: int) -> Any:
    """Parse ``data`` as one strict JSON value (module docstring) and return it as plain
    Python values.

    Raises:
        FixtureError: the first fault found (an object's keys are checked before the
            values of its members), with its path.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FixtureError.one("$", f"not UTF-8: {exc.reason} at byte {exc.start}") from exc
    try:
        tree = json.loads(
            text,
            object_pairs_hook=_Members,
            parse_constant=_bad_constant,
            parse_float=_float,
            parse_int=_int,
        )
    except json.JSONDecodeError as exc:
        raise FixtureError.one(
            "$", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError as exc:
        raise FixtureError.one("$", f"nested deeper than {max_depth} containers") from exc
    return _checked(tree, max_depth)


# The strict decoder itself: the fixture tree is free-form JSON until its checks pass.
def _checked(tree: Any, max_depth: int) -> Any:
    """``tree`` with member lists turned into dicts, or the first fault (document order)."""
    root: list[Any] = [None]
    # Each entry: the node, its path, its depth, and where to store the checked value.
    stack: list[tuple[Any, str, int, list[Any] | dict[str, Any], int | str]] = [
        (tree, "$", 1, root, 0)
    ]
    while stack:
        node, path, depth, parent, slot = stack.pop()
        if isinstance(node, _Members | list) and depth > max_depth:
            raise FixtureError.one(path, f"nested deeper than {max_depth} containers")
        if isinstance(node, _Members):
            out: dict[str, Any] = {}
            children: list[tuple[Any, str, int, list[Any] | dict[str, Any], int | str]] = []
            for key, child in node:
                child_path = member_path(path, key)
                if key in out:
                    raise FixtureError.one(
                        child_path, f"duplicate key {key!r} (keys are compared after unescaping)"
                    )
                code = _lone_surrogate(key)
                if code is not None:
                    raise FixtureError.one(
                        child_path, f"a key holds a lone surrogate \\u{code:04x}"
                    )
                out[key] = None
                children.append((child, child_path, depth + 1, out, key))
            parent[slot] = out  # type: ignore[index]
            stack.extend(reversed(children))
        elif isinstance(node, list):
            items: list[Any] = [None] * len(node)
            parent[slot] = items  # type: ignore[index]
            stack.extend(
                (child, f"{path}[{index}]", depth + 1, items, index)
                for index, child in reversed(list(enumerate(node)))
            )
        elif isinstance(node, _Bad):
            raise FixtureError.one(path, node.message)
        else:
            if isinstance(node, str):
                code = _lone_surrogate(node)
                if code is not None:
                    raise FixtureError.one(
                        path, f"a lone surrogate \\u{code:04x} is not Unicode text"
                    )
            parent[slot] = node  # type: ignore[index]
    return root[0]
