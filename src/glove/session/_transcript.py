"""The transcript's files: the live writer the PTY drain owns, and the reader of what is on
disk (a finished session's transcript, or what a crashed gloved left durable).

The format is :mod:`glove.session._transcript_format`'s. The writer appends on the event
loop (a ``pwrite`` into the page cache) and keeps the newest bytes in memory for viewers
that keep up; making bytes durable (``fdatasync`` of the ring, then a meta record, then
``fdatasync`` of the meta file) is blocking work the drain runs in its own executor. Reads
of older bytes are blocking too (a viewer catching up from disk), and are checked against
the ring's eviction once they return: a byte overwritten while it was being read is
reported as evicted, never handed out.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Final, Protocol

from glove.records import TranscriptEntry
from glove.session._transcript_format import (
    META_FILE,
    META_FILE_BYTES,
    RING_FILE,
    TRANSCRIPT_FORMAT,
    DigestChain,
    Meta,
    encode_meta,
    final_digest,
    pick_meta,
    ring_segments,
    slot_offset,
    window_for,
)
from glove.session.errors import NoTerminal, TranscriptCorrupt

#: The newest bytes kept in memory for viewers that keep up (a quarter of the ring at most).
TAIL_CACHE_BYTES: Final = 1024 * 1024
_OPEN_NEW: Final = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _pread_ring(fd: int, offset: int, length: int, capacity: int) -> bytes:
    """Bytes ``[offset, offset + length)`` of a ring file (blocking).

    Raises:
        TranscriptCorrupt: the file is shorter than the ring.
    """
    out = bytearray()
    for position, size in ring_segments(offset, length, capacity):
        chunk = os.pread(fd, size, position)
        if len(chunk) != size:
            raise TranscriptCorrupt(f"the ring file ends before {position + size} bytes")
        out += chunk
    return bytes(out)


class TranscriptSource(Protocol):
    """What a viewer follows: a live transcript or one on disk."""

    @property
    def capacity(self) -> int:
        """The ring's size."""

    @property
    def start(self) -> int:
        """The first offset still held (it only grows)."""

    @property
    def end(self) -> int:
        """One past the last offset held (it only grows)."""

    @property
    def closed(self) -> bool:
        """No byte will be added any more."""

    def cached(self, offset: int, length: int) -> bytes | None:
        """Bytes from memory, when held there (never blocks)."""


