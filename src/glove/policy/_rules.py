"""Compiled rules: what the engine evaluates, and the operator tests behind them.

A :class:`ToolRule` is one ``[[tools]]`` table made ready to evaluate; an :class:`ArgRule`
one ``[[tools.args]]`` table, holding its parsed pointer and a test function built once by
the compiler. A test takes the value found at the pointer and returns ``None`` when it
passes or a short phrase saying why not. Phrases never quote the value: reasons end up in
places (agent replies, logs) where argument contents must not leak.
"""

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from glove.policy._paths import DotDot, PathRejected, is_within, normalize_path
from glove.policy._pin import canonical_json
from glove.policy._pointer import MISSING, resolve_pointer
from glove.policy._regex import RegexBudgetExceeded, SafeRegex

__all__ = [
    "MAX_INSPECTED_JSON_BYTES",
    "ArgRule",
    "Test",
    "ToolRule",
    "json_equal",
    "json_type",
    "make_eq",
    "make_in",
    "make_length",
    "make_path",
    "make_prefix",
    "make_range",
    "make_regex",
    "make_type",
]

MAX_INSPECTED_JSON_BYTES = 256
"""A recorded value whose canonical JSON is longer than this is recorded as its digest."""

Test = Callable[[object], str | None]

_SHORT_INT_BOUND = 10**100  # an int below this prints in far fewer than 256 bytes


_JSON_TYPES: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("boolean", bool),  # before "integer": bool is a subclass of int
    ("integer", int),
    ("number", float),
    ("string", str),
    ("array", (list, tuple)),
    ("object", Mapping),
)


def json_type(value: object) -> str | None:
    """The JSON type name of a decoded value, or ``None`` for a non-JSON value.

    Raises:
        Nothing.
    """
    if value is None:
        return "null"
    for kind, classes in _JSON_TYPES:
        if isinstance(value, classes):
            return kind
    return None


def json_equal(left: object, right: object) -> bool:
    """JSON equality: booleans only equal booleans, ``1 == 1.0``, containers compare deeply.

    Recursion stops at the first type difference, so its depth is bounded by the shallower
    side (the policy's own value, when comparing against one).

    Raises:
        RecursionError: both sides are nested deeper than the interpreter allows.
    """
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    left_type, right_type = json_type(left), json_type(right)
    if left_type in ("integer", "number") and right_type in ("integer", "number"):
        return left == right
    if left_type != right_type or left_type is None:
        return False
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return left == right


def _scalar_key(value: object) -> tuple[str, object] | None:
    """A hashable key under which JSON-equal scalars collide (``1`` and ``1.0``, not ``True``)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z", None)
    return None


def make_eq(expected: object) -> Test:
    """Test: the value is JSON-equal to ``expected``.

    Raises:
        Nothing.
    """

    def test(value: object) -> str | None:
        return None if json_equal(value, expected) else "does not equal the required value"

    return test


def make_in(options: list[object]) -> Test:
    """Test: the value is JSON-equal to one of ``options`` (scalars through a set).

    Raises:
        Nothing.
    """
    scalars = {key for option in options if (key := _scalar_key(option)) is not None}
    containers = [option for option in options if _scalar_key(option) is None]

    def test(value: object) -> str | None:
        key = _scalar_key(value)
        if key is not None and key in scalars:
            return None
        if key is None and any(json_equal(value, option) for option in containers):
            return None
        return "is not one of the allowed values"

    return test


def make_prefix(prefix: str) -> Test:
    """Test: the value is a string starting with ``prefix``.

    Raises:
        Nothing.
    """

    def test(value: object) -> str | None:
        if not isinstance(value, str):
            return "is not a string"
        return None if value.startswith(prefix) else "does not start with the required prefix"

    return test


def make_regex(regex: SafeRegex) -> Test:
    """Test: the value is a string the whole of which ``regex`` matches.

    Raises:
        Nothing.
    """

    def test(value: object) -> str | None:
        if not isinstance(value, str):
            return "is not a string"
        try:
            matched = regex.fullmatch(value)
        except RegexBudgetExceeded as exc:
            return f"cannot be matched safely ({exc})"
        return None if matched else "does not match the required pattern"

    return test


def _bounds(low: float | None, high: float | None) -> str:
    return f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"


def make_length(low: int | None, high: int | None) -> Test:
    """Test: the value's length (string characters, array items, object keys) is in bounds.

    Raises:
        Nothing.
    """

    def test(value: object) -> str | None:
        if not isinstance(value, str | list | tuple | Mapping):
            return "is not a string, array or object"
        size = len(value)
        if (low is not None and size < low) or (high is not None and size > high):
            return f"has length {size}, outside {_bounds(low, high)}"
        return None

    return test


def make_range(low: float | None, high: float | None) -> Test:
    """Test: the value is a finite number (not a boolean) within inclusive bounds.

    Raises:
        Nothing.
    """

    def test(value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "is not a number"
        if isinstance(value, float) and not math.isfinite(value):
            return "is not a finite number"
        # Python compares int and float exactly, so a huge integer is never rounded in.
        if (low is not None and value < low) or (high is not None and value > high):
            return f"is outside {_bounds(low, high)}"
        return None

    return test


def make_path(roots: tuple[str, ...], base: str | None, dotdot: DotDot) -> Test:
    """Test: the value is a path that normalizes to somewhere inside one of ``roots``.

    Raises:
        Nothing.
    """

    def test(value: object) -> str | None:
        if not isinstance(value, str):
            return "is not a string"
        try:
            path = normalize_path(value, base=base, dotdot=dotdot)
        except PathRejected as exc:
            return f"is refused: {exc}"
        if any(is_within(path, root) for root in roots):
            return None
        return "is outside the allowed roots"

    return test


def make_type(types: frozenset[str]) -> Test:
    """Test: the value has one of the JSON ``types`` (``integer`` counts as ``number``).

    A float with an integral value (``1.0``) counts as ``integer``, as in JSON Schema.

    Raises:
        Nothing.
    """
    shown = ", ".join(sorted(types))

    def test(value: object) -> str | None:
        kind = json_type(value)
        if kind in types:
            return None
        if kind == "integer" and "number" in types:
            return None
        integral = isinstance(value, float) and value.is_integer()
        if kind == "number" and "integer" in types and integral:
            return None
        return f"has type {kind or 'unknown'}, not one of [{shown}]"

    return test


def _record(value: object, audit: str) -> object:
    """The form of ``value`` an audit record may hold under the rule's ``audit`` mode."""
    if audit == "value":
        # Shortcuts for what cannot exceed the bound: scalars, and strings short enough
        # that even all-escaped (6 bytes a character, plus quotes) they fit.
        if value is None or isinstance(value, bool | int | float):
            if not isinstance(value, int) or abs(value) < _SHORT_INT_BOUND:
                return value
        elif isinstance(value, str) and len(value) * 6 + 2 <= MAX_INSPECTED_JSON_BYTES:
            return value
    try:
        encoded = canonical_json(value)
    except (TypeError, RecursionError):
        return "unencodable"
    if audit == "value" and len(encoded) <= MAX_INSPECTED_JSON_BYTES:
        return value
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


