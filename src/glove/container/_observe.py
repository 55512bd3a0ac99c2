"""What a supervisor counts while a sandbox runs (sans-IO): output, OOM marks, denials.

Shared by the blocking supervisor (``glove exec``) and the asyncio one (``gloved``, ``glove
run``), so both cut output at the same byte, read the same evidence of an allocation
failure and bound the same denial table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from glove.container._denials import classify_denial

#: What a process prints when an allocation fails (a per-process RLIMIT_AS is invisible from
#: outside; its trace on stderr is the evidence that the memory limit was reached).
OUT_OF_MEMORY_MARKS: Final = (
    b"MemoryError",
    b"Cannot allocate memory",
    b"out of memory",
    b"std::bad_alloc",
    b"heap out of memory",
)
_MARK_OVERLAP: Final = max(len(mark) for mark in OUT_OF_MEMORY_MARKS) - 1
#: Distinct denied syscall names kept in a result (a hostile command could vary them).
MAX_DENIED_NAMES: Final = 64


class OutputCap:
    """Counts bytes passed from the sandbox to the caller and enforces the cap."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.total = 0
        self.truncated = False

    def admit(self, data: bytes) -> bytes:
        """Return the part of ``data`` that fits under the cap (sets ``truncated`` if cut)."""
        allowed = data
        if self.cap is not None and self.total + len(data) > self.cap:
            allowed = data[: max(0, self.cap - self.total)]
            self.truncated = True
        self.total += len(allowed)
        return allowed


class OomWatch:
    """Looks for :data:`OUT_OF_MEMORY_MARKS` in a stream, across chunk boundaries."""

    def __init__(self) -> None:
        self.seen = False
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the watched stream."""
        if self.seen:
            return
        window = self._tail + chunk
        self.seen = any(mark in window for mark in OUT_OF_MEMORY_MARKS)
        self._tail = window[-_MARK_OVERLAP:]


class DenialTable:
    """Seccomp refusals: violations by syscall name, expected probes by probe name (see
    :func:`~glove.container._denials.classify_denial`), each with a bounded number of keys."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.expected: dict[str, int] = {}

    def record(self, name: str, args: Sequence[int] = ()) -> None:
        """Count one refusal of ``name`` called with ``args`` (a new key past the bound is
        not kept)."""
        probe = classify_denial(name, args)
        counts, key = (self.counts, name) if probe is None else (self.expected, probe)
        if len(counts) < MAX_DENIED_NAMES or key in counts:
            counts[key] = counts.get(key, 0) + 1