class RingReader:
    """A read-only descriptor of one ring file, owned by one reader: closing the writer's
    descriptors can never make this one read another file."""

    def __init__(self, fd: int, capacity: int) -> None:
        self._fd = fd
        self.capacity = capacity

    @classmethod
    def open(cls, directory: Path, capacity: int) -> RingReader:
        """Open ``directory``'s ring read-only and check its size.

        Raises:
            NoTerminal: there is no ring (pipes, never started, cleaned up).
            TranscriptCorrupt: it is not a regular file of ``capacity`` bytes.
        """
        try:
            fd = os.open(directory / RING_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError as exc:
            raise NoTerminal(f"{directory.name} has no transcript") from exc
        except OSError as exc:
            raise TranscriptCorrupt(f"cannot open the transcript ring: {exc.strerror}") from exc
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size != capacity:
            os.close(fd)
            raise TranscriptCorrupt(
                f"the ring file is {info.st_size} bytes; its meta record says {capacity}"
            )
        return cls(fd, capacity)

    def read(self, offset: int, length: int) -> bytes:
        """Bytes ``[offset, offset + length)`` as the ring holds them now (blocking); the
        caller checks afterwards that none was evicted meanwhile.

        Raises:
            TranscriptCorrupt: the file was shortened under us.
        """
        return _pread_ring(self._fd, offset, min(length, self.capacity), self.capacity)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


class TranscriptWriter:
    """The live transcript of one session (owned by its PTY drain)."""

    def __init__(self, directory: Path, capacity: int, ring: int, meta: int) -> None:
        self.directory = directory
        self.capacity = capacity
        self.window = window_for(capacity)
        self._ring = ring
        self._meta = meta
        self._chain = DigestChain()
        self._seq = 1
        self._tail = bytearray()
        self._tail_start = 0
        self._tail_max = min(TAIL_CACHE_BYTES, capacity // 4)
        self.end = 0
        self.durable_end = 0
        self.closed = False

    @classmethod
    def create(cls, directory: Path, capacity: int) -> TranscriptWriter:
        """Create the ring (space reserved) and its first meta record (blocking).

        Raises:
            OSError: the files cannot be created or the space reserved.
        """
        ring = os.open(directory / RING_FILE, _OPEN_NEW, 0o600)
        meta = -1
        try:
            try:
                os.posix_fallocate(ring, 0, capacity)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.ftruncate(ring, capacity)
            meta = os.open(directory / META_FILE, _OPEN_NEW, 0o600)
            os.ftruncate(meta, META_FILE_BYTES)
            writer = cls(directory, capacity, ring, meta)
            writer.commit(writer.snapshot(first=True))
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except BaseException:
            os.close(ring)
            if meta >= 0:
                os.close(meta)
            raise
        return writer

    # -- writing (on the loop) ------------------------------------------------------------

    @property
    def start(self) -> int:
        """The first offset the ring still holds (older bytes were evicted)."""
        return max(0, self.end - self.capacity)

    @property
    def evicted(self) -> int:
        """Bytes evicted so far (all of them before :attr:`start`)."""
        return self.start

    @property
    def pending(self) -> int:
        """Bytes written past the last durable end."""
        return self.end - self.durable_end

    def append(self, data: bytes) -> None:
        """Add ``data`` at the end (a page-cache write: it does not stall the loop).

        Raises:
            OSError: the ring cannot be written (the drain crashes: one strike).
        """
        view = memoryview(data)
        while len(view) > self.capacity:  # only the newest capacity bytes can be held
            self._append_one(view[: self.capacity])
            view = view[self.capacity :]
        self._append_one(view)

    def _append_one(self, view: memoryview) -> None:
        done = 0
        for position, size in ring_segments(self.end, len(view), self.capacity):
            written = 0
            while written < size:
                part = view[done + written : done + size]
                written += os.pwrite(self._ring, part, position + written)
            done += size
        self._chain.update(view)
        self.end += len(view)
        self._tail += view
        if len(self._tail) > 2 * self._tail_max:
            drop = len(self._tail) - self._tail_max
            del self._tail[:drop]
            self._tail_start += drop

    def cached(self, offset: int, length: int) -> bytes | None:
        """Bytes from memory when the newest bytes hold ``offset`` (never blocks)."""
        if offset < max(self._tail_start, self.start) or offset >= self.end:
            return None
        at = offset - self._tail_start
        return bytes(self._tail[at : at + length])

    # -- durability (snapshot on the loop, commit off it) -----------------------------------

    def snapshot(self, *, closed: bool = False, first: bool = False) -> Meta:
        """The next meta record, for the bytes written until now."""
        if not first:
            self._seq += 1
        return Meta(
            seq=self._seq,
            capacity=self.capacity,
            window=self.window,
            end=self.end,
            blocks=self._chain.blocks,
            chain=self._chain.chain,
            closed=closed,
        )

    def commit(self, meta: Meta) -> None:
        """Make the ring durable up to ``meta.end``, then the record (blocking).

        Raises:
            OSError: the disk refused (the drain crashes: the receipt must not name bytes
                that are not durable).
        """
        os.fdatasync(self._ring)
        os.pwrite(self._meta, encode_meta(meta), slot_offset(meta.seq))
        os.fdatasync(self._meta)

    def committed(self, meta: Meta) -> None:
        """Record that ``meta`` is durable (on the loop, after :meth:`commit`)."""
        self.durable_end = max(self.durable_end, meta.end)
        if meta.closed:
            self.closed = True

    # -- the end ------------------------------------------------------------------------------

    def digest(self) -> str:
        """The digest of every byte so far."""
        return self._chain.digest()

    def summary(self) -> TranscriptEntry:
        """The receipt's ``transcript`` entry (a clean end: every byte accounted for)."""
        return TranscriptEntry(
            format=TRANSCRIPT_FORMAT,
            bytes=self.end,
            digest=self.digest(),
            evicted=self.evicted,
            ring_bytes=self.capacity,
            complete=True,
        )

    def close_files(self) -> None:
        """Close both files (idempotent)."""
        for fd in (self._ring, self._meta):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._ring = self._meta = -1


class TranscriptReader:
    """A transcript on disk, as its last durable meta record vouches (read-only)."""

    def __init__(self, meta: Meta, ring: RingReader) -> None:
        self.meta = meta
        self.ring = ring
        self.capacity = meta.capacity
        self.closed = True

    @classmethod
    def open(cls, directory: Path) -> TranscriptReader:
        """Open and verify a session's transcript (blocking).

        Raises:
            NoTerminal: the session has no transcript there (pipes, never started, cleaned).
            TranscriptCorrupt: its files do not verify.
        """
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            meta_fd = os.open(directory / META_FILE, flags)
        except FileNotFoundError as exc:
            raise NoTerminal(f"{directory.name} has no transcript") from exc
        except OSError as exc:
            raise TranscriptCorrupt(f"cannot open the transcript: {exc.strerror}") from exc
        try:
            meta = pick_meta(os.pread(meta_fd, META_FILE_BYTES + 1, 0))
        finally:
            os.close(meta_fd)
        return cls(meta, RingReader.open(directory, meta.capacity))

    @property
    def start(self) -> int:
        """The first offset the record vouches for."""
        return self.meta.start

    @property
    def end(self) -> int:
        """The durable end."""
        return self.meta.end

    def cached(self, offset: int, length: int) -> bytes | None:
        """Nothing is held in memory."""
        del offset, length
        return None

    def digest(self) -> str:
        """The digest of bytes ``[0, end)``, from the chain and the tail in the ring.

        Raises:
            TranscriptCorrupt: the tail cannot be read back.
        """
        tail_start = self.meta.tail_start
        tail = self.ring.read(tail_start, self.end - tail_start)
        return final_digest(self.meta.chain, tail, self.end)

    def summary(self) -> TranscriptEntry:
        """The receipt's ``transcript`` entry for what is durable (after a crash).

        Raises:
            TranscriptCorrupt: the tail cannot be read back.
        """
        return TranscriptEntry(
            format=TRANSCRIPT_FORMAT,
            bytes=self.end,
            digest=self.digest(),
            evicted=self.start,
            ring_bytes=self.meta.capacity,
            complete=self.meta.closed,
        )

    def close(self) -> None:
        """Close the ring (idempotent)."""
        self.ring.close()


def recovered_summary(directory: Path) -> TranscriptEntry | None:
    """The ``transcript`` entry of a session a crashed gloved left, or None without one
    (blocking). A transcript that does not verify is reported as such, never raised: one
    session's torn files must not stop the daemon recovering the others."""
    try:
        reader = TranscriptReader.open(directory)
    except NoTerminal:
        return None
    except TranscriptCorrupt as exc:
        return _unreadable(str(exc))
    try:
        return reader.summary()
    except (TranscriptCorrupt, OSError) as exc:
        return _unreadable(str(exc))
    finally:
        reader.close()


def _unreadable(reason: str) -> TranscriptEntry:
    return TranscriptEntry(
        format=TRANSCRIPT_FORMAT,
        bytes=None,
        digest=None,
        evicted=None,
        ring_bytes=None,
        complete=False,
        error=f"the transcript does not verify: {reason}"[:1024],
    )
