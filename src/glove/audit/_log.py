"""The activity log: structured JSONL records appended durably by their own actor.

Each :meth:`AuditLog.append` is an ask: the actor encodes the record as one JSON line with a
sequence number and a UTC timestamp, writes it with one ``write(2)`` on an append-only
descriptor, calls ``fdatasync`` and only then replies. Records that arrive while a batch is
being synced share the next ``fdatasync`` (group commit); each reply still waits for it. A
caller that audits "before forwarding" therefore really has the record on disk before it
forwards anything.

Failure is fail-closed and typed (:mod:`glove.audit.errors`):

* a write that fails (ENOSPC, EIO, a short write) is cut back to the last complete line and
  the asker gets :class:`AuditWriteFailed`; the log keeps running, so appends resume when
  space returns;
* an ``fdatasync`` that fails is never retried (fsyncgate): the asker gets
  :class:`AuditWriteFailed` and the actor crashes, so its supervisor sees it and every later
  append gets :class:`AuditUnavailable`.

Bounded: at ``max_bytes`` the file rotates to ``PATH.1`` (older ones shift up to
``PATH.<keep_files>``, the oldest is deleted); the sequence continues across files.

One writer or several: by default the log is ``flock``ed for the actor's whole life, so a
second writer fails at start. With ``shared=True`` (what ``glove run`` and ``glove mcp
serve`` use, so two runs with one configuration work side by side) the writers of one path
take turns: each group commit holds an exclusive ``flock`` on ``PATH.lock`` (stable across
rotations) while it re-reads the tail written by the others, writes, fdatasyncs and, if
needed, rotates; the sequence stays strictly increasing across all writers, and each
record says which run wrote it (the mediator's ``run`` field).

**Not tamper-evident.** Like the spec says of the general JSONL activity log, this file is
not protected against a process of the same user that can rewrite it; tamper evidence lives
in the HMAC-chained receipt journal (:mod:`glove.journal`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from glove.actors import Actor, ActorDead, Busy, Deferred
from glove.audit.errors import (
    AuditError,
    AuditRecordInvalid,
    AuditUnavailable,
    AuditWriteFailed,
)
from glove.journal import LockHeld, PosixStorage, Storage

MAX_AUDIT_RECORD_BYTES: Final = 64 * 1024
"""Largest encoded activity record (one JSON line, newline included)."""
DEFAULT_MAX_AUDIT_BYTES: Final = 64 * 1024 * 1024
"""Default size at which the active log file rotates."""
DEFAULT_KEEP_FILES: Final = 4
"""Default number of rotated files kept (``PATH.1`` .. ``PATH.4``)."""
AUDIT_APPEND_TIMEOUT_S: Final = 5.0
"""Default deadline of one append, write and fdatasync included."""
MAX_AUDIT_BATCH: Final = 512
"""Most records one group commit writes before its fdatasync."""
MAX_PENDING_AUDIT_APPENDS: Final = 4096
"""Most appends waiting for a group commit; beyond it appends get AuditUnavailable."""
RESERVED_KEYS: Final = frozenset({"seq", "ts"})
"""Keys the log sets itself; a record may not carry them."""

_log = logging.getLogger(__name__)


class _SyncFailed(AuditWriteFailed):
    """fdatasync (or a rotation step) failed: the log's state is unknown; crash, never retry."""


@dataclass(slots=True)
class _Waiting:
    fields: bytes
    future: asyncio.Future[AuditAck]


