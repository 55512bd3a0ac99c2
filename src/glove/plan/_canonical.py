"""RFC 8785, the JSON Canonicalization Scheme (JCS), and a plan's canonical bytes (sans-IO).

JCS fixes one byte sequence per JSON value, so two parties that hold the same plan compute the
same digest without agreeing on anything but the RFC:

* Objects: members sorted by key, comparing keys as arrays of UTF-16 code units (not code
  points: U+10000 and above sort by their surrogates, below U+E000..U+FFFF); no whitespace.
* Strings: UTF-8; escaped are only ``"``, ``\\``, the five short escapes ``\\b \\t \\n \\f \\r``
  and the other controls below U+0020 (as ``\\u00xx``, lowercase hex); everything else,
  U+007F, U+2028 and non-ASCII included, is written as itself. A lone surrogate has no UTF-8
  form and is refused.
* Numbers: IEEE-754 doubles written as ECMAScript's ``Number.prototype.toString`` does
  (shortest round-trip digits; plain notation for 1e-6 <= |x| < 1e21, else ``d.ddde+N``);
  ``-0`` is ``0``. NaN and the infinities are refused, and so are integers outside
  +-(2**53 - 1): as doubles they would silently become another number.
* ``true``, ``false``, ``null`` as themselves.

Python's ``repr(float)`` already yields the shortest digits that round-trip, closest to the
value, which is the digit string ECMAScript chooses; only the notation is rearranged here.
"""

from __future__ import annotations

import math
import re
from typing import Final

import msgspec

from glove.plan._model import MAX_PLAN_DEPTH, MAX_SAFE_INTEGER, Plan
from glove.plan.errors import CanonicalError, member_path

#: ECMAScript writes a number in plain notation while its decimal exponent n satisfies
#: -6 < n <= 21 (the value is below 1e21 and at least 1e-6).
_PLAIN_MAX_EXPONENT: Final = 21
_PLAIN_MIN_EXPONENT: Final = -6

_MUST_ESCAPE: Final = re.compile(r'[\x00-\x1f"\\]')
_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _string(text: str, path: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalError.one(
            path, f"a lone surrogate U+{ord(text[exc.start]):04X} has no UTF-8 encoding"
        ) from exc
    return '"' + _MUST_ESCAPE.sub(_escape, text) + '"'


def ecmascript_number(value: float) -> str:
    """``value`` as ECMAScript's ``Number.prototype.toString`` writes it (RFC 8785 3.2.2.3).

    Raises:
        ValueError: NaN or an infinity (no JSON form).
    """
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no JSON form")
    if value == 0:
        return "0"  # and -0
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # The decimal point sits after `point` digits of `digits` (before them when negative).
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= _PLAIN_MAX_EXPONENT:
        text = digits + "0" * (n - k)
    elif 0 < n <= _PLAIN_MAX_EXPONENT:
        text = digits[:n] + "." + digits[n:]
    elif _PLAIN_MIN_EXPONENT < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        power = n - 1
        exp = f"e{'+' if power >= 0 else '-'}{abs(power)}"
        text = (digits if k == 1 else digits[0] + "." + digits[1:]) + exp
    return sign + text


def _scalar(value: object, path: str) -> str:
    """The encoding of a JSON scalar.

    Raises:
        CanonicalError: not a JSON scalar, or a number RFC 8785 cannot write exactly.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value, path)
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalError.one(
                path, "an integer beyond +-(2**53 - 1) is not exact as an IEEE-754 double"
            )
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalError.one(path, f"{value!r} is not a JSON number")
        return ecmascript_number(value)
    raise CanonicalError.one(path, f"{type(value).__name__} is not a JSON value")


def _encode(value: object, path: str, depth: int, out: list[str]) -> None:
    """Append the encoding of ``value``; ``depth`` counts the containers around it."""
    if not isinstance(value, list | tuple | dict):
        out.append(_scalar(value, path))
        return
    if depth >= MAX_PLAN_DEPTH:
        raise CanonicalError.one(path, f"nested deeper than {MAX_PLAN_DEPTH} containers")
    if not isinstance(value, dict):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, f"{path}[{index}]", depth + 1, out)
        out.append("]")
        return
    members: list[tuple[bytes, str, str, object]] = []
    for key, item in value.items():
        if not isinstance(key, str):
            raise CanonicalError.one(path, f"an object key must be a string, not {key!r}")
        where = member_path(path, key)
        # Encoded first: a lone surrogate is refused before it is sorted by UTF-16 units.
        encoded = _string(key, where)
        members.append((key.encode("utf-16-be"), encoded, where, item))
    members.sort(key=lambda member: member[0])
    out.append("{")
    for index, (_, encoded, where, item) in enumerate(members):
        if index:
            out.append(",")
        out.append(encoded)
        out.append(":")
        _encode(item, where, depth + 1, out)
    out.append("}")


def jcs_dumps(value: object) -> bytes:
    """The RFC 8785 canonical encoding of a JSON value (dicts with str keys, lists, tuples,
    str, int, float, bool, None), as UTF-8 bytes.

    Raises:
        CanonicalError: the value is not JSON, holds a lone surrogate, NaN, an infinity or an
            integer outside +-(2**53 - 1), or nests deeper than MAX_PLAN_DEPTH.
    """
    out: list[str] = []
    _encode(value, "$", 0, out)
    return "".join(out).encode("utf-8")


def canonical_bytes(plan: Plan) -> bytes:
    """The RFC 8785 bytes of ``plan`` as decoded: the members it was sent with (absent
    optional members stay absent), keys sorted, numbers in ECMAScript form.

    Raises:
        CanonicalError: ``plan`` was built by hand with a value JSON cannot carry.
    """
    try:
        builtins = msgspec.to_builtins(plan)
    except (TypeError, ValueError) as exc:
        raise CanonicalError.one("$", f"not a JSON value: {exc}") from exc
    return jcs_dumps(builtins)
