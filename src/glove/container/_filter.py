"""What output bound for a host descriptor may pass through first, on either backend."""

from __future__ import annotations

from typing import Protocol


class OutputFilter(Protocol):
    """What output bound for one host descriptor passes through on its way out (``glove
    exec`` and ``glove run`` writing to a terminal: :class:`glove.session.TerminalFilter`)."""

    def feed(self, data: bytes) -> bytes:
        """The bytes to write for the next ``data`` (may hold some back)."""
        ...

    def close(self) -> bytes:
        """What is still held, once the output has ended."""
        ...
