"""The transparency log as an actor: gloved's ``receipt-log``, over the ``receipts`` writer.

::

    gloved
    ├─ receipts       JournalWriter: the receipt journal
    ├─ receipt-log    TransparencyLogActor: its Merkle tree, signed checkpoints, bundles
    ...

One message at a time, so appends, checkpoints and exports never overlap (the log's lock is
never contended), and the tree's blocking work (folds, signatures, the checkpoint's fsync,
a bundle's proofs) runs in this actor's own single-thread executor, shut down with it. At
stop it issues a last checkpoint and closes the tree. A refusal an asker expects (no receipt
of that session, a bundle that cannot be built) is its :class:`LogRefused` reply, never the
actor's crash; a receipt that cannot be made durable is (fail closed).
"""

from __future__ import annotations

from typing import Any

import msgspec

from glove.actors import Actor
from glove.journal._codec import RecordKind
from glove.journal._handle import Journal
from glove.journal._keys import SigningKey
from glove.journal._tlog import TransparencyLog
from glove.journal._writer import JournalWriter
from glove.journal.errors import JournalError


class LogAppend(msgspec.Struct, frozen=True, tag=True):
    """Append a receipt durably; the reply is its sequence number."""

    payload: bytes
    kind: RecordKind = RecordKind.RECEIPT


class LogSeal(msgspec.Struct, frozen=True, tag=True):
    """Sign and store a checkpoint covering every durable record; the reply is it."""


class LogExport(msgspec.Struct, frozen=True, tag=True):
    """The bundle of a session's final receipt (bytes), or a :class:`LogRefused`."""

    session_id: str


class LogReceiptOf(msgspec.Struct, frozen=True, tag=True):
    """The sequence number of a session's last receipt, or None."""

    session_id: str


class LogHead(msgspec.Struct, frozen=True, tag=True):
    """The log's size and the size its last checkpoint covers (0 without one)."""


LogMessage = LogAppend | LogSeal | LogExport | LogReceiptOf | LogHead


class LogRefused(msgspec.Struct, frozen=True):
    """A request the log refuses: ``error`` is the exception, for the asker to raise."""

    error: Any


class TransparencyLogActor(Actor):
    """The receipts journal's transparency log, owned by one actor (see the module doc)."""

    def __init__(
        self,
        writer: JournalWriter,
        *,
        hmac_key: bytes,
        signing_key: SigningKey,
        name: str = "receipt-log",
    ) -> None:
        super().__init__(name, mailbox_size=1024)
        self._writer = writer
        self._hmac_key = hmac_key
        self._signing_key = signing_key
        self._log: TransparencyLog | None = None

    async def on_start(self) -> None:
        """Recover the tree of the (started) receipts journal.

        Raises:
            LogMismatch: the journal, its tree base and its checkpoint disagree.
            JournalError: the journal does not scan or is not running.
        """
        await self._writer.started.wait()
        self._log = await TransparencyLog.attach(
            Journal(self._writer),
            hmac_key=self._hmac_key,
            signing_key=self._signing_key,
            executor=self.executor,
        )

    async def on_stop(self) -> None:
        """A last checkpoint (while the journal still runs), then close the tree."""
        if self._log is not None:
            await self._log.close(seal=self._writer.state == "running")

    async def handle(self, msg: object) -> object:
        """One :data:`LogMessage`.

        Raises:
            JournalError: a receipt or a checkpoint could not be made durable (fatal).
            TypeError: not a log message (a bug).
        """
        log = self._log
        assert log is not None
        if isinstance(msg, LogAppend):
            receipt, _ = await log.append_receipt(msg.payload, kind=msg.kind)
            return receipt.seq
        if isinstance(msg, LogSeal):
            return await log.checkpoint()
        if isinstance(msg, LogReceiptOf):
            return log.receipt_seq(msg.session_id)
        if isinstance(msg, LogHead):
            last = log.last_checkpoint
            return log.size, (last.size if last is not None else 0)
        if isinstance(msg, LogExport):
            try:
                return await log.export_bundle(msg.session_id)
            except (JournalError, OSError) as exc:
                return LogRefused(exc)
        raise TypeError(f"the transparency log does not handle {type(msg).__name__}")

    @property
    def journal(self) -> Journal:
        """The receipts journal (paging and acknowledgements go to its writer)."""
        return Journal(self._writer)
