"""The per-byte work of the evaluator but the digest: the strict UTF-8 check, the
``glove-text-v1`` text and the literal search, raw and in the text (sans-IO).

Two implementations with one contract, the same result however the stream is cut:

* :class:`NativeScan`, the C extension ``glove.evaluate._cscan`` (``_cscan.c``): one call
  per chunk checks its UTF-8, normalizes it into a bounded buffer and walks one
  Aho-Corasick automaton over all the fixture's literals twice at once, over the raw
  bytes (forbidden literals) and over the text (required and forbidden);
* :class:`PythonScan`, the same from CPython's own C primitives (the incremental UTF-8
  decoder, ``re``, ``bytes.translate``, ``bytes.find``): the reference, and the fallback
  where the extension was not built (no compiler where glove was installed).

:data:`NATIVE_SCANNER` says whether the extension is there and of this version (an
editable checkout can hold a stale build: it is then not used). Property tests and a fuzz
target hold the two to the same evidence on random streams, cuts and fixtures.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

from glove.evaluate._match import LiteralScan
from glove.evaluate._normalize import CONTROLS, NORMALIZER_VERSION, TextNormalizer
from glove.evaluate._utf8 import Utf8Check, Utf8State

#: The interface version of ``_cscan`` this module speaks (its ``ABI_VERSION``).
CSCAN_ABI: Final = 1

try:
    from glove.evaluate import _cscan
except ImportError:  # built without a compiler: the pure-Python scanner, same evidence
    _native = False
else:
    _native = (
        getattr(_cscan, "ABI_VERSION", None) == CSCAN_ABI
        and getattr(_cscan, "NORMALIZER_VERSION", None) == NORMALIZER_VERSION
    )

NATIVE_SCANNER: Final[bool] = _native
"""Whether the C scanner is built (and current): :class:`StreamEvaluator` uses it then."""


class Scanned(NamedTuple):
    """What a scan found in one whole stream."""

    text_bytes: int
    utf8: Utf8State
    utf8_offset: int | None
    required_text: tuple[int | None, ...]
    forbidden_raw: tuple[int | None, ...]
    forbidden_text: tuple[int | None, ...]


class Scan(Protocol):
    """One stream's scan: ``feed`` every chunk in order (non-empty), ``finish`` once."""

    def feed(self, chunk: bytes) -> None:
        """Scan the next chunk."""

    def finish(self) -> Scanned:
        """End the stream; what was found."""


class NativeScan:
    """The C scanner (module docstring); only when :data:`NATIVE_SCANNER`."""

    __slots__ = ("_nreq", "_scanner")

    def __init__(self, required: list[bytes], forbidden: list[bytes]) -> None:
        literals = [*required, *forbidden]
        self._nreq = len(required)
        automaton = _cscan.Automaton(literals)
        self._scanner = _cscan.Scanner(
            automaton, range(self._nreq, len(literals)), range(len(literals))
        )

    @property
    def nbytes(self) -> int:
        """Bytes the scanner's tables hold (its automaton's excluded)."""
        return self._scanner.nbytes

    def feed(self, chunk: bytes) -> None:
        """Scan the next chunk."""
        self._scanner.feed(chunk)

    def finish(self) -> Scanned:
        """End the stream; what was found."""
        scanner = self._scanner
        scanner.finish()
        utf8, offset = scanner.utf8
        text = scanner.text_offsets
        return Scanned(
            text_bytes=scanner.text_bytes,
            utf8=utf8,
            utf8_offset=offset,
            required_text=text[: self._nreq],
            forbidden_raw=scanner.raw_offsets[self._nreq :],
            forbidden_text=text[self._nreq :],
        )


class PythonScan:
    """The pure-Python scanner (module docstring).

    One shortcut, exact: a chunk with no ESC and no C2 byte, read from the ground state,
    is its own text less the standalone controls. A forbidden literal without such
    controls that occurs wholly inside that chunk therefore occurs in its text too; so
    while the text search has not found it there, the raw search skips that chunk's
    interior (never its boundary windows). Plain output (``cat``, uncoloured logs) costs
    one search per forbidden literal instead of two.
    """

    __slots__ = (
        "_forbidden_raw",
        "_forbidden_text",
        "_normalizer",
        "_plain_forbidden",
        "_required",
        "_text_bytes",
        "_utf8",
    )

    def __init__(self, required: list[bytes], forbidden: list[bytes]) -> None:
        self._required = LiteralScan(required)
        self._forbidden_raw = LiteralScan(forbidden)
        self._forbidden_text = LiteralScan(forbidden)
        # Forbidden literals a plain chunk's text stands in for (no standalone control).
        self._plain_forbidden = frozenset(
            index
            for index, literal in enumerate(forbidden)
            if literal == literal.translate(None, CONTROLS)
        )
        self._normalizer = TextNormalizer()
        self._utf8 = Utf8Check()
        self._text_bytes = 0

    def feed(self, chunk: bytes) -> None:
        """Scan the next chunk."""
        self._utf8.feed(chunk)
        plain = self._normalizer.settled and b"\x1b" not in chunk and b"\xc2" not in chunk
        text = self._normalizer.feed(chunk)
        if not plain or not self._plain_forbidden:
            self._text(text)
            self._forbidden_raw.feed(chunk)
            return
        before = self._forbidden_text.offsets
        self._text(text)
        after = self._forbidden_text.offsets
        # Found in the text before, or found in this chunk's text: search the raw chunk.
        skip = {
            index
            for index in self._plain_forbidden
            if before[index] is None and after[index] is None
        }
        self._forbidden_raw.feed(chunk, skip)

    def finish(self) -> Scanned:
        """End the stream; what was found."""
        self._text(self._normalizer.finish())
        utf8, offset = self._utf8.result()
        return Scanned(
            text_bytes=self._text_bytes,
            utf8=utf8,
            utf8_offset=offset,
            required_text=self._required.offsets,
            forbidden_raw=self._forbidden_raw.offsets,
            forbidden_text=self._forbidden_text.offsets,
        )

    def _text(self, text: bytes) -> None:
        if text:
            self._text_bytes += len(text)
            self._required.feed(text)
            self._forbidden_text.feed(text)