@dataclass(frozen=True, slots=True)
class ArgRule:
    """One compiled argument rule.

    Attributes:
        label: where the rule sits, e.g. ``tools[2].args[0]`` (or ``<id>.args[0]``).
        pointer: the pointer text as written.
        tokens: the parsed pointer.
        op: the operator name.
        optional: a missing value passes.
        each: the value must be an array; the test applies to every element.
        audit: ``value``, ``digest`` or ``omit``: how inspected values are recorded.
        test: the operator test.
    """

    label: str
    pointer: str
    tokens: tuple[str, ...]
    op: str
    optional: bool
    each: bool
    audit: str
    test: Test

    def evaluate(self, arguments: object, inspected: dict[str, object]) -> str | None:
        """Apply the rule; record what it looked at; return ``None`` or why it failed.

        Raises:
            RecursionError: a pathologically nested value (the engine turns it into a deny).
        """
        value = resolve_pointer(self.tokens, arguments)
        if value is MISSING:
            return None if self.optional else "is missing"
        if not self.each:
            self._note(inspected, self.pointer, value)
            return self.test(value)
        if not isinstance(value, list | tuple):
            self._note(inspected, self.pointer, value)
            return "is not an array (the rule applies to each element)"
        for index, item in enumerate(value):
            self._note(inspected, f"{self.pointer}/{index}", item)
            problem = self.test(item)
            if problem is not None:
                return f"element {index} {problem}"
        return None

    def _note(self, inspected: dict[str, object], pointer: str, value: object) -> None:
        if self.audit != "omit":
            inspected[pointer] = _record(value, self.audit)


@dataclass(frozen=True, slots=True)
class ToolRule:
    """One compiled ``[[tools]]`` rule.

    Attributes:
        label: the rule's ``id``, or ``tools[N]``.
        name: the exact name or glob it covers.
        is_glob: whether ``name`` holds a wildcard.
        allow: ``True`` for ``effect = "allow"``.
        description_sha256: the pinned description digest, if any.
        schema_sha256: the pinned input schema digest, if any.
        definition_sha256: the pinned digest of the whole tool object, if any.
        strict_args: whether top-level arguments no rule names are refused.
        named_args: the top-level keys the argument rules name.
        args: the argument rules, in file order.
    """

    label: str
    name: str
    is_glob: bool
    allow: bool
    description_sha256: str | None
    schema_sha256: str | None
    definition_sha256: str | None
    strict_args: bool
    named_args: frozenset[str]
    args: tuple[ArgRule, ...]
