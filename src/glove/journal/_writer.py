"""The journal writer actor: owns the segment files, the lock and one executor thread.

An append is acknowledged only after its record is written (one ``write(2)`` per record on an
``O_APPEND`` descriptor) and ``fdatasync`` returned. Appends that arrive while a batch is being
synced wait in the next batch, so concurrent appenders share one ``fdatasync`` (group commit)
and each acknowledgement still waits for it.

Failure rules (research note B.1, "fsync discipline"):

* ENOSPC (or a short write) cuts the segment back to its last good record and fails the batch
  with :class:`JournalFull`; the writer carries on, so appends resume when space returns.
* A failed ``fdatasync`` (or a write failing with anything else) is never retried: the batch
  and every queued append fail with :class:`JournalFailed` and the actor crashes, so its owner
  fails closed and a restart runs recovery.
* Before each batch the writer checks that the segment still has the size and inode it
  wrote; external truncation, growth or replacement crashes the writer with
  :class:`JournalChanged` instead of writing at a guessed offset.

An append may ask for no ``fdatasync`` of its own (``durable=False``): it is acknowledged once
written (in the kernel: it survives a kill -9 of this process, not a power cut) and becomes
durable with the journal's next ``fdatasync`` (the next durable append's batch, a rotation, the
close). A *batch*, for recovery's rule, is every record written since the last ``fdatasync``
(``batch_pos`` counts from there), so such records and the batch that syncs them are one.

Commit listeners (:meth:`JournalWriter.add_commit_listener`) see every record the writer made
durable, seal records included, in sequence order, on the event loop, before any append of
that batch is acknowledged: the transparency log builds its Merkle tree from them. A receipts
journal folds a segment into its tree base (:mod:`glove.journal._treebase`) before deleting it.
"""

from __future__ import annotations

import asyncio
import errno
import os
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import msgspec

from glove.actors import NOT_NOW, Actor, Busy, Deferred
from glove.journal import _chain, _layout, _treebase
from glove.journal._codec import (
    HEADER_BYTES,
    JOURNAL_ID_BYTES,
    MAX_PAYLOAD_BYTES,
    RECORD_OVERHEAD_BYTES,
    RecordKind,
    SegmentState,
    encode_body,
    encode_record,
)
from glove.journal._entries import Entry
from glove.journal._group import GroupCommit, SyncPacer
from glove.journal._layout import TailCut
from glove.journal._limits import ON_FULL, JournalKind, JournalLimits, OnFull
from glove.journal._pages import read_receipts
from glove.journal._receipts import (
    MAX_RECEIPT_PAGE,
    RECEIPT_KINDS,
    Receipt,
    ReceiptPage,
    decode_ack,
    encode_ack,
)
from glove.journal._recovery import INDEX_STRIDE, IndexEntry, scan_segment
from glove.journal._storage import LockHeld, PosixStorage, Storage
from glove.journal.errors import (
    JournalChanged,
    JournalClosed,
    JournalError,
    JournalFailed,
    JournalFull,
    JournalLocked,
    ReceiptAckError,
    RecordTooLarge,
    UnsupportedFormat,
)

MAX_BATCH_RECORDS: Final = 1024
"""Most records one group commit writes before its fdatasync."""
MAX_PENDING_APPENDS: Final = 8192
"""Most appends waiting for a batch; beyond it an append gets ``Busy`` (back off)."""
PREALLOC_BYTES: Final = 1024 * 1024
"""The active segment is zero-filled this far ahead of its last record, so an append
overwrites blocks that already exist and its fdatasync changes no metadata (decision 0045)."""
_ZEROS: Final = bytes(64 * 1024)
SEAL_PAYLOAD: Final = struct.Struct("<QQ")  # segment number, records in the segment
SEAL_RESERVE_BYTES: Final = RECORD_OVERHEAD_BYTES + SEAL_PAYLOAD.size
_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

WriterState = Literal["open", "closing", "failed"]
CommitListener = Callable[[Sequence[Entry]], None]
"""Called on the loop with the records a batch made durable, in order, before its acks."""


class AppendRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Append one record of ``kind`` holding ``payload`` (answered once written, without an
    ``fdatasync`` of its own, when ``durable`` is false)."""

    payload: bytes
    kind: int = int(RecordKind.DATA)
    durable: bool = True


class CloseRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Finish pending appends and refuse new ones (the actor is stopped afterwards)."""


class PageRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Up to ``limit`` receipts with a sequence above ``after``."""

    after: int
    limit: int = MAX_RECEIPT_PAGE


class AckRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Acknowledge exactly the next unacknowledged receipt."""

    seq: int
    tag: bytes | None = None


class SyncRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Make every record written so far durable; answered with the last durable seq."""


class StatusRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Ask for the writer's :class:`JournalStatus`."""


class JournalStatus(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where the journal stands."""

    journal_id: bytes
    state: str
    seq: int
    tag: bytes
    segment: int
    segments: int
    acked: int
    pending: int
    recovered: tuple[str, ...]
    degraded: str = ""
    """Why the last batch was refused (ENOSPC, a limit); empty once an append succeeds."""


@dataclass(slots=True)
class _Pending:
    payload: bytes
    kind: int
    t_ns: int
    future: asyncio.Future[Receipt]
    receipt: Receipt | None = None
    durable: bool = True


@dataclass(slots=True)
class _Segment:
    number: int
    first_seq: int
    last_seq: int
    end: int
    index: list[IndexEntry] = field(default_factory=list)


def _failed_future(exc: BaseException) -> Deferred:
    future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    future.set_exception(exc)
    return Deferred(future)


class JournalWriter(Actor):
    """The writer of one journal directory (see :mod:`glove.journal._layout`).

    Start it under a supervisor or through :func:`glove.journal.open_journal`.
    """

    def __init__(
        self,
        path: str | Path,
        key: bytes,
        *,
        kind: JournalKind,
        limits: JournalLimits | None = None,
        storage: Storage | None = None,
        clock: Callable[[], int] = time.time_ns,
        name: str = "journal",
        mailbox_size: int = 1024,
    ) -> None:
        super().__init__(name, mailbox_size=mailbox_size)
        self.path = str(path)
        self._key = _chain.check_key(key)
        self.kind = JournalKind(kind)
        self.limits = limits if limits is not None else JournalLimits()
        self._on_full = ON_FULL[self.kind]
        self._storage: Storage = storage if storage is not None else PosixStorage()
        self._clock = clock
        self._state: WriterState = "open"
        self._lock_fd = -1
        self._fd = -1  # the active segment, read-write: records are pwrite(2)n at _size
        self._seg_path = ""
        self._ino = -1
        self._size = 0  # end of the last record
        self._alloc_end = 0  # end of the file: _size plus the zero-filled region ahead
        self._count = 0
        self._journal_id = b""
        self._seq = 0
        self._tag = b""
        self._durable_seq = 0
        self._acked = 0
        self._segments: list[_Segment] = []
        self._core: GroupCommit[_Pending] = GroupCommit(
            max_batch=MAX_BATCH_RECORDS, max_pending=MAX_PENDING_APPENDS
        )
        self.pacer = SyncPacer()
        """Decides whether a small commit runs on the loop or in the executor (0045)."""
        self._sync_s = 0.0  # time the last commit spent in fdatasync
        self._flushing = False
        self._last_batch = 0  # appends in the last batch committed
        self._idle = asyncio.Event()
        self._idle.set()
        self.recovered: list[TailCut] = []
        self._degraded = ""
        self._listeners: list[CommitListener] = []
        self._committed: list[Entry] = []  # filled by the executor, drained on the loop
        self._unsynced: list[Entry] = []  # written without an fdatasync yet (durable=False)

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Call ``listener`` with every batch of records made durable from now on.

        It runs on the event loop, in sequence order, before the batch's appends are
        acknowledged; it must be quick and must not raise (if it does, the batch fails with
        :class:`JournalFailed` and the writer stops: nothing half-listened is acknowledged).
        """
        self._listeners.append(listener)

    def remove_commit_listener(self, listener: CommitListener) -> None:
        """Stop calling ``listener`` (a no-op if it was not added)."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    # -- actor hooks --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Lock, recover and open the journal.

        Raises:
            JournalLocked: another writer holds the journal.
            JournalCorrupt, JournalTampered, UnsupportedFormat: recovery refused to start.
            JournalFailed: the files could not be opened or recovered.
        """
        await self.run_blocking(self._open_blocking)

    async def on_stop(self) -> None:
        """Fail what is still queued, mark the segment OFFLINE if healthy, release the files."""
        for item in self._core.fail():
            if not item.future.done():
                item.future.set_exception(JournalClosed(f"journal {self.path} closed"))
        await self.run_blocking(self._close_blocking)

    async def handle(self, msg: object) -> object:
        """Serve appends (deferred until durable), pages, acks, status and close."""
        if isinstance(msg, AppendRequest):
            return self._append(msg)
        if isinstance(msg, PageRequest):
            limit = max(0, min(msg.limit, MAX_RECEIPT_PAGE))
            return await self.run_blocking(self._page_blocking, msg.after, limit)
        if isinstance(msg, AckRequest):
            try:
                return await self.run_blocking(self._ack_blocking, msg.seq, msg.tag)
            except ReceiptAckError as exc:
                return _failed_future(exc)
        if isinstance(msg, StatusRequest):
            return self._status()
        if isinstance(msg, CloseRequest | SyncRequest):
            if isinstance(msg, CloseRequest) and self._state == "open":
                self._state = "closing"
                self._core.close()
            seq = await self._sync_now()  # pending appends finish; unsynced records sync
            return seq if isinstance(msg, SyncRequest) else None
        raise TypeError(f"journal writer got unexpected message {type(msg).__name__}")

    def handle_now(self, msg: object) -> object:
        """The idle fast path (see :mod:`glove.actors`): an append from the asker's task,
        committed there when it can be done on the loop. While appenders have lately come
        together (the last batch had several) it goes through the mailbox instead, so it
        joins their group commit rather than syncing alone first."""
        if not isinstance(msg, AppendRequest) or self._last_batch > 1:
            return NOT_NOW
        nbytes = RECORD_OVERHEAD_BYTES + len(msg.payload)
        if self._flushing or not self._core.idle or not self._on_loop_fits(1, nbytes):
            # It would wait for a batch or start a group-commit task: the mailbox, where
            # appends that arrive with it join the same batch, serves that better.
            return NOT_NOW
        return self._append(msg)

    async def _sync_now(self) -> int:
        """fdatasync what was written without one (a :class:`SyncRequest`); the durable seq."""
        await self._idle.wait()
        if self._unsynced and self._state != "failed":
            try:
                await self.run_blocking(self._settle_blocking)
            except BaseException as exc:
                raise self._failed([], exc) from exc
            self._deliver([], [], None)
        return self._durable_seq

    # -- appends and group commit -------------------------------------------------------------

    def _refusal(self, msg: AppendRequest) -> BaseException | None:
        if self._state != "open":
            cls = JournalFailed if self._state == "failed" else JournalClosed
            return cls(f"journal {self.path} is {self._state}")
        if msg.kind not in RECEIPT_KINDS:
            return ValueError(f"record kind {msg.kind} cannot be appended")
        room = self.limits.max_segment_bytes - HEADER_BYTES - SEAL_RESERVE_BYTES
        if len(msg.payload) > min(MAX_PAYLOAD_BYTES, room - RECORD_OVERHEAD_BYTES):
            return RecordTooLarge(f"payload of {len(msg.payload)} bytes cannot fit one record")
        if self._core.admit() != "ok":
            return Busy(self.name, MAX_PENDING_APPENDS)
        return None

    def _append(self, msg: AppendRequest) -> Deferred:
        refusal = self._refusal(msg)
        if refusal is not None:
            return _failed_future(refusal)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Receipt] = loop.create_future()
        self._core.submit(
            _Pending(msg.payload, msg.kind, self._clock(), future, durable=msg.durable)
        )
        if self._flushing:
            return Deferred(future)
        if self.mailbox_depth == 0 and self._core.queued == 1:
            # Idle: nobody else is waiting to be batched with this append, so it commits
            # here, in the handler: no group-commit task, and on the loop if the pacer lets.
            batch = self._core.next_batch()
            if self._on_loop(batch):
                try:
                    self._commit_here(batch)
                except Exception:
                    raise
                except BaseException as exc:
                    # Out of a handler only an Exception crashes the actor cleanly (the
                    # askers were failed already): a simulated power cut becomes one.
                    raise JournalFailed(f"journal {self.path} stopped: {exc!r}") from exc
                return Deferred(future)
            self._core.requeue(batch)
        self._flushing = True
        self._idle.clear()
        self.spawn_task(self._flush(), name="group-commit")
        return Deferred(future)

    def _on_loop(self, batch: list[_Pending]) -> bool:
        """Whether ``batch`` may be committed on the loop: small, quick syncs lately, and
        inside the zero-filled region of the segment (no rotation, no extension)."""
        nbytes = sum(RECORD_OVERHEAD_BYTES + len(item.payload) for item in batch)
        return self._on_loop_fits(len(batch), nbytes)

    def _on_loop_fits(self, records: int, nbytes: int) -> bool:
        return (
            self.pacer.inline(records, nbytes)
            and self._size + nbytes <= self._alloc_end
            and self._fits(nbytes, records)
        )

    async def _flush(self) -> None:
        # One batch at a time, each written and fdatasync'ed before the next is written:
        # recovery's batch rule (see _codec) relies on it, so the journal never overlaps a
        # batch's writes with the previous batch's sync.
        try:
            while batch := self._core.next_batch():
                if self._on_loop(batch):
                    self._commit_here(batch)
                    continue
                try:
                    receipts, error = await self.run_blocking(self._commit_blocking, batch)
                except BaseException as exc:
                    raise self._failed(batch, exc) from exc
                if receipts:
                    self.pacer.observe(self._sync_s, inline=False)
                self._deliver(batch, receipts, error)
        finally:
            self._flushing = False
            self._idle.set()

    def _commit_here(self, batch: list[_Pending]) -> None:
        """Commit ``batch`` on the loop, now (small, inside the zero region, quick syncs).

        Raises:
            JournalFailed, JournalChanged: as the executor path (the batch is failed first).
        """
        try:
            receipts, error = self._commit_blocking(batch)
        except BaseException as exc:
            raise self._failed(batch, exc) from exc
        if receipts:
            self.pacer.observe(self._sync_s, inline=True)
        self._deliver(batch, receipts, error)

    def _failed(self, batch: list[_Pending], exc: BaseException) -> BaseException:
        """Fail ``batch`` and everything queued for ``exc``; return what to raise."""
        if isinstance(exc, JournalFailed | JournalChanged):
            self._fail_all(batch, exc)
            return exc
        if isinstance(exc, OSError):
            fatal = JournalFailed(f"journal {self.path} failed: {exc}")
            self._fail_all(batch, fatal)
            return fatal
        # Cancelled mid-commit, or the storage itself went away: nothing in the batch may be
        # acknowledged, and the askers must not wait for a deadline.
        self._fail_all(batch, JournalFailed(f"journal {self.path} stopped: {exc!r}"))
        return exc

    def _deliver(
        self, batch: list[_Pending], receipts: list[Receipt], error: JournalError | None
    ) -> None:
        """Tell the listeners, then acknowledge the batch's durable records.

        Raises:
            JournalFailed: a commit listener failed (the batch is failed with it).
        """
        committed, self._committed = self._committed, []
        if batch:
            self._last_batch = len(batch)
        try:
            for listener in list(self._listeners):
                listener(committed)
        except Exception as exc:
            fatal = JournalFailed(f"journal {self.path}: a commit listener failed: {exc}")
            self._fail_all(batch, fatal)
            raise fatal from exc
        for item, receipt in zip(batch, receipts, strict=False):
            item.receipt = receipt
        done = [(r.seq, item) for item, r in zip(batch, receipts, strict=False)]
        self._core.written(done, self._seq)
        self._core.refused(len(batch) - len(receipts))
        # The batch's fdatasync (if it needed one) already ran: everything up to
        # _durable_seq is durable; a record written without one is answered as written.
        for item in self._core.synced(self._durable_seq):
            if not item.future.done() and item.receipt is not None:
                item.future.set_result(item.receipt)
        for item in batch:
            if not item.durable and not item.future.done() and item.receipt is not None:
                item.future.set_result(item.receipt)
        if error is not None:
            for item in batch[len(receipts) :]:
                if not item.future.done():
                    item.future.set_exception(error)

    def _fail_all(self, batch: list[_Pending], exc: JournalError) -> None:
        self._state = "failed"
        for item in [*batch, *self._core.fail()]:
            if not item.future.done():
                item.future.set_exception(exc)

    # -- blocking side: open, commit, rotate, close -------------------------------------------

    def _open_blocking(self) -> None:
        try:
            self._recover_blocking()
        except BaseException:
            self._state = "failed"  # never mark a segment we could not open cleanly OFFLINE
            raise

    def _recover_blocking(self) -> None:
        storage, path = self._storage, self.path
        try:
            storage.makedirs(path)
            self._lock_fd = storage.open_append(str(Path(path) / _layout.LOCK_NAME), create=True)
        except OSError as exc:
            raise JournalFailed(f"cannot open journal {path}: {exc}") from exc
        try:
            storage.lock(self._lock_fd)
        except LockHeld as exc:
            raise JournalLocked(f"journal {path} is held by another writer") from exc
        try:
            _layout.remove_leftover_temps(storage, path)
            scans = _layout.load_segments(storage, path, self._key)
            if not scans:
                journal_id = os.urandom(JOURNAL_ID_BYTES)
                genesis = _chain.genesis_tag(self._key, journal_id)
                self._create_segment_blocking(journal_id, 0, 1, genesis)
                scans = _layout.load_segments(storage, path, self._key)
            last = scans[-1]
            if last.header.journal_kind != int(self.kind):
                raise UnsupportedFormat(
                    f"journal {path} is of kind {last.header.journal_kind}, not {int(self.kind)}"
                )
            # A zero tail of a segment that was open is the writer's own zero-filled region
            # (PREALLOC_BYTES): nothing was ever written there, so it is kept as it is and
            # not reported. Anything else past the last good record is cut (and kept aside).
            alloc_end = last.good_end
            if last.tail is not None and _layout.is_prealloc_tail(last):
                alloc_end = last.good_end + last.tail.length
            elif last.tail is not None:
                self.recovered.append(_layout.cut_tail(storage, path, last, allow_clean=False))
                last = scan_segment(
                    storage.read_file(str(Path(path) / last.name)),
                    self._key,
                    name=last.name,
                    after=scans[-2].end if len(scans) > 1 else None,
                )
                scans[-1] = last
            self._journal_id = last.header.journal_id
            self._segments = [
                _Segment(s.header.segment, s.header.first_seq, s.end.seq, s.good_end, s.index)
                for s in scans
            ]
            self._seq, self._tag = last.end.seq, last.end.tag
            self._durable_seq = self._seq
            self._core = GroupCommit(
                max_batch=MAX_BATCH_RECORDS, max_pending=MAX_PENDING_APPENDS, durable=self._seq
            )
            self._acked = self._load_ack(scans[0].header.first_seq - 1)
            self._open_active(last.name, last.good_end, last.count, alloc_end)
            # Records a killed writer wrote without an fdatasync are in the page cache only:
            # made durable now, they never share a recovery batch with the first new one.
            storage.fdatasync(self._fd)
            if last.sealed:
                # Crashed between the seal and the end of the rotation: finish it.
                self._release_prealloc()
                if last.header.state is not SegmentState.SEALED:
                    _layout.set_state(storage, self._fd, SegmentState.SEALED)
                self._close_active()
                self._start_next_segment_blocking(last.header.segment + 1)
            elif last.header.state is not SegmentState.ONLINE:
                _layout.set_state(storage, self._fd, SegmentState.ONLINE)
        except OSError as exc:
            raise JournalFailed(f"cannot recover journal {path}: {exc}") from exc

    def _load_ack(self, floor: int) -> int:
        ack_path = str(Path(self.path) / _layout.ACK_NAME)
        if not self._storage.exists(ack_path):
            return floor
        seq, _tag = decode_ack(self._key, self._journal_id, self._storage.read_file(ack_path))
        return max(seq, floor)

    def _open_active(self, name: str, size: int, count: int, alloc_end: int) -> None:
        seg_path = str(Path(self.path) / name)
        self._seg_path = seg_path
        self._fd = self._storage.open_rw(seg_path)
        stat = self._storage.fstat(self._fd)
        if stat.size != alloc_end:
            raise JournalChanged(f"segment {name} changed size while it was being opened")
        self._ino, self._size, self._count, self._alloc_end = stat.ino, size, count, alloc_end

    def _close_active(self) -> None:
        if self._fd >= 0:
            self._storage.close(self._fd)
        self._fd = -1

    def _release_prealloc(self) -> None:
        """Cut the zero-filled region off, so a sealed or closed segment ends at its last
        record (the format readers of closed journals know); the caller's state change
        fdatasyncs the new size."""
        if self._alloc_end > self._size:
            self._storage.ftruncate(self._fd, self._size)
            self._alloc_end = self._size

    def _extend_blocking(self, needed: int) -> None:
        """Zero-fill the segment at least ``needed`` bytes past its last record.

        The zeros are written for real (not ``fallocate``d): an unwritten extent would make
        each append's fdatasync convert it, a metadata change; written blocks make the later
        appends pure overwrites. The batch's own fdatasync makes the zeros durable with it.

        Raises:
            JournalFull: the disk has no room for them (the segment is cut back first).
            JournalFailed: another write error.
        """
        limit = self.limits.max_segment_bytes
        end = min(limit, max(self._size + needed, self._alloc_end + PREALLOC_BYTES))
        at = self._alloc_end
        while at < end:
            chunk = _ZEROS[: min(len(_ZEROS), end - at)]
            try:
                written = self._storage.pwrite(self._fd, chunk, at)
            except OSError as exc:
                if exc.errno not in _FULL_ERRNOS:
                    raise JournalFailed(f"extending journal {self.path} failed: {exc}") from exc
                self._cut_back(self._alloc_end, 0)
                raise JournalFull(f"journal {self.path}: {exc.strerror}") from exc
            if written <= 0:
                self._cut_back(self._alloc_end, 0)
                raise JournalFull(f"journal {self.path}: short write extending the segment")
            at += written
        self._alloc_end = end

    def _create_segment_blocking(
        self, journal_id: bytes, number: int, first_seq: int, start_tag: bytes
    ) -> None:
        _layout.create_segment(
            self._storage,
            self.path,
            self._key,
            journal_id=journal_id,
            journal_kind=int(self.kind),
            number=number,
            first_seq=first_seq,
            start_tag=start_tag,
        )

    def _start_next_segment_blocking(self, number: int) -> None:
        self._prune_blocking()
        self._create_segment_blocking(self._journal_id, number, self._seq + 1, self._tag)
        self._segments.append(_Segment(number, self._seq + 1, self._seq, HEADER_BYTES))
        self._open_active(_layout.segment_name(number), HEADER_BYTES, 0, HEADER_BYTES)

    def _prune_blocking(self) -> None:
        while len(self._segments) >= self.limits.max_segments:
            oldest = self._segments[0]
            if self.kind is JournalKind.RECEIPTS:
                # The deleted records stay leaves of the Merkle tree: keep their compact range.
                _treebase.extend_base(
                    self._storage,
                    self.path,
                    self._key,
                    self._journal_id,
                    segment=_layout.segment_name(oldest.number),
                    first_seq=oldest.first_seq,
                    last_seq=oldest.last_seq,
                )
            self._storage.unlink(str(Path(self.path) / _layout.segment_name(oldest.number)))
            self._storage.fsync_dir(self.path)
            del self._segments[0]

    def _can_rotate(self) -> JournalFull | None:
        if self._on_full is OnFull.REFUSE:
            return JournalFull(
                f"journal {self.path} is full ({self.limits.max_segment_records} records / "
                f"{self.limits.max_segment_bytes} bytes) and a {self.kind.name} journal refuses "
                "rather than rotates"
            )
        if len(self._segments) >= self.limits.max_segments:
            oldest = self._segments[0]
            if self._on_full is OnFull.ROTATE_ACKED and oldest.last_seq > self._acked:
                return JournalFull(
                    f"journal {self.path} is full: its oldest segment holds unacknowledged "
                    f"receipts (acked through {self._acked}, segment ends at {oldest.last_seq})"
                )
        return None

    def _check_file(self) -> None:
        stat = self._storage.fstat(self._fd)
        active = self._seg_path.rsplit("/", 1)[-1]
        if stat.ino != self._ino or stat.size != self._alloc_end:
            raise JournalChanged(
                f"segment {active} is {stat.size} bytes, the writer expected {self._alloc_end}: "
                "it was truncated or grown outside the writer"
            )
        try:
            on_disk = self._storage.stat(self._seg_path)
        except FileNotFoundError as exc:
            raise JournalChanged(f"segment {active} was removed outside the writer") from exc
        if on_disk.ino != self._ino:
            raise JournalChanged(f"segment {active} was replaced outside the writer")

    def _fits(self, extra_bytes: int, records: int) -> bool:
        # Room is always kept for the seal record that closes the segment.
        limits = self.limits
        return (
            self._count + records < limits.max_segment_records
            and self._size + extra_bytes + SEAL_RESERVE_BYTES <= limits.max_segment_bytes
        )

    def _commit_blocking(self, batch: list[_Pending]) -> tuple[list[Receipt], JournalError | None]:
        self._check_file()
        receipts: list[Receipt] = []
        index = 0
        while index < len(batch):
            take = 0
            size = self._size
            while index + take < len(batch):
                item = batch[index + take]
                grown = size + RECORD_OVERHEAD_BYTES + len(item.payload)
                if not self._fits(grown - self._size, take + 1):
                    break
                size = grown
                take += 1
            if take == 0:
                refusal = self._can_rotate()
                if refusal is not None:
                    self._degraded = str(refusal)
                    return receipts, refusal
                self._rotate_blocking()
                continue
            try:
                receipts.extend(self._write_batch_blocking(batch[index : index + take]))
            except JournalFull as exc:
                self._degraded = str(exc)
                return receipts, exc
            index += take
        self._degraded = ""
        return receipts, None

    def _write_batch_blocking(self, items: list[_Pending]) -> list[Receipt]:
        storage = self._storage
        start_size, start_seq, start_tag = self._size, self._seq, self._tag
        seq, tag, size = start_seq, start_tag, start_size
        receipts = []
        segment = self._segments[-1]
        marks: list[IndexEntry] = []
        offsets: list[int] = []
        records: list[bytes] = []
        for item in items:
            seq += 1
            # Its place among the records written since the last fdatasync (recovery's batch).
            body = encode_body(seq, item.t_ns, item.kind, item.payload, seq - self._durable_seq - 1)
            if (seq - segment.first_seq) % INDEX_STRIDE == 0:
                marks.append((seq, size, tag))
            tag = _chain.record_tag(self._key, self._journal_id, tag, seq, body)
            record = encode_record(body, tag)
            records.append(record)
            offsets.append(size)
            size += len(record)
            receipts.append(Receipt(self._journal_id, seq, item.kind, item.t_ns, tag))
        data = b"".join(records)
        if size > self._alloc_end:
            self._extend_blocking(len(data))
        # One pwrite(2) for the batch, over zero-filled blocks the segment already has.
        try:
            written = storage.pwrite(self._fd, data, start_size)
        except OSError as exc:
            if exc.errno not in _FULL_ERRNOS:
                raise JournalFailed(f"write to journal {self.path} failed: {exc}") from exc
            self._cut_back(start_size, len(data))
            raise JournalFull(f"journal {self.path}: {exc.strerror}") from exc
        if written != len(data):
            self._cut_back(start_size, len(data))
            raise JournalFull(f"journal {self.path}: short write ({written}/{len(data)})")
        entries = [
            Entry(r.seq, r.kind, item.payload, segment.number, at)
            for r, item, at in zip(receipts, items, offsets, strict=True)
        ]
        if any(item.durable for item in items):
            self._sync_blocking()
            self._committed.extend(self._unsynced)
            self._committed.extend(entries)
            self._unsynced = []
            self._durable_seq = seq
        else:
            self._unsynced.extend(entries)
        self._size, self._seq, self._tag = size, seq, tag
        self._alloc_end = max(self._alloc_end, size)
        self._count += len(items)
        segment.last_seq, segment.end = seq, size
        segment.index.extend(marks)
        return receipts

    def _settle_blocking(self) -> None:
        """fdatasync the records written without one (at close); the listeners get them."""
        if self._unsynced:
            self._sync_blocking()
            self._committed.extend(self._unsynced)
            self._unsynced = []
            self._durable_seq = self._seq

    def _sync_blocking(self) -> None:
        started = time.perf_counter()
        try:
            self._storage.fdatasync(self._fd)
        except OSError as exc:
            raise JournalFailed(f"fdatasync of journal {self.path} failed (not retried)") from exc
        self._sync_s = time.perf_counter() - started

    def _cut_back(self, size: int, length: int) -> None:
        """Undo a failed write of up to ``length`` bytes at ``size``, durably.

        Inside the zero-filled region the bytes are zeroed again (the region stays); past
        it the file is truncated, as before preallocation.
        """
        try:
            if self._alloc_end > size:
                end = min(self._alloc_end, size + length)
                at = size
                while at < end:
                    at += self._storage.pwrite(self._fd, _ZEROS[: min(len(_ZEROS), end - at)], at)
                self._storage.ftruncate(self._fd, self._alloc_end)  # whatever went past it
            else:
                self._storage.ftruncate(self._fd, size)
                self._alloc_end = size
            self._storage.fdatasync(self._fd)
        except OSError as exc:
            raise JournalFailed(f"cannot cut journal {self.path} back: {exc}") from exc

    def _rotate_blocking(self) -> None:
        active = self._segments[-1]
        seal = SEAL_PAYLOAD.pack(active.number, self._count)
        seq = self._seq + 1
        body = encode_body(
            seq, self._clock(), int(RecordKind.SEAL), seal, seq - self._durable_seq - 1
        )
        tag = _chain.record_tag(self._key, self._journal_id, self._tag, seq, body)
        record = encode_record(body, tag)
        try:
            written = self._storage.pwrite(self._fd, record, self._size)
        except OSError as exc:
            raise JournalFailed(f"writing the seal record of {self.path} failed: {exc}") from exc
        if written != len(record):
            raise JournalFailed(f"short write of the seal record of {self.path}")
        try:
            self._storage.fdatasync(self._fd)
            self._committed.extend(self._unsynced)
            self._unsynced = []
            self._committed.append(
                Entry(seq, int(RecordKind.SEAL), seal, active.number, self._size)
            )
            if (seq - active.first_seq) % INDEX_STRIDE == 0:
                active.index.append((seq, self._size, self._tag))
            self._size += len(record)
            self._alloc_end = max(self._alloc_end, self._size)
            self._seq, self._tag = seq, tag
            active.last_seq, active.end = seq, self._size
            self._durable_seq = seq
            self._release_prealloc()
            _layout.set_state(self._storage, self._fd, SegmentState.SEALED)
            self._close_active()
            self._start_next_segment_blocking(active.number + 1)
        except OSError as exc:
            raise JournalFailed(f"rotating journal {self.path} failed: {exc}") from exc

    def _close_blocking(self) -> None:
        try:
            if self._state != "failed" and self._fd >= 0:
                self._check_file()
                self._release_prealloc()
                _layout.set_state(self._storage, self._fd, SegmentState.OFFLINE)
        except (OSError, JournalChanged):
            pass  # the journal stays ONLINE: the next open runs the full recovery scan
        finally:
            self._close_active()
            if self._lock_fd >= 0:
                self._storage.close(self._lock_fd)
                self._lock_fd = -1

    # -- receipts -----------------------------------------------------------------------------

    def _page_blocking(self, after: int, limit: int) -> ReceiptPage:
        receipts: list[Receipt] = []
        for segment in self._segments:
            if len(receipts) >= limit:
                break
            if segment.last_seq <= after:
                continue
            receipts.extend(
                read_receipts(
                    self._storage,
                    str(Path(self.path) / _layout.segment_name(segment.number)),
                    self._key,
                    self._journal_id,
                    index=segment.index,
                    end=segment.end,
                    after=after,
                    limit=limit - len(receipts),
                    durable=self._durable_seq,
                )
            )
        cursor = receipts[-1].seq if receipts else max(after, 0)
        return ReceiptPage(tuple(receipts), cursor, self._acked)

    def _next_unacked(self) -> Receipt | None:
        page = self._page_blocking(self._acked, 1)
        return page.receipts[0] if page.receipts else None

    def _ack_blocking(self, seq: int, tag: bytes | None) -> int:
        expected = self._next_unacked()
        if expected is None:
            raise ReceiptAckError(f"nothing to acknowledge after {self._acked}")
        if seq != expected.seq:
            raise ReceiptAckError(
                f"acknowledged {seq}, but the next unacknowledged receipt is {expected.seq}"
            )
        if tag is not None and not _chain.tags_equal(tag, expected.tag):
            raise ReceiptAckError(f"receipt {seq} has a different tag")
        data = encode_ack(self._key, self._journal_id, seq, expected.tag)
        try:
            self._storage.write_file_durably(str(Path(self.path) / _layout.ACK_NAME), data)
        except OSError as exc:
            raise JournalFailed(f"persisting the acknowledgement failed: {exc}") from exc
        self._acked = seq
        return seq

    def _status(self) -> JournalStatus:
        return JournalStatus(
            self._journal_id,
            self._state,
            self._seq,
            self._tag,
            self._segments[-1].number if self._segments else -1,
            len(self._segments),
            self._acked,
            self._core.queued,
            tuple(f"{c.kind} tail {c.length}B at {c.segment}:{c.offset}" for c in self.recovered),
            self._degraded,
        )
