"""Exposed tool names and the globs that match them.

Exposed names are ``<upstream_id>__<tool>``, kept to ``[A-Za-z0-9_-]`` and at most
:data:`MAX_TOOL_NAME_CHARS` characters. Globs add ``*`` (any run, possibly empty) and
``?`` (one character); nothing else, so matching needs no regex and cannot run away.
"""

import re

__all__ = [
    "MAX_GLOB_CHARS",
    "MAX_TOOL_NAME_CHARS",
    "glob_match",
    "is_glob",
    "is_valid_glob",
    "is_valid_tool_name",
]

MAX_TOOL_NAME_CHARS = 64
"""Longest exposed tool name, in characters (MCP clients commonly cap names at 64)."""

MAX_GLOB_CHARS = 128
"""Longest glob in a policy rule, in characters."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,%d}" % MAX_TOOL_NAME_CHARS)  # noqa: UP031 - a regex
_GLOB = re.compile(r"[A-Za-z0-9_*?-]{1,%d}" % MAX_GLOB_CHARS)  # noqa: UP031 - a regex


def is_valid_tool_name(name: object) -> bool:
    """Whether ``name`` is a well-formed exposed tool name.

    Raises:
        Nothing.
    """
    return isinstance(name, str) and _TOOL_NAME.fullmatch(name) is not None


def is_valid_glob(pattern: str) -> bool:
    """Whether ``pattern`` is a well-formed rule name (exact name or glob).

    Raises:
        Nothing.
    """
    return _GLOB.fullmatch(pattern) is not None


def is_glob(pattern: str) -> bool:
    """Whether ``pattern`` uses a wildcard.

    Raises:
        Nothing.
    """
    return "*" in pattern or "?" in pattern


def glob_match(pattern: str, name: str) -> bool:
    """Match ``name`` against ``pattern`` where ``*`` is any run and ``?`` one character.

    The classic two-pointer wildcard match: on a mismatch, backtrack only to the most
    recent ``*``, so the work is at most ``len(pattern) * len(name)`` steps.

    Raises:
        Nothing.
    """
    p = n = 0
    star_p = -1
    star_n = 0
    while n < len(name):
        if p < len(pattern) and pattern[p] in ("?", name[n]) and pattern[p] != "*":
            p += 1
            n += 1
        elif p < len(pattern) and pattern[p] == "*":
            star_p = p
            star_n = n
            p += 1
        elif star_p >= 0:
            # Let the last star swallow one more character and retry after it.
            star_n += 1
            n = star_n
            p = star_p + 1
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)
