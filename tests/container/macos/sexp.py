"""An independent reader for SBPL profiles, written for the tests (not shared with the renderer).

It reads the Scheme subset SBPL profiles use: lists, symbols, numbers, ``"strings"`` with the
escapes TinyScheme accepts (``\\\\ \\" \\n \\t \\r``), ``#"regex"`` literals, and ``;``
comments to the end of the line. Anything else (an unterminated string, an unknown escape, a
stray ``)``, a block comment) is a :class:`ParseError`, so a profile that reads cleanly has
exactly the structure this reader reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


class ParseError(ValueError):
    """The text is not a well-formed profile."""


@dataclass(frozen=True)
class Sym:
    """A symbol such as ``allow`` or ``file-read*``."""

    name: str


@dataclass(frozen=True)
class Str:
    """A string literal, unescaped."""

    value: str


@dataclass(frozen=True)
class Regex:
    """A ``#"..."`` regex literal."""

    pattern: str


Node = Union[Sym, Str, Regex, int, list["Node"]]  # noqa: UP007 - a runtime alias, not an annotation

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_DELIMITERS = set('()";') | {" ", "\t", "\n", "\r"}


def _read_string(text: str, i: int) -> tuple[str, int]:
    """Read a string body starting after its opening quote; return (value, index after)."""
    out: list[str] = []
    while i < len(text):
        char = text[i]
        if char == '"':
            return "".join(out), i + 1
        if char == "\\":
            if i + 1 >= len(text) or text[i + 1] not in _ESCAPES:
                raise ParseError(f"unknown escape at {i}: {text[i : i + 2]!r}")
            out.append(_ESCAPES[text[i + 1]])
            i += 2
            continue
        if char in "\n\r":
            raise ParseError(f"raw line break inside a string at {i}")
        out.append(char)
        i += 1
    raise ParseError("unterminated string")


def parse(text: str) -> list[Node]:
    """Return the top-level forms of ``text``.

    Raises:
        ParseError: the text is not well-formed.
    """
    stack: list[list[Node]] = [[]]
    i = 0
    while i < len(text):
        char = text[i]
        if char in " \t\n\r":
            i += 1
        elif char == ";":
            while i < len(text) and text[i] != "\n":
                i += 1
        elif char == "(":
            stack.append([])
            i += 1
        elif char == ")":
            if len(stack) == 1:
                raise ParseError(f"unbalanced ')' at {i}")
            done = stack.pop()
            stack[-1].append(done)
            i += 1
        elif char == '"':
            value, i = _read_string(text, i + 1)
            stack[-1].append(Str(value))
        elif text.startswith('#"', i):
            end = text.index('"', i + 2)
            stack[-1].append(Regex(text[i + 2 : end]))
            i = end + 1
        elif text.startswith("#|", i):
            raise ParseError("block comments are not expected in a rendered profile")
        else:
            start = i
            while i < len(text) and text[i] not in _DELIMITERS:
                i += 1
            token = text[start:i]
            stack[-1].append(int(token) if token.isdigit() else Sym(token))
    if len(stack) != 1:
        raise ParseError("unbalanced '(': a form is not closed")
    return stack[0]


def strings(node: Node) -> list[str]:
    """Every string literal inside ``node``, in order."""
    if isinstance(node, Str):
        return [node.value]
    if isinstance(node, list):
        return [value for child in node for value in strings(child)]
    return []
