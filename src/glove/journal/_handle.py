"""The public face of a journal writer: ``open_journal`` and the :class:`Journal` handle."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from glove.actors import ActorDead, Busy, spawn_node
from glove.journal._codec import RecordKind
from glove.journal._limits import JournalKind, JournalLimits
from glove.journal._receipts import MAX_RECEIPT_PAGE, Receipt, ReceiptPage
from glove.journal._storage import Storage
from glove.journal._writer import (
    AckRequest,
    AppendRequest,
    CloseRequest,
    JournalStatus,
    JournalWriter,
    PageRequest,
    StatusRequest,
    SyncRequest,
)
from glove.journal.errors import JournalClosed, JournalError, JournalFailed

APPEND_TIMEOUT_S: Final = 10.0
"""Default deadline of one durable append (queueing, write and fdatasync)."""
CLOSE_TIMEOUT_S: Final = 30.0
"""Default deadline for draining pending appends on close."""


class Journal:
    """An open journal: durable appends that return receipts, paging and exact acks.

    Wraps a running :class:`JournalWriter`. Use :func:`open_journal` to get one that owns its
    writer's task, or ``Journal(writer)`` for a writer that a supervisor runs.
    """

    def __init__(self, writer: JournalWriter, task: asyncio.Task[None] | None = None) -> None:
        self.writer = writer
        self._task = task

    async def append(
        self,
        payload: bytes,
        *,
        kind: RecordKind = RecordKind.DATA,
        timeout: float = APPEND_TIMEOUT_S,
        durable: bool = True,
    ) -> Receipt:
        """Append ``payload`` and return its receipt once it is durable (fdatasync'ed).

        With ``durable=False`` the receipt comes once the record is *written* (in the kernel:
        it survives a kill -9 of this process, not a power cut) and no ``fdatasync`` is made
        for it: it becomes durable with the journal's next one (the next durable append, a
        rotation, the close), and commit listeners see it then. Use it only for a record
        whose loss in a power cut recovery tolerates, and acknowledge nothing it alone
        carries before a later durable append returns.

        Waits for mailbox space (backpressure) within ``timeout``.

        Raises:
            RecordTooLarge: the payload cannot fit one record or one segment.
            JournalFull: ENOSPC or the journal's limit refused it; nothing was written.
            JournalFailed: the journal failed (write/fdatasync error) and refuses appends.
            JournalChanged: the file was changed outside the writer; the writer stopped.
            JournalClosed: the journal was closed.
            Busy: too many appends are waiting; back off.
            DeadlineExceeded: not durable within ``timeout`` (it may still become durable).
        """
        try:
            receipt: Receipt = await self.writer.ask(
                AppendRequest(payload, int(kind), durable), timeout=timeout, wait=True
            )
        except ActorDead as exc:
            raise self._dead(exc) from exc
        return receipt

    async def sync(self, *, timeout: float = APPEND_TIMEOUT_S) -> int:
        """Make every record written so far durable (records appended with
        ``durable=False``); return the last durable seq. No fdatasync when none is needed.

        Raises:
            JournalFailed: the fdatasync failed (the journal stops, as for an append).
            JournalClosed: the journal was closed.
        """
        try:
            seq: int = await self.writer.ask(SyncRequest(), timeout=timeout, wait=True)
        except ActorDead as exc:
            raise self._dead(exc) from exc
        return seq

    async def page(self, after: int = 0, limit: int = MAX_RECEIPT_PAGE) -> ReceiptPage:
        """Receipts with a sequence above ``after``, at most ``min(limit, MAX_RECEIPT_PAGE)``.

        Raises:
            JournalClosed, JournalFailed: the writer is not running.
        """
        try:
            page: ReceiptPage = await self.writer.ask(PageRequest(after, limit))
        except ActorDead as exc:
            raise self._dead(exc) from exc
        return page

    async def ack(self, seq: int, tag: bytes | None = None) -> int:
        """Acknowledge exactly the next unacknowledged receipt (durably); return its seq.

        Raises:
            ReceiptAckError: ``seq`` (or ``tag``) is not the next unacknowledged receipt.
            JournalFailed, JournalClosed: the acknowledgement could not be persisted.
        """
        try:
            acked: int = await self.writer.ask(AckRequest(seq, tag))
        except ActorDead as exc:
            raise self._dead(exc) from exc
        return acked

    async def status(self) -> JournalStatus:
        """Where the journal stands (sequence, tag, segments, acknowledgements).

        Raises:
            JournalClosed, JournalFailed: the writer is not running.
        """
        try:
            status: JournalStatus = await self.writer.ask(StatusRequest())
        except (ActorDead, Busy) as exc:
            raise self._dead(exc) from exc
        return status

    async def close(self, *, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Drain pending appends, mark the segment closed cleanly, release the lock.

        Raises:
            JournalFailed: the writer had failed (its reason is the cause).
        """
        if self.writer.state == "running":
            with contextlib.suppress(ActorDead):
                await self.writer.ask(CloseRequest(), timeout=timeout, wait=True)
            self.writer.stop()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=timeout)
            if self._task.done() and not self._task.cancelled():
                self._task.exception()  # retrieved: the reason stays on writer.exit_reason
        reason = self.writer.exit_reason
        if isinstance(reason, JournalError) and not isinstance(reason, JournalClosed):
            raise JournalFailed(f"journal {self.writer.path} had failed: {reason}") from reason

    def _dead(self, exc: Exception) -> JournalError:
        reason = self.writer.exit_reason
        if isinstance(reason, JournalError):
            return JournalFailed(f"journal {self.writer.path} failed: {reason}")
        return JournalClosed(f"journal {self.writer.path} is not running ({exc})")


async def open_journal(
    path: str | Path,
    key: bytes,
    *,
    kind: JournalKind,
    limits: JournalLimits | None = None,
    storage: Storage | None = None,
    clock: Callable[[], int] = time.time_ns,
    name: str = "journal",
) -> Journal:
    """Open (creating if needed) the journal directory ``path``, recovering it first.

    The returned :class:`Journal` owns its writer's task; call :meth:`Journal.close`.

    Raises:
        ValueError: the key is shorter than 32 bytes.
        JournalLocked: another writer holds the journal.
        JournalCorrupt, JournalTampered, UnsupportedFormat: recovery refused to open it.
        JournalFailed: the files could not be opened or recovered.
    """
    writer = JournalWriter(
        path, key, kind=kind, limits=limits, storage=storage, clock=clock, name=name
    )
    task = await spawn_node(writer, name=f"journal/{name}")
    if task.done():
        exc = task.exception() if not task.cancelled() else None
        if exc is not None:
            raise exc
        raise JournalClosed(f"journal {path} stopped while opening")
    return Journal(writer, task)
