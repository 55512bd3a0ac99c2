"""The storage seam: every syscall the journal and the audit log make, behind one protocol.

:class:`PosixStorage` is the real thing. ``glove.testing.storage`` ships the fault-injecting
and crash-simulating storages that tests (and users' tests) put in its place. The methods
are thin and blocking: callers run them in their actor's single-thread executor, never on
the event loop.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

FILE_MODE = 0o600
"""Owner-only permissions for journal, side and audit files."""
LOCK_POLL_FIRST_S = 0.0002
"""First pause of :meth:`PosixStorage.lock_wait` (doubling up to ``LOCK_POLL_MAX_S``)."""
LOCK_POLL_MAX_S = 0.005
"""Longest pause between two attempts of :meth:`PosixStorage.lock_wait`."""


@dataclass(frozen=True, slots=True)
class FileStat:
    """What the writer checks to notice external truncation, growth or replacement."""

    size: int
    ino: int
    dev: int


class LockHeld(OSError):
    """Another open file description holds the exclusive lock."""


class Storage(Protocol):
    """The blocking file operations a journal needs."""

    def open_append(self, path: str, *, create: bool) -> int:
        """Open ``path`` write-only in append mode (owner-only if created); return the fd."""

    def open_rw(self, path: str) -> int:
        """Open an existing ``path`` read-write without append (header state updates)."""

    def write(self, fd: int, data: bytes) -> int:
        """One ``write(2)``; returns the bytes written."""

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        """One ``pwrite(2)`` at ``offset``."""

    def fdatasync(self, fd: int) -> None:
        """``fdatasync(2)``."""

    def fsync(self, fd: int) -> None:
        """``fsync(2)``."""

    def ftruncate(self, fd: int, length: int) -> None:
        """``ftruncate(2)``."""

    def fstat(self, fd: int) -> FileStat:
        """Size, inode and device of the open file."""

    def stat(self, path: str) -> FileStat:
        """Size, inode and device of ``path``."""

    def close(self, fd: int) -> None:
        """``close(2)``."""

    def lock(self, fd: int) -> None:
        """Take an exclusive, non-blocking ``flock``; raise :class:`LockHeld` if taken."""

    def lock_wait(self, fd: int, timeout_s: float) -> None:
        """Take an exclusive ``flock``, waiting up to ``timeout_s``; :class:`LockHeld` after."""

    def unlock(self, fd: int) -> None:
        """Release the ``flock`` on ``fd``."""

    def read_file(self, path: str) -> bytes:
        """The whole content of ``path``."""

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes of ``path`` from ``offset`` (fewer at end of file)."""

    def write_file_durably(self, path: str, data: bytes) -> None:
        """Write ``path`` as temp file, fsync, rename, fsync of the directory."""

    def rename(self, src: str, dst: str) -> None:
        """``rename(2)``."""

    def unlink(self, path: str) -> None:
        """``unlink(2)``."""

    def fsync_dir(self, path: str) -> None:
        """fsync the directory ``path`` so entries created or renamed in it are durable."""

    def listdir(self, path: str) -> list[str]:
        """Names in directory ``path``."""

    def makedirs(self, path: str) -> None:
        """Create directory ``path`` (owner-only) and parents if missing."""

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""


class PosixStorage:
    """The real storage: plain POSIX calls through :mod:`os`."""

    def open_append(self, path: str, *, create: bool) -> int:
        """Open ``path`` for appending; see :class:`Storage`."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        return os.open(path, flags, FILE_MODE)

    def open_rw(self, path: str) -> int:
        """Open ``path`` read-write; see :class:`Storage`."""
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)

    def write(self, fd: int, data: bytes) -> int:
        """See :class:`Storage`."""
        return os.write(fd, data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        """See :class:`Storage`."""
        return os.pwrite(fd, data, offset)

    def fdatasync(self, fd: int) -> None:
        """See :class:`Storage`."""
        os.fdatasync(fd)

    def fsync(self, fd: int) -> None:
        """See :class:`Storage`."""
        os.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        """See :class:`Storage`."""
        os.ftruncate(fd, length)

    def fstat(self, fd: int) -> FileStat:
        """See :class:`Storage`."""
        st = os.fstat(fd)
        return FileStat(st.st_size, st.st_ino, st.st_dev)

    def stat(self, path: str) -> FileStat:
        """See :class:`Storage`."""
        # Not pathlib: the writer stats its segment before every batch (hot path).
        st = os.stat(path)  # noqa: PTH116 - a Path costs more than the syscall here
        return FileStat(st.st_size, st.st_ino, st.st_dev)

    def close(self, fd: int) -> None:
        """See :class:`Storage`."""
        os.close(fd)

    def lock(self, fd: int) -> None:
        """See :class:`Storage`."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise LockHeld(exc.errno, "lock held by another writer") from exc
            raise

    def lock_wait(self, fd: int, timeout_s: float) -> None:
        """See :class:`Storage` (polls, so the wait keeps its deadline)."""
        deadline = time.monotonic() + timeout_s
        pause = LOCK_POLL_FIRST_S
        while True:
            try:
                self.lock(fd)
            except LockHeld:
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, LOCK_POLL_MAX_S)
            else:
                return

    def unlock(self, fd: int) -> None:
        """See :class:`Storage`."""
        fcntl.flock(fd, fcntl.LOCK_UN)

    def read_file(self, path: str) -> bytes:
        """See :class:`Storage`."""
        return Path(path).read_bytes()

    def read_at(self, path: str, offset: int, size: int) -> bytes:
        """See :class:`Storage`."""
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    def write_file_durably(self, path: str, data: bytes) -> None:
        """See :class:`Storage`."""
        tmp = f"{path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        Path(tmp).replace(path)
        self.fsync_dir(str(Path(path).parent))

    def rename(self, src: str, dst: str) -> None:
        """See :class:`Storage`."""
        Path(src).replace(dst)

    def unlink(self, path: str) -> None:
        """See :class:`Storage`."""
        Path(path).unlink()

    def fsync_dir(self, path: str) -> None:
        """See :class:`Storage`."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def listdir(self, path: str) -> list[str]:
        """See :class:`Storage`."""
        return [entry.name for entry in Path(path).iterdir()]

    def makedirs(self, path: str) -> None:
        """See :class:`Storage`."""
        Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)

    def exists(self, path: str) -> bool:
        """See :class:`Storage`."""
        return Path(path).exists()
