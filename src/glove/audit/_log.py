"""The activity log: structured JSONL records appended durably by their own actor.

Each :meth:`AuditLog.append` is an ask: the actor encodes the record as one JSON line with a
sequence number and a UTC timestamp, writes it with one ``write(2)`` on an append-only
descriptor, calls ``fdatasync`` and only then replies. Records that arrive while a batch is
being synced share the next ``fdatasync`` (group commit); each reply still waits for it. A
caller that audits "before forwarding" therefore really has the record on disk before it
forwards anything. The group-commit state (who waits for which sequence number, what is
durable, failing everyone closed) is the journal's pure core, :mod:`glove.journal._group`.

Two phases, for callers that overlap the sync with their own work (decision 0046):
:meth:`AuditLog.write` returns a :class:`PendingRecord` as soon as the line is written (in
the kernel, so it survives a ``kill -9`` of this process, not a power cut), and
:meth:`PendingRecord.durable` waits for its ``fdatasync``. The mediator writes the decision,
forwards the call while the sync runs, and answers the agent only once it is durable.

Where the work runs: a small batch is written on the event loop (a ``write(2)`` into the
page cache); a one-phase append's ``fdatasync`` runs on the loop too while syncs are quick,
else in the actor's executor (:class:`glove.journal._group.SyncPacer`, decision 0045); a
two-phase write's sync is handed to the executor before :meth:`AuditLog.write` returns, so
it runs while the caller forwards (decision 0046); rotation and waiting for a shared
writer's turn always run in the executor.

Failure is fail-closed and typed (:mod:`glove.audit.errors`):

* a write that fails (ENOSPC, EIO, a short write) is cut back to the last complete line and
  the asker gets :class:`AuditWriteFailed`; the log keeps running, so appends resume when
  space returns;
* an ``fdatasync`` that fails is never retried (fsyncgate): every record not yet durable
  (written or queued) gets :class:`AuditWriteFailed` and the actor crashes, so its
  supervisor sees it and every later append gets :class:`AuditUnavailable`.

Bounded: at ``max_bytes`` the file rotates to ``PATH.1`` (older ones shift up to
``PATH.<keep_files>``, the oldest is deleted); the sequence continues across files.

One writer or several: by default the log is ``flock``ed for the actor's whole life, so a
second writer fails at start. With ``shared=True`` (what ``glove run`` and ``glove mcp
serve`` use, so two runs with one configuration work side by side) the writers of one path
take turns: each write holds an exclusive ``flock`` on ``PATH.lock`` (stable across
rotations) while it re-reads the tail written by the others, writes and, if needed,
rotates; the sequence stays strictly increasing across all writers, and each record says
which run wrote it (the mediator's ``run`` field). A file another writer rotated away is
fdatasync'ed before this writer lets go of it.

**Not tamper-evident.** Like the spec says of the general JSONL activity log, this file is
not protected against a process of the same user that can rewrite it; tamper evidence lives
in the HMAC-chained receipt journal (:mod:`glove.journal`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from glove.actors import NOT_NOW, Actor, ActorDead, Busy, Deferred
from glove.audit.errors import (
    AuditError,
    AuditRecordInvalid,
    AuditUnavailable,
    AuditWriteFailed,
)
from glove.journal import FileStat, GroupCommit, LockHeld, PosixStorage, Storage, SyncPacer

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

_LINE_HEAD_BYTES: Final = 64
"""Room for the ``seq``/``ts`` head and newline the log adds to a record (an upper bound)."""

_log = logging.getLogger(__name__)

_Outcome = tuple[list["AuditAck"], "AuditWriteFailed | None", "float | None"]
"""Acks of the records written, the error that stopped the rest, and the fdatasync time
if the step synced."""


class _SyncFailed(AuditWriteFailed):
    """fdatasync (or a rotation step) failed: the log's state is unknown; crash, never retry."""


