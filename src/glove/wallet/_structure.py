"""The structural pre-scan every wallet frame passes before any typed decoding (sans-IO).

Typed decoders disagree about JSON the standard leaves open: with a repeated key msgspec
keeps the last value, others keep the first, and a key spelled ``"\\u0061"`` is the same
key as ``"a"`` only after unescaping. A value kept raw for a second decoding step (the
``result`` object of a status response) is not looked at by the first decoder at all. So
before a frame reaches msgspec, this scan walks the whole of it, raw parts included, and
refuses:

* a frame over :data:`MAX_FRAME_BYTES`, before a single byte of it is decoded;
* bytes that are not UTF-8 (overlong forms and encoded surrogates included);
* anything that is not exactly one RFC 8259 JSON value with JSON whitespace around it;
* more than :data:`MAX_NESTING` nested containers (objects and arrays together);
* a key repeated in one object, compared after unescaping, at every level;
* a string whose escapes decode to an unpaired surrogate (not a Unicode string);
* a number longer than :data:`MAX_NUMBER_CHARS` (nothing in this protocol needs one, and
  a 60,000-digit integer costs quadratic time to convert).

The scan is a recursive descent whose depth is bounded by :data:`MAX_NESTING`; each token
is matched by one compiled regular expression, so the per-byte work happens in C.
"""

from __future__ import annotations

import json
import re
from typing import Final

from glove.wallet.errors import WalletFrameError

MAX_FRAME_BYTES: Final = 64 * 1024
"""Largest frame, in bytes, the bridge reads or the adapter decodes (a 64-KiB limit)."""

MAX_NESTING: Final = 64
"""Most nested containers (objects and arrays) a frame may hold; 65 is refused."""

MAX_NUMBER_CHARS: Final = 40
"""Longest number token, in characters: a JSON-RPC id needs 16, a double about 24."""

_WS: Final = re.compile(r"[ \t\n\r]*")
# A JSON string, as an "unrolled loop": a run of characters other than the quote, the
# backslash and C0 controls, then any number of (escape, run). Every character has exactly
# one way to match, so a bad string fails in linear time. No possessive quantifiers:
# CPython 3.11.2's engine lets "(?:\.[0-9]++)?+" match "1." (found by this module's tests).
_STRING: Final = re.compile(
    r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"'
)
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS: Final = ("true", "false", "null")
_NUMBER_START: Final = frozenset("-0123456789")


def check_structure(frame: bytes) -> None:
    """Refuse a frame whose structure a typed decoder could read ambiguously.

    Returns None when ``frame`` is one well-formed JSON value within the bounds above; the
    caller then decodes it with a strict typed decoder.

    Raises:
        WalletFrameError: ``reason`` is ``frame_too_large`` (checked before anything else),
            ``invalid_utf8``, ``malformed``, ``too_deep``, ``duplicate_key``,
            ``invalid_string`` or ``number_too_long``.
    """
    if len(frame) > MAX_FRAME_BYTES:
        raise WalletFrameError(
            "frame_too_large", f"{len(frame)} bytes exceed the {MAX_FRAME_BYTES}-byte limit"
        )
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WalletFrameError("invalid_utf8", f"not UTF-8 at byte {exc.start}") from exc
    scanner = _Scanner(text)
    scanner.value(0)
    scanner.skip_ws()
    if scanner.pos != len(text):
        raise WalletFrameError("malformed", f"trailing data at character {scanner.pos}")


class _Scanner:
    """One pass over one frame's text; ``pos`` is the next character to read."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_ws(self) -> None:
        match = _WS.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()

    def _fail(self, what: str) -> WalletFrameError:
        if self.pos >= len(self.text):
            return WalletFrameError("malformed", f"{what}: the frame ended (truncated)")
        return WalletFrameError("malformed", f"{what} at character {self.pos}")

    def value(self, depth: int) -> None:
        """Scan one value; ``depth`` is the number of containers already open around it."""
        self.skip_ws()
        text, pos = self.text, self.pos
        if pos >= len(text):
            raise self._fail("expected a value")
        char = text[pos]
        if char == "{":
            self._object(depth + 1)
        elif char == "[":
            self._array(depth + 1)
        elif char == '"':
            self._string()
        elif char in _NUMBER_START:
            self._number()
        else:
            for literal in _LITERALS:
                if text.startswith(literal, pos):
                    self.pos = pos + len(literal)
                    return
            raise self._fail("expected a value")

    def _enter(self, depth: int) -> None:
        if depth > MAX_NESTING:
            raise WalletFrameError(
                "too_deep", f"more than {MAX_NESTING} nested containers at character {self.pos}"
            )
        self.pos += 1  # the opening bracket

    def _object(self, depth: int) -> None:
        self._enter(depth)
        seen: set[str] = set()
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return
        while True:
            self.skip_ws()
            if not self.text.startswith('"', self.pos):
                raise self._fail("expected an object key")
            start = self.pos
            key = self._string()
            if key in seen:
                raise WalletFrameError(
                    "duplicate_key", f"object key repeated at character {start} (after unescaping)"
                )
            seen.add(key)
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                raise self._fail("expected ':'")
            self.pos += 1
            self.value(depth)
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("}", self.pos):
                self.pos += 1
                return
            else:
                raise self._fail("expected ',' or '}'")

    def _array(self, depth: int) -> None:
        self._enter(depth)
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return
        while True:
            self.value(depth)
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif self.text.startswith("]", self.pos):
                self.pos += 1
                return
            else:
                raise self._fail("expected ',' or ']'")

    def _string(self) -> str:
        """Scan one string and return its unescaped value."""
        match = _STRING.match(self.text, self.pos)
        if match is None:
            raise self._fail("invalid string")
        start = self.pos
        self.pos = match.end()
        token = match.group()
        if "\\" not in token:
            return token[1:-1]  # decoded from UTF-8, so it holds no surrogate
        value: str = json.loads(token)  # the token is a valid JSON string: only escapes left
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise WalletFrameError(
                "invalid_string", f"unpaired surrogate escape in the string at character {start}"
            ) from exc
        return value

    def _number(self) -> None:
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self._fail("invalid number")
        if match.end() - self.pos > MAX_NUMBER_CHARS:
            raise WalletFrameError(
                "number_too_long",
                f"a number of {match.end() - self.pos} characters at character {self.pos} "
                f"(limit {MAX_NUMBER_CHARS})",
            )
        self.pos = match.end()
