"""The evaluator core: raw PTY bytes in, chunk by chunk; evidence out (sans-IO).

The PTY drain hands every chunk it reads to :meth:`StreamEvaluator.feed` before the
transcript ring can evict it, reports what the ring evicted with
:meth:`~StreamEvaluator.note_evicted`, and calls :meth:`~StreamEvaluator.finish` once the
stream has ended::

    raw chunk ─┬─► SHA-256, byte count
               ├─► strict UTF-8 check ─────────────────► valid | invalid@n | truncated@n
               ├─► forbidden literals (raw bytes) ─────► first raw offsets
               └─► normalizer glove-text-v1 ─► text ─┬─► required literals ─► first text offsets
                                                     └─► forbidden literals ► first text offsets

Everything but the digest is done by one scanner (``_scan.py``): the C extension
``glove.evaluate._cscan`` where it is built (:data:`NATIVE_SCANNER`), else the pure-Python
one; they give the same evidence, byte for byte, and the normalizer's version is the same
either way.

Nothing in the stream is interpreted: output that looks like JSON, a receipt or a verdict
is text like any other, and only the literals of the fixture are looked for in it. The
evidence does not depend on how the stream was cut into chunks.

Memory does not grow with the stream. The C scanner holds an automaton built once from
the literals (about 13 bytes per literal byte, plus a dense table of at most 1 MiB), and a
64 KiB text buffer; the pure-Python one, beyond the chunk being fed and its normalized
text (both transient), the literals, the normalizer's state (an integer and at most two
bytes), the UTF-8 decoder's (at most three bytes), and per literal stream one tail of
``L - 1`` bytes plus one boundary window of ``2 (L - 1)`` (``L`` the longest literal),
about 20 KiB at the bounds of the DSL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final

import msgspec

from glove.evaluate import _scan
from glove.evaluate._fixture import SHA256_PREFIX, Fixture, literal_problems
from glove.evaluate._normalize import NORMALIZER_VERSION
from glove.evaluate._utf8 import Utf8State
from glove.evaluate.errors import EvidenceError, FixtureError

#: The version of the evidence format (the fields of :class:`Evidence`).
EVIDENCE_VERSION: Final = 1


class Evidence(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What the evaluator saw of one stream; everything the verdict needs from it.

    Offsets are 0-based byte offsets: ``raw`` ones into the raw stream, ``text`` ones
    into the normalized text (the raw stream with escape sequences and controls removed
    by :attr:`normalizer`).

    Attributes:
        version: :data:`EVIDENCE_VERSION`.
        normalizer: the normalizer's name and version (``glove-text-v1``).
        bytes_total: raw bytes seen.
        bytes_evicted: raw bytes the caller's transcript ring evicted (after they were
            seen here); the verdict does not depend on it.
        text_bytes: length of the normalized text.
        sha256: ``"sha256:<64 hex>"`` of the raw stream.
        utf8: ``valid``, ``invalid`` (an ill-formed sequence) or ``truncated`` (the stream
            ended inside a multibyte sequence).
        utf8_offset: where the first ill-formed or the truncated sequence starts, or None.
        required_text: per required literal of the fixture, in order, its first text
            offset, or None.
        forbidden_raw: per forbidden literal, its first raw offset, or None.
        forbidden_text: per forbidden literal, its first text offset, or None.
    """

    version: int = EVIDENCE_VERSION
    normalizer: str = NORMALIZER_VERSION
    bytes_total: int
    bytes_evicted: int
    text_bytes: int
    sha256: str
    utf8: Utf8State
    utf8_offset: int | None
    required_text: tuple[int | None, ...]
    forbidden_raw: tuple[int | None, ...]
    forbidden_text: tuple[int | None, ...]


