"""Storages that fail on purpose, for tests of the journal and the audit log.

* :class:`FaultStorage` is the real POSIX storage with scheduled errors: a write that stores a
  few bytes then fails with ENOSPC or EIO, an ``fdatasync`` that fails (SQLite's
  ``FAULTSIM(ioerr-*)``).
* :class:`CrashStorage` is a Python port of the semantics of SQLite's ``src/test6.c`` crash
  VFS: writes are buffered until ``fdatasync``; at the *k*-th ``fdatasync`` a crash is
  declared and every un-synced write is independently written, dropped, or replaced with
  garbage sector by sector, then every later call raises :class:`SimulatedCrash` as if the
  process were gone. Writes that were synced before the crash are on disk, exactly.

The garbage never reaches bytes outside the un-synced write itself: this is SQLite's
"powersafe overwrite" device property (its default on Linux), under which writing part of a
sector does not disturb the other bytes of that sector. An in-place overwrite of durable
bytes lands sector by sector: each sector it touches is written whole or keeps its old bytes
(sector writes are atomic), so a record written over a preallocated region can be torn at
any sector boundary. Garbage replaces appended bytes, and overwritten sectors whose old bytes
were all zero (a zero-filled region that never held data); durable data that was not zero
in the same sector (a header's state byte, an acknowledged record) is never garbled.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from glove.journal import FILE_MODE, FileStat, PosixStorage

CrashMode = Literal["random", "sequential", "safe_append"]
DEFAULT_SECTOR_BYTES = 512


class SimulatedCrash(BaseException):
    """The simulated machine lost power; the storage does nothing any more.

    A ``BaseException`` so that no ``except Exception`` in the code under test can swallow it,
    exactly as nothing survives a real power cut.
    """


class FaultStorage(PosixStorage):
    """Real POSIX storage with injected I/O errors.

    Set ``write_errno`` to make the next ``write`` store ``partial_bytes`` bytes (really) and
    then fail; set ``sync_errno`` to make the next ``fdatasync`` fail. ``writes_failing`` and
    ``syncs_failing`` say how many consecutive calls fail (default one).
    """

    def __init__(self) -> None:
        self.write_errno: int | None = None
        self.partial_bytes = 0
        self.writes_failing = 1
        self.sync_errno: int | None = None
        self.syncs_failing = 1
        self.writes = 0
        self.syncs = 0

    def _write_fault(self) -> int | None:
        self.writes += 1
        if self.write_errno is None or self.writes_failing <= 0:
            return None
        self.writes_failing -= 1
        code = self.write_errno
        if self.writes_failing == 0:
            self.write_errno = None
        return code

    def write(self, fd: int, data: bytes) -> int:
        """Write, or store a prefix and fail if a write error is scheduled."""
        code = self._write_fault()
        if code is not None:
            if self.partial_bytes:
                os.write(fd, data[: self.partial_bytes])
            raise OSError(code, os.strerror(code))
        return os.write(fd, data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        """Positional write, or store a prefix and fail (the same schedule as ``write``)."""
        code = self._write_fault()
        if code is not None:
            if self.partial_bytes:
                os.pwrite(fd, data[: self.partial_bytes], offset)
            raise OSError(code, os.strerror(code))
        return os.pwrite(fd, data, offset)

    def fdatasync(self, fd: int) -> None:
        """fdatasync, or fail if a sync error is scheduled."""
        self.syncs += 1
        if self.sync_errno is not None and self.syncs_failing > 0:
            self.syncs_failing -= 1
            code = self.sync_errno
            if self.syncs_failing == 0:
                self.sync_errno = None
            raise OSError(code, os.strerror(code))
        os.fdatasync(fd)


@dataclass(slots=True)
class _Pending:
    offset: int
    data: bytes


@dataclass(slots=True)
class _FileState:
    append: bool
    size: int
    pending: list[_Pending] = field(default_factory=list)


class CrashStorage(PosixStorage):
    """Buffer writes until fdatasync; lose power at the ``crash_at``-th fdatasync.

    ``mode``: ``"random"`` writes, drops or garbles each pending write independently;
    ``"sequential"`` writes every pending write before a random cut point (the one at the
    cut partly) and drops the rest; ``"safe_append"`` writes or drops each, never garbles.
    ``crash_at=0`` never crashes. ``seed`` makes the outcome reproducible.
    """

    def __init__(
        self,
        crash_at: int,
        *,
        mode: CrashMode = "random",
        seed: int = 0,
        sector_bytes: int = DEFAULT_SECTOR_BYTES,
    ) -> None:
        self.crash_at = crash_at
        self.mode: CrashMode = mode
        self.rng = random.Random(seed)  # noqa: S311 - reproducible faults, not secrets
        self.sector_bytes = sector_bytes
        self.syncs = 0
        self.crashed = False
        self._files: dict[int, _FileState] = {}

    def _alive(self) -> None:
        if self.crashed:
            raise SimulatedCrash

    def open_append(self, path: str, *, create: bool) -> int:
        """Open for appending; later writes are buffered."""
        self._alive()
        # No O_APPEND on the real descriptor: Linux pwrite() on an O_APPEND file ignores the
        # offset, and this model places every buffered append at its logical offset itself.
        flags = os.O_WRONLY | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        fd = os.open(path, flags, FILE_MODE)
        self._files[fd] = _FileState(True, os.fstat(fd).st_size)
        return fd

    def open_rw(self, path: str) -> int:
        """Open read-write; later writes are buffered."""
        self._alive()
        fd = super().open_rw(path)
        self._files[fd] = _FileState(False, os.fstat(fd).st_size)
        return fd

    def write(self, fd: int, data: bytes) -> int:
        """Buffer an append at the file's logical end."""
        self._alive()
        state = self._files[fd]
        state.pending.append(_Pending(state.size, bytes(data)))
        state.size += len(data)
        return len(data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        """Buffer a positional write."""
        self._alive()
        state = self._files[fd]
        state.pending.append(_Pending(offset, bytes(data)))
        state.size = max(state.size, offset + len(data))
        return len(data)

    def fdatasync(self, fd: int) -> None:
        """Make this file's pending writes durable, or crash if this is the chosen sync."""
        self._alive()
        self.syncs += 1
        if self.syncs == self.crash_at:
            self._crash()
            raise SimulatedCrash
        # The model, not the disk, decides what survives the simulated crash, so the real
        # fdatasync is skipped: a sync here only moves pending writes into the file.
        self._flush(self._files[fd])

    def fsync(self, fd: int) -> None:
        """Same as :meth:`fdatasync` for this model."""
        self.fdatasync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        """Truncate; acts as a barrier for this file's pending writes."""
        self._alive()
        state = self._files[fd]
        self._flush(state, fd)
        os.ftruncate(fd, length)
        state.size = length

    def fstat(self, fd: int) -> FileStat:
        """The logical size (pending writes included), the real inode."""
        self._alive()
        real = super().fstat(fd)
        return FileStat(self._files[fd].size, real.ino, real.dev)

    def close(self, fd: int) -> None:
        """Close; pending writes stay in the (simulated) page cache, i.e. are written."""
        self._alive()
        state = self._files.pop(fd)
        self._flush(state, fd)
        os.close(fd)

    def lock(self, fd: int) -> None:
        """Lock (refused after the crash)."""
        self._alive()
        super().lock(fd)

    def read_file(self, path: str) -> bytes:
        """Read (refused after the crash)."""
        self._alive()
        return super().read_file(path)

    def write_file_durably(self, path: str, data: bytes) -> None:
        """Durable side-file write: counts as one fdatasync and may be the crash point."""
        self._alive()
        self.syncs += 1
        if self.syncs == self.crash_at:
            self._crash()
            raise SimulatedCrash
        tmp = Path(f"{path}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)

    def rename(self, src: str, dst: str) -> None:
        """Rename (refused after the crash)."""
        self._alive()
        super().rename(src, dst)

    def unlink(self, path: str) -> None:
        """Unlink (refused after the crash)."""
        self._alive()
        super().unlink(path)

    def fsync_dir(self, path: str) -> None:
        """Directory fsync (refused after the crash; a no-op before, see fdatasync)."""
        self._alive()

    # -- internals ----------------------------------------------------------------------------

    def _flush(self, state: _FileState, fd: int | None = None) -> None:
        real = fd if fd is not None else self._fd_of(state)
        for item in state.pending:
            os.pwrite(real, item.data, item.offset)
        state.pending.clear()

    def _fd_of(self, state: _FileState) -> int:
        for fd, candidate in self._files.items():
            if candidate is state:
                return fd
        raise KeyError("unknown file state")

    def _crash(self) -> None:
        self.crashed = True
        for fd, state in self._files.items():
            writes = state.pending
            if self.mode == "sequential":
                cut = self.rng.randrange(len(writes) + 1) if writes else 0
                for item in writes[:cut]:
                    os.pwrite(fd, item.data, item.offset)
                if cut < len(writes):
                    item = writes[cut]
                    keep = self.rng.randrange(len(item.data) + 1)
                    os.pwrite(fd, item.data[:keep], item.offset)
            else:
                durable_size = os.fstat(fd).st_size
                for item in writes:
                    if item.offset >= durable_size:
                        self._land_append(fd, item)
                    else:
                        self._land_overwrite(fd, item)
            state.pending.clear()
            os.close(fd)
        self._files.clear()

    def _land_append(self, fd: int, item: _Pending) -> None:
        choice = self.rng.randrange(3 if self.mode == "random" else 2)
        if choice == 0:
            os.pwrite(fd, item.data, item.offset)
        elif choice == 2:
            os.pwrite(fd, self._garble(item), item.offset)

    def _land_overwrite(self, fd: int, item: _Pending) -> None:
        sector = self.sector_bytes
        start, end = item.offset, item.offset + len(item.data)
        for base in range(start - start % sector, end, sector):
            lo, hi = max(base, start), min(base + sector, end)
            piece = item.data[lo - start : hi - start]
            # The whole sector decides: a sector that held any data (a header, a record)
            # lands whole or not at all; one that was all zeros may come back as garbage.
            garbles = self.mode == "random" and not any(os.pread(fd, sector, base))
            choice = self.rng.randrange(3 if garbles else 2)
            if choice == 0:
                os.pwrite(fd, piece, lo)
            elif choice == 2:
                os.pwrite(fd, self.rng.randbytes(len(piece)), lo)

    def _garble(self, item: _Pending) -> bytes:
        data = bytearray(item.data)
        sector = self.sector_bytes
        start = item.offset
        end = item.offset + len(data)
        first = start - start % sector
        for base in range(first, end, sector):
            if self.rng.random() < 0.5:
                lo = max(base, start) - start
                hi = min(base + sector, end) - start
                data[lo:hi] = self.rng.randbytes(hi - lo)
        return bytes(data)