class _Append(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One encoded record body (JSON object without the log's own keys)."""

    fields: bytes


class AuditAck(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a durable append returns: the record's sequence number and timestamp."""

    seq: int
    ts: str


def _utc_timestamp(t_ns: int) -> str:
    moment = dt.datetime.fromtimestamp(t_ns / 1e9, tz=dt.UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


class AuditLog(Actor):
    """The activity-log actor; start it under a supervisor or with ``running()``.

    Not protected against a same-user process: see the module docstring.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        name: str = "audit",
        max_bytes: int = DEFAULT_MAX_AUDIT_BYTES,
        keep_files: int = DEFAULT_KEEP_FILES,
        storage: Storage | None = None,
        clock: Callable[[], int] = time.time_ns,
        mailbox_size: int = 256,
        shared: bool = False,
    ) -> None:
        super().__init__(name, mailbox_size=mailbox_size)
        if max_bytes < MAX_AUDIT_RECORD_BYTES:
            raise ValueError(f"max_bytes must be at least {MAX_AUDIT_RECORD_BYTES}")
        if keep_files < 1:
            raise ValueError("keep_files must be at least 1")
        self.path = str(path)
        self._max_bytes = max_bytes
        self._keep = keep_files
        self._storage: Storage = storage if storage is not None else PosixStorage()
        self._clock = clock
        self._fd = -1
        self._size = 0
        self._seq = 0
        self._queue: list[_Waiting] = []
        self._flushing = False
        self._failed = False
        self._shared = shared
        self._lock_fd = -1

    # -- public API ---------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """Sequence number of the last durable record (0 for an empty log)."""
        return self._seq

    async def append(
        self, record: Mapping[str, object], *, timeout: float = AUDIT_APPEND_TIMEOUT_S
    ) -> AuditAck:
        """Append ``record`` durably; return once it is written and fdatasync'ed.

        Raises:
            AuditRecordInvalid: not JSON-encodable, over MAX_AUDIT_RECORD_BYTES, or it sets
                a reserved key (``seq``, ``ts``).
            AuditWriteFailed: the write or the fdatasync failed; nothing is acknowledged.
            AuditUnavailable: the log is not running, is full, or missed the deadline.
        """
        clash = RESERVED_KEYS.intersection(record)
        if clash:
            raise AuditRecordInvalid(f"record sets reserved key(s) {sorted(clash)}")
        try:
            fields = msgspec.json.encode(dict(record))
        except (TypeError, ValueError, OverflowError) as exc:
            raise AuditRecordInvalid(f"record is not JSON-encodable: {exc}") from exc
        if not fields.startswith(b"{"):
            raise AuditRecordInvalid("record must encode as a JSON object")
        if len(fields) > MAX_AUDIT_RECORD_BYTES - 64:
            raise AuditRecordInvalid(
                f"record of {len(fields)} bytes is over the {MAX_AUDIT_RECORD_BYTES}-byte limit"
            )
        try:
            ack: AuditAck = await self.ask(_Append(fields), timeout=timeout)
        except AuditError:
            raise
        except (ActorDead, Busy, TimeoutError) as exc:
            raise AuditUnavailable(f"audit log {self.path} is unavailable: {exc}") from exc
        return ack

    # -- actor hooks --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Open and lock the log, cut a torn last line, resume the sequence.

        Raises:
            AuditUnavailable: another writer holds the log.
            AuditWriteFailed: the file cannot be opened or its last record read.
        """
        await self.run_blocking(self._open_blocking)

    async def on_stop(self) -> None:
        """Close the descriptors (every acknowledged record is already durable)."""
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                await self.run_blocking(self._storage.close, fd)
        self._fd = self._lock_fd = -1

    async def handle(self, msg: object) -> object:
        """Queue one record for the next group commit; the reply waits for its fdatasync."""
        if not isinstance(msg, _Append):
            raise TypeError(f"audit log got unexpected message {type(msg).__name__}")
        future: asyncio.Future[AuditAck] = asyncio.get_running_loop().create_future()
        if self._failed:
            future.set_exception(AuditUnavailable(f"audit log {self.path} has failed"))
            return Deferred(future)
        if len(self._queue) >= MAX_PENDING_AUDIT_APPENDS:
            future.set_exception(AuditUnavailable(f"audit log {self.path} is overloaded"))
            return Deferred(future)
        self._queue.append(_Waiting(msg.fields, future))
        if not self._flushing:
            self._flushing = True
            self.spawn_task(self._flush(), name="group-commit")
        return Deferred(future)

    async def _flush(self) -> None:
        # Appends that arrive while a batch syncs form the next batch: one fdatasync for many
        # concurrent appenders, and every reply still waits for the fdatasync of its record.
        try:
            while self._queue:
                batch = self._queue[:MAX_AUDIT_BATCH]
                del self._queue[:MAX_AUDIT_BATCH]
                try:
                    acks, error = await self.run_blocking(
                        self._commit_blocking, [w.fields for w in batch]
                    )
                except BaseException as exc:
                    self._failed = True
                    # fdatasync failed (never retried) or we were stopped mid-commit: nothing
                    # pending may be acknowledged; the exception crashes the actor.
                    failure = (
                        exc
                        if isinstance(exc, AuditError)
                        else AuditUnavailable(f"audit log {self.path} stopped while writing")
                    )
                    for waiting in [*batch, *self._queue]:
                        if not waiting.future.done():
                            waiting.future.set_exception(failure)
                    self._queue.clear()
                    raise
                for waiting, ack in zip(batch, acks, strict=False):
                    if not waiting.future.done():
                        waiting.future.set_result(ack)
                for waiting in batch[len(acks) :]:
                    if not waiting.future.done() and error is not None:
                        waiting.future.set_exception(error)
        finally:
            self._flushing = False

    # -- blocking side (the actor's executor) -------------------------------------------------

    def _open_blocking(self) -> None:
        storage = self._storage
        parent = str(Path(self.path).parent)
        created = not storage.exists(self.path)
        try:
            if not storage.exists(parent):
                raise AuditWriteFailed(
                    f"cannot open audit log {self.path}: its folder {parent} does not exist"
                )
            fd = storage.open_append(self.path, create=True)
        except OSError as exc:
            raise AuditWriteFailed(f"cannot open audit log {self.path}: {exc}") from exc
        self._fd = fd
        try:
            if self._shared:
                self._lock_fd = storage.open_append(f"{self.path}.lock", create=True)
                self._take_turn()
            else:
                storage.lock(fd)
        except LockHeld as exc:
            raise AuditUnavailable(f"audit log {self.path} is held by another writer") from exc
        except OSError as exc:
            raise AuditWriteFailed(f"cannot lock audit log {self.path}: {exc}") from exc
        try:
            if created:
                storage.fsync_dir(parent)
            self._size = self._resume(fd)
        except OSError as exc:
            raise AuditWriteFailed(f"cannot resume audit log {self.path}: {exc}") from exc
        finally:
            if self._shared:
                storage.unlock(self._lock_fd)

    def _take_turn(self) -> None:
        """Shared mode: wait for the lock, then catch up with what the other writers did.

        Raises:
            LockHeld: no turn within the append deadline.
            OSError: the log cannot be reopened or read.
        """
        storage = self._storage
        storage.lock_wait(self._lock_fd, AUDIT_APPEND_TIMEOUT_S)
        try:
            current = storage.stat(self.path) if storage.exists(self.path) else None
            mine = storage.fstat(self._fd)
            if current is None or (current.dev, current.ino) != (mine.dev, mine.ino):
                storage.close(self._fd)  # another writer rotated the file
                self._fd = -1
                self._fd = storage.open_append(self.path, create=True)
                mine = storage.fstat(self._fd)
            if mine.size != self._size:
                self._size = self._resume(self._fd)
        except BaseException:
            storage.unlock(self._lock_fd)
            raise

    def _resume(self, fd: int) -> int:
        """Cut a torn last line, read the last sequence number; return the file's size.

        Only the tail is read (a record is at most MAX_AUDIT_RECORD_BYTES), so catching up
        with another writer costs one small read, whatever the size of the log.
        """
        storage = self._storage
        size = storage.fstat(fd).size
        offset = max(0, size - 2 * MAX_AUDIT_RECORD_BYTES)
        tail = storage.read_at(self.path, offset, size - offset)
        cut = tail.rfind(b"\n") + 1
        if cut == 0 and offset > 0:
            raise AuditWriteFailed(f"audit log {self.path}: no record boundary in its tail")
        end = offset + cut
        if end != size:
            # A line without its newline was never acknowledged (we ack after fdatasync of
            # the whole line): cut it, keep the bytes in the log's own warning.
            _log.warning(
                "audit log %s: cutting a torn last line of %d bytes", self.path, size - end
            )
            storage.ftruncate(fd, end)
            storage.fdatasync(fd)
        last = tail[:cut]
        if not last and end == 0:
            rotated = f"{self.path}.1"
            if storage.exists(rotated):
                rotated_size = storage.stat(rotated).size
                start = max(0, rotated_size - 2 * MAX_AUDIT_RECORD_BYTES)
                last = storage.read_at(rotated, start, rotated_size - start)
        self._seq = _last_seq(last, self.path)
        return end

    def _commit_blocking(
        self, batch: list[bytes]
    ) -> tuple[list[AuditAck], AuditWriteFailed | None]:
        if not self._shared:
            return self._commit_lines(batch)
        try:
            self._take_turn()
        except LockHeld as exc:
            return [], AuditWriteFailed(f"no turn to write the shared audit log: {exc}")
        except OSError as exc:
            raise _SyncFailed(f"cannot catch up with the shared audit log: {exc}") from exc
        try:
            return self._commit_lines(batch)
        finally:
            self._storage.unlock(self._lock_fd)

    def _commit_lines(self, batch: list[bytes]) -> tuple[list[AuditAck], AuditWriteFailed | None]:
        acks: list[AuditAck] = []
        index = 0
        while index < len(batch):
            lines: list[bytes] = []
            chunk: list[AuditAck] = []
            size = self._size
            for fields in batch[index:]:
                seq = self._seq + len(chunk) + 1
                ts = _utc_timestamp(self._clock())
                head = b'{"seq":%d,"ts":"%s"' % (seq, ts.encode())
                line = head + (b"," + fields[1:] if fields != b"{}" else b"}") + b"\n"
                if size + len(line) > self._max_bytes:
                    break
                lines.append(line)
                chunk.append(AuditAck(seq, ts))
                size += len(line)
            if not lines:
                self._rotate()
                continue
            try:
                self._write_lines(lines)
            except _SyncFailed:
                raise  # never retried: the flusher fails everything and crashes the actor
            except AuditWriteFailed as exc:
                return acks, exc
            self._size, self._seq = size, chunk[-1].seq
            acks.extend(chunk)
            index += len(chunk)
        return acks, None

    def _write_lines(self, lines: list[bytes]) -> None:
        storage = self._storage
        for line in lines:
            try:
                written = storage.write(self._fd, line)
            except OSError as exc:
                self._cut_back()
                raise AuditWriteFailed(f"write failed: {exc}") from exc
            if written != len(line):
                self._cut_back()
                raise AuditWriteFailed(f"short write of {written}/{len(line)} bytes (disk full?)")
        try:
            storage.fdatasync(self._fd)
        except OSError as exc:
            raise _SyncFailed(f"fdatasync failed, not retried: {exc}") from exc

    def _cut_back(self) -> None:
        try:
            self._storage.ftruncate(self._fd, self._size)
            self._storage.fdatasync(self._fd)
        except OSError as exc:
            raise _SyncFailed(f"cutting back after a failed write failed: {exc}") from exc

    def _rotate(self) -> None:
        storage = self._storage
        try:
            storage.close(self._fd)
            self._fd = -1
            oldest = f"{self.path}.{self._keep}"
            if storage.exists(oldest):
                storage.unlink(oldest)
            for index in range(self._keep - 1, 0, -1):
                src = f"{self.path}.{index}"
                if storage.exists(src):
                    storage.rename(src, f"{self.path}.{index + 1}")
            storage.rename(self.path, f"{self.path}.1")
            fd = storage.open_append(self.path, create=True)
            if not self._shared:  # shared writers hold PATH.lock, which rotation keeps
                storage.lock(fd)
            self._fd = fd
            storage.fsync_dir(str(Path(self.path).parent))
        except OSError as exc:
            raise _SyncFailed(f"rotation failed: {exc}") from exc
        self._size = 0


def _last_seq(data: bytes, path: str) -> int:
    if not data:
        return 0
    line = data[data.rstrip(b"\n").rfind(b"\n") + 1 :]
    try:
        seq = msgspec.json.decode(line, type=dict[str, object]).get("seq")
    except msgspec.DecodeError as exc:
        raise AuditWriteFailed(f"audit log {path}: last record is not JSON") from exc
    if not isinstance(seq, int) or seq < 0:
        raise AuditWriteFailed(f"audit log {path}: last record has no sequence number")
    return seq
