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

#: Sorted keys, compact: RFC 8785's form of a value :func:`_plain` accepts.
_SORTED: Final = msgspec.json.Encoder(order="sorted")
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


class _Fault(Exception):
    """A value with no canonical form; ``where`` collects the path on the way out (so a
    successful encoding never builds a path string)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.where: list[str | int] = []

    def path(self) -> str:
        path = "$"
        for step in reversed(self.where):
            path = f"{path}[{step}]" if isinstance(step, int) else member_path(path, step)
        return path


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or f"\\u{ord(char):04x}"


def _string(text: str) -> str:
    """The quoted, escaped form of ``text`` (a lone surrogate is caught when the whole output
    is encoded to UTF-8, or when a key is sorted by its UTF-16 form)."""
    if _MUST_ESCAPE.search(text) is None:
        return f'"{text}"'
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


def _scalar(value: object) -> str:
    """The encoding of a JSON scalar.

    Raises:
        _Fault: not a JSON scalar, or a number RFC 8785 cannot write exactly.
    """
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(int(value))
        raise _Fault("an integer beyond +-(2**53 - 1) is not exact as an IEEE-754 double")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Fault(f"{value!r} is not a JSON number")
        return ecmascript_number(value)
    raise _Fault(f"{type(value).__name__} is not a JSON value")


def _utf16(key: str) -> bytes:
    try:
        return key.encode("utf-16-be")
    except UnicodeEncodeError as exc:
        raise _Fault(_surrogate_message(key, exc)) from exc


def _surrogate_message(text: str, exc: UnicodeEncodeError) -> str:
    return f"a lone surrogate U+{ord(text[exc.start]):04X} has no UTF-8 encoding"


def _encode(value: object, depth: int, out: list[str]) -> None:
    """Append the encoding of ``value``; ``depth`` counts the containers around it.

    Raises:
        _Fault: a value with no canonical form, its path collected on the way out.
    """
    if not isinstance(value, list | tuple | dict):
        out.append(_scalar(value))
        return
    if depth >= MAX_PLAN_DEPTH:
        raise _Fault(f"nested deeper than {MAX_PLAN_DEPTH} containers")
    if not isinstance(value, dict):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            try:
                _encode(item, depth + 1, out)
            except _Fault as fault:
                fault.where.append(index)
                raise
        out.append("]")
        return
    members: list[tuple[bytes, str, object]] = []
    for key, item in value.items():
        if not isinstance(key, str):
            raise _Fault(f"an object key must be a string, not {key!r}")
        try:
            members.append((_utf16(key), key, item))
        except _Fault as fault:
            fault.where.append(key)
            raise
    members.sort(key=lambda member: member[0])
    out.append("{")
    for index, (_, key, item) in enumerate(members):
        if index:
            out.append(",")
        out.append(_string(key))
        out.append(":")
        try:
            _encode(item, depth + 1, out)
        except _Fault as fault:
            fault.where.append(key)
            raise
    out.append("}")


def _find_lone_surrogate(value: object) -> _Fault | None:
    """Where the first string holding a lone surrogate is (only after encoding failed)."""
    stack: list[tuple[object, list[str | int]]] = [(value, [])]
    while stack:
        node, where = stack.pop()
        texts = [node] if isinstance(node, str) else []
        if isinstance(node, dict):
            texts = [key for key in node if isinstance(key, str)]
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                fault = _Fault(_surrogate_message(text, exc))
                fault.where = list(reversed(where if text is node else [*where, text]))
                return fault
        if isinstance(node, dict):
            stack.extend((item, [*where, key]) for key, item in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((item, [*where, index]) for index, item in enumerate(node))
    return None


class _NotPlain(Exception):
    """A value :func:`_plain` leaves to the general encoder."""


def _plain(value: object, depth: int) -> object:
    """``value`` as msgspec writes in its RFC 8785 form, or :class:`_NotPlain`.

    Accepted: containers within the depth limit whose object keys are ASCII (byte order is
    then UTF-16 order), strings, booleans, null, integers within +-(2**53 - 1), all of their
    exact built-in types, and integral floats within +-2**53 (ECMAScript writes those as
    the integer: ``900.0`` is ``900``; they are returned as ints). Any other float is the
    general encoder's (its notation is not msgspec's). msgspec escapes strings exactly as
    RFC 8785 does (the controls, ``"`` and ``\\``) and refuses a lone surrogate, as
    :func:`jcs_dumps` does.

    Raises:
        _NotPlain: the value needs the general encoder.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:  # type: ignore[operator]
            return value
    elif kind is float:
        if value.is_integer() and -(2**53) <= value <= 2**53:  # type: ignore[attr-defined,operator]
            return int(value)  # type: ignore[call-overload]
    elif depth < MAX_PLAN_DEPTH and kind is dict:
        out: dict[str, object] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not key.isascii():
                raise _NotPlain
            out[key] = _plain(item, depth + 1)
        return out
    elif depth < MAX_PLAN_DEPTH and (kind is list or kind is tuple):
        return [_plain(item, depth + 1) for item in value]  # type: ignore[attr-defined]
    raise _NotPlain


def jcs_dumps(value: object) -> bytes:
    """The RFC 8785 canonical encoding of a JSON value (dicts with str keys, lists, tuples,
    str, int, float, bool, None), as UTF-8 bytes.

    A value :func:`_plain` accepts (a launch binding, a receipt: ASCII keys, no fraction)
    is encoded by msgspec, byte for byte the same, several times faster.

    Raises:
        CanonicalError: the value is not JSON, holds a lone surrogate, NaN, an infinity or an
            integer outside +-(2**53 - 1), or nests deeper than MAX_PLAN_DEPTH.
    """
    try:
        return _SORTED.encode(_plain(value, 0))
    except (_NotPlain, UnicodeEncodeError):
        pass  # the general path (a lone surrogate: it says where)
    out: list[str] = []
    try:
        _encode(value, 0, out)
        return "".join(out).encode("utf-8")
    except _Fault as fault:
        raise CanonicalError.one(fault.path(), fault.message) from fault
    except UnicodeEncodeError as exc:
        located = _find_lone_surrogate(value) or _Fault(_surrogate_message(exc.object, exc))
        raise CanonicalError.one(located.path(), located.message) from exc


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