class AuditAck(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a durable append returns: the record's sequence number and timestamp."""

    seq: int
    ts: str


class PendingRecord:
    """A record written to the log (in the kernel) whose ``fdatasync`` may still be running.

    Returned by :meth:`AuditLog.write`. It survives a ``kill -9`` of the writing process
    already; :meth:`durable` says when it survives a power cut too.
    """

    def __init__(self, ack: AuditAck, durable: asyncio.Future[AuditAck], path: str) -> None:
        self.ack = ack
        """The record's sequence number and timestamp."""
        self._durable = durable
        self._path = path

    @property
    def done(self) -> bool:
        """Whether the record's fate is known (durable, or failed)."""
        return self._durable.done()

    @property
    def failed(self) -> bool:
        """Whether the record's fdatasync (or the log) failed: it will never be durable."""
        return self._durable.done() and (
            self._durable.cancelled() or self._durable.exception() is not None
        )

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` on the loop once the record's fate is known."""
        self._durable.add_done_callback(lambda _future: callback())

    async def durable(self, *, timeout: float = AUDIT_APPEND_TIMEOUT_S) -> AuditAck:
        """Wait until the record is fdatasync'ed; return its ack.

        Raises:
            AuditWriteFailed: its fdatasync failed (the log has failed closed).
            AuditUnavailable: the log stopped, or the deadline passed first.
        """
        if self._durable.done():
            return self._durable.result()  # no deadline to arm: the usual case of an answer
        try:
            # Awaited directly, not shielded: a waiter that gives up cancels only its own
            # notification (the log skips it), and a failure reaches it one hop sooner.
            async with asyncio.timeout(timeout):
                return await self._durable
        except AuditError:
            raise
        except TimeoutError as exc:
            raise AuditUnavailable(
                f"audit log {self._path}: record {self.ack.seq} not durable in time"
            ) from exc


@dataclass(slots=True)
class _Waiting:
    fields: bytes
    durable: asyncio.Future[AuditAck]
    written: asyncio.Future[PendingRecord] | None = None  # two-phase appends only
    ack: AuditAck | None = None


class _Append(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One encoded record body (JSON object without the log's own keys)."""

    fields: bytes
    two_phase: bool = False


class _Timestamps:
    """ISO 8601 UTC timestamps with microseconds (``2026-12-02T16:49:32.771500Z``), from
    integer nanoseconds (truncated, never rounded up into the next second); the date and
    time of day are formatted once per second, not per record."""

    __slots__ = ("_prefix", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self, t_ns: int) -> str:
        second, micros = divmod(t_ns // 1000, 1_000_000)
        if second != self._second:
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
            self._second = second
        return "%s%06dZ" % (self._prefix, micros)  # noqa: UP031 - the fastest spelling here


def _retrieve(future: asyncio.Future[AuditAck]) -> None:
    # A two-phase caller that gave up on durable() must not leave "exception never
    # retrieved" behind: the failure is already the log's crash reason.
    if not future.cancelled():
        future.exception()


def _encode(record: Mapping[str, object]) -> bytes:
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
    return fields


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
        self._timestamp = _Timestamps()
        self._fd = -1
        self._size = 0
        self._seq = 0
        self._durable_seq = 0
        self._core: GroupCommit[_Waiting] = GroupCommit(
            max_batch=MAX_AUDIT_BATCH, max_pending=MAX_PENDING_AUDIT_APPENDS
        )
        self.pacer = SyncPacer()
        """Decides whether a small commit's fdatasync runs on the loop (decision 0045)."""
        self._flushing = False
        self._last_batch = 0  # waiters in the last batch written
        #: The fdatasync running in the executor for overlapped writes, if any.
        self._sync: asyncio.Future[float] | None = None
        self._shared = shared
        self._lock_fd = -1

    # -- public API ---------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """Sequence number of the last durable record (0 for an empty log)."""
        return self._durable_seq

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
        ack = await self._ask(_Append(_encode(record)), timeout)
        assert isinstance(ack, AuditAck)
        return ack

    async def write(
        self, record: Mapping[str, object], *, timeout: float = AUDIT_APPEND_TIMEOUT_S
    ) -> PendingRecord:
        """Write ``record`` (one ``write(2)``); return before its ``fdatasync`` finishes.

        The record is in the kernel when this returns: it survives the death of this
        process, and :meth:`PendingRecord.durable` says when it survives a power cut.

        Raises:
            AuditRecordInvalid: as :meth:`append`.
            AuditWriteFailed: the write failed; nothing was written.
            AuditUnavailable: the log is not running, is full, or missed the deadline.
        """
        pending = await self._ask(_Append(_encode(record), two_phase=True), timeout)
        assert isinstance(pending, PendingRecord)
        return pending

    async def _ask(self, msg: _Append, timeout: float) -> object:
        try:
            return await self.ask(msg, timeout=timeout)
        except AuditError:
            raise
        except (ActorDead, Busy, TimeoutError) as exc:
            raise AuditUnavailable(f"audit log {self.path} is unavailable: {exc}") from exc

    # -- actor hooks --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Open and lock the log, cut a torn last line, resume the sequence.

        Raises:
            AuditUnavailable: another writer holds the log.
            AuditWriteFailed: the file cannot be opened or its last record read.
        """
        await self.run_blocking(self._open_blocking)
        self._durable_seq = self._seq
        self._core = GroupCommit(
            max_batch=MAX_AUDIT_BATCH, max_pending=MAX_PENDING_AUDIT_APPENDS, durable=self._seq
        )

    async def on_stop(self) -> None:
        """Fail what is not durable, close the descriptors (acknowledged records are)."""
        self._fail(AuditUnavailable(f"audit log {self.path} stopped"), [])
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                await self.run_blocking(self._storage.close, fd)
        self._fd = self._lock_fd = -1

    async def handle(self, msg: object) -> object:
        """Queue one record for the next group commit; the reply waits for its fdatasync
        (or, for a two-phase write, for its ``write(2)``)."""
        if not isinstance(msg, _Append):
            raise TypeError(f"audit log got unexpected message {type(msg).__name__}")
        return self._take(msg)

    def handle_now(self, msg: object) -> object:
        """The idle fast path (see :mod:`glove.actors`): an append taken from the asker's
        task when the log is idle. While appenders have lately come together (the last
        batch had several) it goes through the mailbox instead, so it joins their group
        commit rather than committing alone first and splitting them into two phases."""
        if not isinstance(msg, _Append) or self._last_batch > 1:
            return NOT_NOW
        if self._flushing or self._sync is not None or not self._core.idle:
            # It would wait for a batch: the mailbox, where appends that arrive with it
            # join the same batch, serves that better.
            return NOT_NOW
        return self._take(msg)

    def _take(self, msg: _Append) -> object:
        loop = asyncio.get_running_loop()
        durable: asyncio.Future[AuditAck] = loop.create_future()
        admission = self._core.admit()
        if admission != "ok":
            why = "has failed" if admission == "failed" else "is overloaded"
            durable.set_exception(AuditUnavailable(f"audit log {self.path} {why}"))
            return Deferred(durable)
        waiting = _Waiting(msg.fields, durable)
        if msg.two_phase:
            waiting.written = loop.create_future()
            durable.add_done_callback(_retrieve)
        self._core.submit(waiting)
        reply = Deferred(waiting.written if waiting.written is not None else durable)
        if self._flushing:
            return reply
        if self.mailbox_depth == 0 and self._core.queued == 1:
            # Idle: nobody else is waiting to share this commit, so it is done here, in the
            # handler, when it can be done on the loop (no group-commit task, no hop).
            batch = self._core.next_batch()
            try:
                if self._commit_here(batch):
                    return reply
            except Exception:
                raise
            except BaseException as exc:
                # Out of a handler only an Exception crashes the actor cleanly (the askers
                # were failed already): a simulated power cut becomes one.
                raise AuditUnavailable(f"audit log {self.path} stopped: {exc!r}") from exc
            self._core.requeue(batch)
        self._flushing = True
        self.spawn_task(self._flush(), name="group-commit")
        return reply

    # -- group commit (the shell around glove.journal._group) ---------------------------------

    async def _flush(self) -> None:
        # Appends that arrive while a batch is written or synced form the next batch: one
        # fdatasync for many concurrent appenders, and every reply still waits for the
        # fdatasync of its record (a two-phase write's first reply only for its write).
        try:
            while batch := self._core.next_batch():
                await self._commit(batch)
        finally:
            self._flushing = False

    def _plan(self, batch: list[_Waiting]) -> tuple[bool, bool]:
        """(overlapped, quick): a two-phase batch is written on the loop and synced in the
        executor meanwhile; a small one-phase batch nobody overlaps with is written and
        synced on the loop while syncs are quick (no thread hop)."""
        overlapped = any(w.written is not None for w in batch)
        nbytes = sum(len(w.fields) for w in batch)
        quick = not overlapped and self._sync is None and self.pacer.inline(len(batch), nbytes)
        return overlapped, quick

    def _commit_here(self, batch: list[_Waiting]) -> bool:
        """Commit ``batch`` on the loop now; False (nothing done) if it must wait or block.

        Raises:
            AuditWriteFailed: the write's cut-back or the sync failed (the log fails closed).
        """
        overlapped, quick = self._plan(batch)
        if not (overlapped or quick):
            return False
        try:
            outcome = self._write_now([w.fields for w in batch], sync=quick)
        except BaseException as exc:
            self._fail_closed(exc, batch)
            raise
        if outcome is None:
            return False
        self._finish(batch, outcome, on_loop=True)
        return True

    async def _commit(self, batch: list[_Waiting]) -> None:
        if self._commit_here(batch):
            return
        overlapped, _quick = self._plan(batch)
        try:
            outcome = await self.run_blocking(
                self._commit_blocking, [w.fields for w in batch], not overlapped
            )
        except BaseException as exc:
            self._fail_closed(exc, batch)
            raise
        self._finish(batch, outcome, on_loop=False)

    def _finish(self, batch: list[_Waiting], outcome: _Outcome, *, on_loop: bool) -> None:
        acks, error, seconds = outcome
        self._last_batch = len(batch)
        for waiting, ack in zip(batch, acks, strict=False):
            waiting.ack = ack
        if acks:
            done = [(a.seq, w) for w, a in zip(batch, acks, strict=False)]
            self._core.written(done, acks[-1].seq)
        self._core.refused(len(batch) - len(acks))
        for waiting in batch[len(acks) :]:
            self._reject(waiting, error or AuditWriteFailed("the record was not written"))
        for waiting in batch[: len(acks)]:
            if waiting.written is not None and waiting.ack is not None:
                waiting.written.set_result(PendingRecord(waiting.ack, waiting.durable, self.path))
        if seconds is not None and acks:
            # The step synced the file itself: everything written so far is durable (a file
            # left behind by a rotation was synced before it was let go).
            self.pacer.observe(seconds, inline=on_loop)
            self._resolve(self._core.synced(self._core.written_upto))
        elif self._core.pending_sync() and self._sync is None:
            self._start_sync()

    def _start_sync(self) -> None:
        """fdatasync what is written, in the executor, starting now (decision 0046).

        Only a two-phase (overlapped) write leaves its sync for later, and its caller
        forwards the call right after this returns. The sync is handed to the thread
        first: writing the call to the upstream's pipe wakes the upstream on this CPU (a
        pipe write is a synchronous wake-up), where it often runs before this thread gets
        the CPU back, so a sync left for the loop after the forward waited for the
        upstream's own work instead of overlapping it (docs/mcp.md, "Where the time goes").
        Writes made while it runs join the next sync, started when this one returns.
        """
        target = self._core.sync_target()
        if target is None:
            return
        sync = asyncio.get_running_loop().run_in_executor(self.executor, self._sync_blocking)
        self._sync = sync
        sync.add_done_callback(functools.partial(self._synced, target))

    def _synced(self, target: int, sync: asyncio.Future[float]) -> None:
        self._sync = None
        if sync.cancelled():
            return  # the log is stopping: on_stop failed what was not durable
        failure = sync.exception()
        if failure is not None:
            # Never retried: every record not yet durable fails, and so does the log.
            self._fail_closed(failure, [])
            self.crash(failure)
            return
        self.pacer.observe(sync.result(), inline=False)
        self._resolve(self._core.synced(target))
        if self.state == "running" and self._core.pending_sync():
            self._start_sync()

    def _resolve(self, done: list[_Waiting]) -> None:
        for waiting in done:
            if waiting.ack is not None and not waiting.durable.done():
                waiting.durable.set_result(waiting.ack)
        self._durable_seq = max(self._durable_seq, self._core.durable_upto)

    def _reject(self, waiting: _Waiting, exc: BaseException) -> None:
        if waiting.written is not None and not waiting.written.done():
            waiting.written.set_exception(exc)
        if not waiting.durable.done():
            waiting.durable.set_exception(exc)

    def _fail_closed(self, exc: BaseException, batch: list[_Waiting]) -> None:
        # fdatasync failed (never retried) or we were stopped mid-commit: nothing pending may
        # be acknowledged; the exception crashes the actor.
        failure = (
            exc
            if isinstance(exc, AuditError)
            else AuditUnavailable(f"audit log {self.path} stopped while writing")
        )
        self._fail(failure, batch)

    def _fail(self, failure: BaseException, batch: list[_Waiting]) -> None:
        for waiting in [*batch, *self._core.fail()]:
            self._reject(waiting, failure)

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
            self._catch_up(may_reopen=True)
        except BaseException:
            storage.unlock(self._lock_fd)
            raise

    def _catch_up(self, *, may_reopen: bool) -> bool:
        """Under the turn lock: follow another writer's rotation and records.

        Returns False (having changed nothing) if the file was rotated and ``may_reopen`` is
        false: on the loop while a sync of the old descriptor may be running in the executor.

        Raises:
            OSError: the log cannot be synced, reopened or read.
        """
        storage = self._storage
        try:
            current: FileStat | None = storage.stat(self.path)
        except FileNotFoundError:
            current = None
        mine = storage.fstat(self._fd)
        if current is None or (current.dev, current.ino) != (mine.dev, mine.ino):
            if not may_reopen:
                return False
            # Another writer rotated the file: what we wrote to it must be durable before
            # we let it go, since our next sync covers only the new file.
            storage.fdatasync(self._fd)
            storage.close(self._fd)
            self._fd = -1
            self._fd = storage.open_append(self.path, create=True)
            mine = storage.fstat(self._fd)
        if mine.size != self._size:
            self._size = self._resume(self._fd)
        return True

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

    def _write_now(self, fields: list[bytes], *, sync: bool) -> _Outcome | None:
        """Write (and with ``sync``, fdatasync) on the loop, or None if that would block:
        another writer holds the turn, the file must rotate or be reopened."""
        storage = self._storage
        if self._size + sum(len(f) + _LINE_HEAD_BYTES for f in fields) > self._max_bytes:
            return None
        if self._shared:
            try:
                storage.lock(self._lock_fd)
            except LockHeld:
                return None
            except OSError as exc:
                raise _SyncFailed(f"cannot take a turn at the shared audit log: {exc}") from exc
            try:
                try:
                    if not self._catch_up(may_reopen=self._sync is None):
                        return None
                except OSError as exc:
                    raise _SyncFailed(f"cannot catch up with the shared audit log: {exc}") from exc
                if self._size + sum(len(f) + _LINE_HEAD_BYTES for f in fields) > self._max_bytes:
                    return None
                acks, error = self._commit_lines(fields)
            finally:
                storage.unlock(self._lock_fd)
        else:
            acks, error = self._commit_lines(fields)
        seconds = self._sync_blocking() if sync and acks else None
        return acks, error, seconds

    def _commit_blocking(self, fields: list[bytes], sync: bool) -> _Outcome:
        """Write the batch in the executor (waiting for a shared turn, rotating as needed),
        then fdatasync it if ``sync``."""
        if not self._shared:
            acks, error = self._commit_lines(fields)
        else:
            try:
                self._take_turn()
            except LockHeld as exc:
                return [], AuditWriteFailed(f"no turn to write the shared audit log: {exc}"), None
            except OSError as exc:
                raise _SyncFailed(f"cannot catch up with the shared audit log: {exc}") from exc
            try:
                acks, error = self._commit_lines(fields)
            finally:
                self._storage.unlock(self._lock_fd)
        seconds = self._sync_blocking() if sync and acks else None
        return acks, error, seconds

    def _sync_blocking(self) -> float:
        """fdatasync the current file; return how long it took.

        Raises:
            _SyncFailed: it failed (never retried).
        """
        started = time.perf_counter()
        try:
            self._storage.fdatasync(self._fd)
        except OSError as exc:
            raise _SyncFailed(f"fdatasync failed, not retried: {exc}") from exc
        return time.perf_counter() - started

    def _commit_lines(self, batch: list[bytes]) -> tuple[list[AuditAck], AuditWriteFailed | None]:
        acks: list[AuditAck] = []
        index = 0
        while index < len(batch):
            lines: list[bytes] = []
            chunk: list[AuditAck] = []
            size = self._size
            for fields in batch[index:]:
                seq = self._seq + len(chunk) + 1
                ts = self._timestamp(self._clock())
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

    def _cut_back(self) -> None:
        try:
            self._storage.ftruncate(self._fd, self._size)
            self._storage.fdatasync(self._fd)
        except OSError as exc:
            raise _SyncFailed(f"cutting back after a failed write failed: {exc}") from exc

    def _rotate(self) -> None:
        storage = self._storage
        try:
            # Records written but not yet synced live in this file: sync it before letting
            # go, since the next fdatasync covers only the new file.
            storage.fdatasync(self._fd)
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
