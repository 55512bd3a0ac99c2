"""JSON pointers (RFC 6901): parsing, formatting and resolution against decoded JSON.

A pointer is parsed once, when the policy is compiled, into a tuple of reference tokens;
resolving it against a tool call's arguments is then a short loop with no allocation.
Resolution never raises: a step that cannot be taken yields :data:`MISSING`.
"""

import re
from collections.abc import Mapping

__all__ = [
    "MAX_POINTER_CHARS",
    "MISSING",
    "Missing",
    "PointerSyntaxError",
    "format_pointer",
    "parse_pointer",
    "resolve_pointer",
]

MAX_POINTER_CHARS = 1024
"""Longest pointer text a policy may hold, in characters."""

# RFC 6901 section 4: an array index is "0" or digits without a leading zero.
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
# The only escapes are ~0 and ~1; any other "~" is a syntax error.
_BAD_ESCAPE = re.compile(r"~(?![01])")


class Missing:
    """The type of :data:`MISSING`, the result of a pointer that leads nowhere."""

    _instance: "Missing | None" = None

    def __new__(cls) -> "Missing":
        """Return the one instance."""
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        """Show the sentinel by name."""
        return "MISSING"

    def __bool__(self) -> bool:
        """A missing value is falsy, so ``if value:`` reads naturally."""
        return False


MISSING = Missing()
"""Sentinel returned by :func:`resolve_pointer` when a step cannot be taken."""


class PointerSyntaxError(ValueError):
    """A pointer text that is not a valid RFC 6901 JSON pointer (compile time only)."""


def parse_pointer(text: str) -> tuple[str, ...]:
    """Parse an RFC 6901 pointer into its unescaped reference tokens.

    Args:
        text: ``""`` for the whole document, or ``/``-separated tokens.

    Returns:
        The tokens, with ``~1`` turned into ``/`` and ``~0`` into ``~``.

    Raises:
        PointerSyntaxError: the text is too long, does not start with ``/`` or holds an
            escape other than ``~0`` and ``~1``.
    """
    if len(text) > MAX_POINTER_CHARS:
        raise PointerSyntaxError(f"longer than {MAX_POINTER_CHARS} characters")
    if text == "":
        return ()
    if not text.startswith("/"):
        raise PointerSyntaxError("must be empty or start with '/'")
    if _BAD_ESCAPE.search(text):
        raise PointerSyntaxError("'~' must be followed by '0' or '1'")
    # Order matters (RFC 6901 section 4): ~1 first, then ~0, so "~01" becomes "~1".
    return tuple(part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/"))


def format_pointer(tokens: tuple[str, ...]) -> str:
    """Format reference tokens back into pointer text (the inverse of :func:`parse_pointer`).

    Raises:
        Nothing.
    """
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens)


def resolve_pointer(tokens: tuple[str, ...], document: object) -> object:
    """Return the value the pointer designates in ``document``, or :data:`MISSING`.

    Objects are :class:`~collections.abc.Mapping` instances, arrays are ``list`` or
    ``tuple`` (never ``str``/``bytes``). On an array, a token must be a canonical decimal
    index; ``-`` (the element after the last) and out-of-range indexes are missing, as is
    any step into a scalar.

    Raises:
        Nothing.
    """
    value = document
    for token in tokens:
        if isinstance(value, Mapping):
            if token not in value:
                return MISSING
            value = value[token]
        elif isinstance(value, list | tuple):
            if _ARRAY_INDEX.fullmatch(token) is None:
                return MISSING
            # A canonical index longer than the array's decimal length is out of range;
            # checking the length first keeps int() away from million-digit tokens.
            if len(token) > len(str(len(value))):
                return MISSING
            index = int(token)
            if index >= len(value):
                return MISSING
            value = value[index]
        else:
            return MISSING
    return value
