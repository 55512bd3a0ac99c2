"""First occurrences of literals in a stream cut into chunks (sans-IO).

Each literal is looked for with ``bytes.find`` (C speed) in every chunk it has not been
found in yet, and in a small window across each chunk boundary: the last ``L - 1`` bytes
of what came before (``L`` the longest literal) joined to the first ``L - 1`` bytes of
the chunk. So an occurrence is found whatever the chunking, and memory is one tail of
``L - 1`` bytes and one window of at most ``2 (L - 1)`` bytes; no chunk is ever copied.
A literal found is never looked for again: only its first offset is kept.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

_NONE: frozenset[int] = frozenset()


class LiteralScan:
    """The first offset of each of ``literals`` in one stream (a literal is non-empty)."""

    __slots__ = ("_keep", "_literals", "_offsets", "_seen", "_tail", "_todo")

    def __init__(self, literals: Sequence[bytes]) -> None:
        """Look for ``literals`` (each at least one byte) from offset 0.

        Raises:
            ValueError: a literal is empty.
        """
        if any(not literal for literal in literals):
            raise ValueError("a literal to look for is at least one byte")
        self._literals = tuple(literals)
        self._offsets: list[int | None] = [None] * len(self._literals)
        self._todo = list(range(len(self._literals)))
        self._keep = max((len(literal) for literal in self._literals), default=1) - 1
        self._tail = b""
        self._seen = 0

    @property
    def offsets(self) -> tuple[int | None, ...]:
        """The first offset of each literal so far, None where it has not appeared."""
        return tuple(self._offsets)

    @property
    def pending(self) -> bool:
        """Whether some literal has not been found yet."""
        return bool(self._todo)

    def feed(self, chunk: bytes, skip: Container[int] = _NONE) -> None:
        """Look for the literals not found yet in ``chunk`` and across its boundary.

        ``skip`` names literals the caller knows do not occur wholly inside ``chunk``:
        for them only the boundary window is searched.
        """
        size = len(chunk)
        if not size:
            return
        todo = self._todo
        if todo:
            tail = self._tail
            found = False
            if tail:
                # An occurrence that starts in the tail ends in this chunk (one wholly in
                # the tail was looked for with the previous chunk), and comes first.
                window = tail + chunk[: self._keep]
                base = self._seen - len(tail)
                for index in todo:
                    at = window.find(self._literals[index])
                    if at >= 0:
                        self._offsets[index] = base + at
                        found = True
            for index in todo:
                if self._offsets[index] is None and index not in skip:
                    at = chunk.find(self._literals[index])
                    if at >= 0:
                        self._offsets[index] = self._seen + at
                        found = True
            if found:
                self._todo = [index for index in todo if self._offsets[index] is None]
            keep = self._keep
            if self._todo and keep:
                self._tail = chunk[-keep:] if size >= keep else (tail + chunk)[-keep:]
            else:
                self._tail = b""
        self._seen += size
