"""Strict JSON for plans, control frames, receipts and bundles: one value, no duplicate
keys, bounded (sans-IO).

``loads_strict`` accepts exactly RFC 8259 JSON text with these extra refusals: a key that
appears twice in one object (compared after unescaping, so ``"a"`` and ``"\\u0061"`` collide),
``NaN``/``Infinity`` and numbers that overflow to them, integers over Python's digit limit,
nesting deeper than ``max_depth``, and strings or keys that are not Unicode text (a lone
surrogate such as ``"\\ud800"``: I-JSON, RFC 7493 §2.1; no UTF-8 encoder can write it back).
``dumps_compact`` and ``dumps_pretty`` are the two encodings Glove writes; both are
deterministic functions of the value (object keys keep their order).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final, TypeAlias

#: A JSON object whose members are free-form: what Glove does not type (a persisted plan
#: inside a journal event, an MCP message at the JSON-RPC boundary). Every place that
#: keeps one is listed in docs/architecture.md ("Where JSON stays untyped").
JsonObject: TypeAlias = dict[str, Any]

MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of arrays and objects accepted."""


#: Characters of a refused key quoted in an error message (a key may be as long as a frame).
MAX_QUOTED_KEY_CHARS: Final = 64
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
#: Only these escapes can put a surrogate into a parsed string (pairs combine into one).
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


class _Refused(ValueError):
    """Raised inside the json hooks; turned into the caller's error type."""


class _Duplicate(_Refused):
    """A repeated key; the caller may map it to an error type of its own."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(f"duplicate key {key[:MAX_QUOTED_KEY_CHARS]!r}")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:32]} is out of range")
    return value


def _depth(value: Any, limit: int) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise _Refused(f"nested deeper than {limit}")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def _unicode(value: Any) -> None:
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise _Refused("a string holds a lone surrogate (not Unicode text)")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def loads_strict(
    text: str | bytes,
    error: type[Exception],
    *,
    max_depth: int = MAX_JSON_DEPTH,
    duplicate_error: type[Exception] | None = None,
) -> Any:
    """Parse one strict JSON value (see the module docstring).

    Raises:
        error: anything that is not strict JSON, with the reason.
        duplicate_error: a key repeated in one object, when given (else ``error``).
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"not UTF-8: {exc.reason} at byte {exc.start}") from exc
    try:
        value = json.loads(
            text, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float
        )
        _depth(value, max_depth)
        if _SURROGATE_ESCAPE.search(text) or _SURROGATE.search(text):
            _unicode(value)
    except json.JSONDecodeError as exc:
        raise error(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise error(f"not JSON: nested deeper than {max_depth}") from exc
    except _Duplicate as exc:
        raise (duplicate_error or error)(f"not strict JSON: {exc}") from exc
    except ValueError as exc:  # _Refused, and the int digit limit
        raise error(f"not strict JSON: {exc}") from exc
    return value


def dumps_compact(value: Any) -> str:
    """The compact encoding: no spaces, non-ASCII kept as UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps_pretty(value: Any) -> str:
    """The readable encoding: two-space indent, non-ASCII kept, a final newline."""
    return json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
