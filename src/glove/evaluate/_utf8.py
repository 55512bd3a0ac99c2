"""A strict, incremental UTF-8 check of the raw stream (sans-IO).

The raw bytes are never replaced, decoded for display, or repaired here: the check only
says whether the whole stream is valid UTF-8 and, if not, where it first stops being
(the offset of the first byte of the first ill-formed sequence, as CPython's strict
decoder reports it: overlong forms, encoded surrogates and code points past U+10FFFF
are ill-formed). A stream that ends inside a multibyte sequence is *truncated*, with the
offset of that sequence's first byte. Once the first fault is known the rest of the
stream is only counted.
"""

from __future__ import annotations

import codecs
from typing import Final, Literal

Utf8State = Literal["valid", "invalid", "truncated"]

VALID: Final = "valid"
INVALID: Final = "invalid"
TRUNCATED: Final = "truncated"


class Utf8Check:
    """Feed the stream chunk by chunk, then :meth:`result` once it has ended.

    Memory: the decoder's pending bytes (at most three).
    """

    __slots__ = ("_decoder", "_error", "_seen")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._seen = 0
        self._error: int | None = None

    def feed(self, chunk: bytes) -> None:
        """Check the next chunk."""
        if self._error is None:
            pending = len(self._decoder.getstate()[0])
            try:
                self._decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                # The decoder reads its pending bytes and the chunk as one buffer.
                self._error = self._seen - pending + exc.start
        self._seen += len(chunk)

    def result(self) -> tuple[Utf8State, int | None]:
        """``("valid", None)``, ``("invalid", offset)`` or ``("truncated", offset)`` for
        the stream fed so far, taken as complete."""
        if self._error is not None:
            return INVALID, self._error
        pending = self._decoder.getstate()[0]
        if not pending:
            return VALID, None
        # The incremental decoder also holds back some sequences that are already
        # ill-formed (ED A0..BF, an encoded surrogate, when nothing follows it): decode the
        # held bytes as final to tell a cut sequence from a bad one.
        try:
            codecs.utf_8_decode(pending, "strict", True)
        except UnicodeDecodeError as exc:
            offset = self._seen - len(pending) + exc.start
            if exc.reason == "unexpected end of data":
                return TRUNCATED, offset
            return INVALID, offset
        raise AssertionError(f"the decoder held back {pending!r}, which decodes")
