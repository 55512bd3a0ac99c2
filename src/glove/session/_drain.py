"""The ``drain`` actor: keeps a session's output on disk and digests it as it arrives.

The sandbox actor hands every byte of the command's stdout and stderr (already counted
against the output limit) to :meth:`OutputDrain.write`, which appends it to that stream's
file in the session's directory and to its SHA-256. The files are fdatasync'ed when the
session ends, before its terminal receipt records their digests, so a receipt never names
bytes that are not on disk; a stream that carried no bytes needs no sync (its digest is the
empty one, whether a power cut left its file empty or absent). A pipes session has stdout
and stderr only (a PTY session's terminal is :class:`~glove.session._pty_drain.PtyDrain`'s).

A write that fails crashes the drain, and with it the session (one
strike): output the receipt cannot account for ends the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Final

import msgspec

from glove.actors import Actor

STREAMS: Final = ("stdout", "stderr", "pty")
#: The files a pipes session's drain makes (``pty`` stays a name it accepts, with no file).
_FILES: Final = ("stdout", "stderr")


class StreamDigest(msgspec.Struct, frozen=True):
    """One stream's bytes on disk: their count and SHA-256."""

    bytes: int
    sha256: str


class OutputDrain(Actor):
    """Owns the session's output files (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        super().__init__("drain", mailbox_size=1)
        self.directory = directory
        self._fds: dict[str, int] = {}
        self._hashes = {name: hashlib.sha256() for name in STREAMS}
        self._counts = dict.fromkeys(STREAMS, 0)
        self.closed = False

    async def on_start(self) -> None:
        """Create the session's directory (0700) and its files (0600)."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name in _FILES:
            self._fds[name] = os.open(
                self.directory / name,
                os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )

    def write(self, stream: str, data: bytes) -> None:
        """Append ``data`` to ``stream`` (on the loop: a local file's append does not stall).

        A failure crashes the drain (and the session).
        """
        fd = self._fds.get(stream)
        if fd is None:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            self.crash(exc)
            return
        self._hashes[stream].update(data)
        self._counts[stream] += len(data)

    def digests(self) -> dict[str, StreamDigest]:
        """Each stream that carried bytes, with its digest (stdout and stderr always)."""
        return {
            name: StreamDigest(self._counts[name], "sha256:" + self._hashes[name].hexdigest())
            for name in STREAMS
            if name != "pty" or self._counts[name]
        }

    async def on_stop(self) -> None:
        """fdatasync the files that carried bytes and close them all.

        The files leave ``_fds`` before the first sync: a write that arrives while a sync
        is awaited finds no file (its bytes are neither written nor counted) instead of a
        closed descriptor whose number another thread of gloved may have reused.
        """
        fds, self._fds = self._fds, {}
        try:
            for name, fd in fds.items():
                if self._counts[name]:
                    await self.run_blocking(os.fdatasync, fd)
        finally:
            for fd in fds.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.closed = True