class StreamEvaluator:
    """Evaluates one raw stream against one fixture (module docstring).

    ``native`` picks the scanner: the C one (True), the pure-Python one (False), or the C
    one where it is built (None, the default). The evidence is the same either way.

    Raises (constructor):
        FixtureError: ``fixture`` breaks a bound of the DSL (a hand-built fixture; one
            from :func:`~glove.evaluate.decode_fixture` never does).
        EvidenceError: ``native`` is True but the C scanner is not built.
    """

    __slots__ = ("_evicted", "_finished", "_hash", "_scan", "_total", "fixture", "native")

    def __init__(self, fixture: Fixture, *, native: bool | None = None) -> None:
        problems = literal_problems(fixture)
        if problems:
            raise FixtureError(problems)
        if native is None:
            native = _scan.NATIVE_SCANNER
        elif native and not _scan.NATIVE_SCANNER:
            raise EvidenceError(
                "the C scanner glove.evaluate._cscan is not built (or is stale): "
                "reinstall glove where a C compiler and the Python headers are present"
            )
        self.fixture = fixture
        self.native: bool = native  # whether the C scanner evaluates this stream
        required = [literal.encode("utf-8") for literal in fixture.required]
        forbidden = [literal.encode("utf-8") for literal in fixture.forbidden]
        self._scan: _scan.Scan = (
            _scan.NativeScan(required, forbidden)
            if native
            else _scan.PythonScan(required, forbidden)
        )
        self._hash = hashlib.sha256()
        self._total = 0
        self._evicted = 0
        self._finished = False

    @property
    def bytes_total(self) -> int:
        """Raw bytes seen so far."""
        return self._total

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        """Take the next raw chunk of the stream (any size, empty included).

        Raises:
            EvidenceError: the stream was already finished.
        """
        if self._finished:
            raise EvidenceError("bytes fed to an evaluator after finish()")
        if not isinstance(chunk, bytes):
            chunk = bytes(memoryview(chunk))
        if not chunk:
            return
        self._total += len(chunk)
        self._hash.update(chunk)
        self._scan.feed(chunk)

    def note_evicted(self, count: int) -> None:
        """Record that the caller's ring evicted ``count`` more bytes (already fed).

        Raises:
            EvidenceError: ``count`` is negative, or more bytes would be evicted than
                were seen (the ring can only evict what the evaluator was fed first).
        """
        if count < 0:
            raise EvidenceError(f"an eviction of {count} bytes")
        if self._evicted + count > self._total:
            raise EvidenceError(
                f"{self._evicted + count} bytes evicted of {self._total} seen: the ring "
                "evicted bytes the evaluator was never fed"
            )
        self._evicted += count

    def finish(self) -> Evidence:
        """End the stream and return its evidence (once).

        Raises:
            EvidenceError: the stream was already finished.
        """
        if self._finished:
            raise EvidenceError("finish() called twice")
        self._finished = True
        scanned = self._scan.finish()
        return Evidence(
            bytes_total=self._total,
            bytes_evicted=self._evicted,
            text_bytes=scanned.text_bytes,
            sha256=SHA256_PREFIX + self._hash.hexdigest(),
            utf8=scanned.utf8,
            utf8_offset=scanned.utf8_offset,
            required_text=scanned.required_text,
            forbidden_raw=scanned.forbidden_raw,
            forbidden_text=scanned.forbidden_text,
        )


def evaluate_stream(
    fixture: Fixture,
    chunks: Iterable[bytes | bytearray | memoryview],
    *,
    evicted: int = 0,
    native: bool | None = None,
) -> Evidence:
    """The evidence of a whole stream given as chunks (a replay, or a test); ``native``
    as for :class:`StreamEvaluator`.

    Raises:
        FixtureError: ``fixture`` breaks a bound of the DSL.
        EvidenceError: ``evicted`` is negative or more than the stream's length, or
            ``native`` is True but the C scanner is not built.
    """
    evaluator = StreamEvaluator(fixture, native=native)
    for chunk in chunks:
        evaluator.feed(chunk)
    evaluator.note_evicted(evicted)
    return evaluator.finish()
