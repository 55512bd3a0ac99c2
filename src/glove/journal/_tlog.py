"""The transparency log: a receipts journal, its Merkle tree and its signed checkpoints.

The daemon owns one :class:`TransparencyLog` over its receipts journal::

    log = await open_transparency_log(state / "receipts", hmac_key, signing_key)
    receipt, leaf = await log.append_receipt(payload)   # durable; leaf = receipt.seq - 1
    sealed = await log.checkpoint()                     # at every terminal receipt, at shutdown
    bundle = await log.export_bundle(session_id)        # bytes a third party verifies
    await log.close()                                   # a last checkpoint, then close

Every record of the journal is a leaf (record ``seq`` is leaf ``seq - 1``; the entry is its
payload), seal records included, so the tree is the journal's, exactly. The writer hands each
durable batch to the log on the event loop before acknowledging it (a commit listener), the
log hashes the entries there (O(1) per record) and folds them into the tree in its own
executor thread when it checkpoints, when asked for a proof, or every
:data:`MAX_PENDING_LEAVES` records. Memory: the compact range and the unfolded leaf hashes.

**Recovery at open.** The tree is rebuilt from the journal (and the tree base of deleted
segments) into ``tree-hashes``; the stored checkpoint must verify under the signing key and
the rebuilt tree must extend it: a journal shorter than its checkpoint (a cut tail) or with
another root at that size (a rewrite) makes :meth:`TransparencyLog.attach` refuse with
:class:`LogMismatch`. Checkpoints are signed only for the tree as it grows, so the log never
signs two checkpoints that are inconsistent with each other.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final, TypeVar

from glove.journal._bundle import parse_receipt_payload
from glove.journal._checkpoint import Checkpoint, SignedCheckpoint, sign_checkpoint
from glove.journal._codec import RecordKind
from glove.journal._entries import Entry, read_entry_at
from glove.journal._handle import APPEND_TIMEOUT_S, Journal, open_journal
from glove.journal._keys import SigningKey
from glove.journal._limits import JournalKind, JournalLimits
from glove.journal._logstate import (
    build_bundle,
    check_checkpoint,
    load_checkpoint,
    recover_tree,
    session_of,
    store_checkpoint,
)
from glove.journal._merkle import leaf_hash
from glove.journal._receipts import Receipt
from glove.journal._storage import PosixStorage, Storage
from glove.journal._tree import HASHES_NAME, HashFile, StoredTree
from glove.journal.errors import JournalClosed, LogMismatch, SessionNotFound

T = TypeVar("T")

MAX_PENDING_LEAVES: Final = 4096
"""Leaf hashes held on the event loop before they are folded into the tree file."""
APPENDABLE_KINDS: Final = frozenset({RecordKind.RECEIPT, RecordKind.REFINEMENT})


class TransparencyLog:
    """A receipts journal with a Merkle tree and signed checkpoints (see the module doc).

    Build it with :func:`open_transparency_log` (which opens and owns the journal) or
    :meth:`attach` (a journal whose writer someone else supervises).
    """

    def __init__(
        self,
        journal: Journal,
        key: bytes,
        signing_key: SigningKey,
        storage: Storage,
        executor: ThreadPoolExecutor | None = None,
    ) -> None:
        self.journal = journal
        self.path = journal.writer.path
        self.signing_key = signing_key
        self._key = key
        self._storage = storage
        #: The thread the tree's blocking work runs in: the owner's (an actor's own
        #: executor, see TransparencyLogActor), or one of the log's own.
        self._owns_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="tlog")
        self._lock = asyncio.Lock()
        self._tree: StoredTree | None = None
        self._folded = 0  # leaves in the tree file (the executor's side)
        self._seen = 0  # leaves the journal has committed (the loop's side)
        self._pending: list[bytes] = []  # leaf hashes of _seen - _folded - (in a fold)
        self._early: list[Entry] | None = []
        self._sessions: dict[str, Entry] = {}  # session id -> its last receipt (no payload)
        self._checkpoint: SignedCheckpoint | None = None
        self._owns_journal = False
        self._closed = False

    # -- opening and recovery -------------------------------------------------------------

    @classmethod
    async def attach(
        cls,
        journal: Journal,
        *,
        hmac_key: bytes,
        signing_key: SigningKey,
        storage: Storage | None = None,
        executor: ThreadPoolExecutor | None = None,
    ) -> TransparencyLog:
        """Recover the tree of an open receipts ``journal`` and follow its appends.

        With ``executor`` (a single thread its owner keeps, and shuts down) the log's
        blocking work runs there; otherwise in a thread of the log's own.

        Raises:
            ValueError: the journal is not a RECEIPTS journal (only those keep a tree base).
            LogMismatch: the journal, its tree base and its stored checkpoint disagree (a cut
                tail, a rewrite, a forged or foreign checkpoint).
            JournalCorrupt, JournalTampered: the journal does not scan.
            JournalFailed, JournalClosed: the journal is not running.
        """
        if journal.writer.kind is not JournalKind.RECEIPTS:
            raise ValueError(
                f"a transparency log needs a RECEIPTS journal, not {journal.writer.kind.name}"
            )
        log = cls(journal, hmac_key, signing_key, storage or PosixStorage(), executor)
        journal.writer.add_commit_listener(log._on_commit)
        try:
            status = await journal.status()
            tree, sessions, stored = await log._run(
                log._recover_blocking, status.journal_id, status.seq
            )
        except BaseException:
            journal.writer.remove_commit_listener(log._on_commit)
            if log._owns_executor:
                log._executor.shutdown(wait=False)
            raise
        log._tree, log._sessions, log._checkpoint = tree, sessions, stored
        log._folded = log._seen = tree.size
        early, log._early = log._early or [], None
        log._on_commit([e for e in early if e.seq > tree.size])
        return log

    def _recover_blocking(
        self, journal_id: bytes, upto: int
    ) -> tuple[StoredTree, dict[str, Entry], SignedCheckpoint | None]:
        hashes = HashFile(Path(self.path) / HASHES_NAME)
        try:
            tree, sessions, _ = recover_tree(
                self._storage, self.path, self._key, journal_id, hashes, upto=upto
            )
            _check_size(tree, upto)
            stored = load_checkpoint(self._storage, self.path, self.signing_key.verifier)
            if stored is not None:
                check_checkpoint(tree, stored, self.path)
        except BaseException:
            hashes.close()
            raise
        return tree, sessions, stored

    def _on_commit(self, entries: Sequence[Entry]) -> None:
        if self._early is not None:  # still recovering: replayed once the tree is rebuilt
            self._early.extend(entries)
            return
        for entry in entries:
            if entry.seq != self._seen + 1:
                raise LogMismatch(f"the journal committed record {entry.seq}, not {self._seen + 1}")
            self._pending.append(leaf_hash(entry.payload))
            self._seen += 1
            session_id = session_of(entry)
            if session_id is not None:
                self._sessions[session_id] = Entry(entry.seq, entry.kind, b"", *entry.place)

    # -- appending and checkpoints --------------------------------------------------------

    @property
    def size(self) -> int:
        """Leaves in the tree: every durable record of the journal."""
        return self._seen

    def receipt_seq(self, session_id: str) -> int | None:
        """The sequence number of the last receipt of ``session_id``, if the log holds one."""
        entry = self._sessions.get(session_id)
        return entry.seq if entry is not None else None

    @property
    def last_checkpoint(self) -> SignedCheckpoint | None:
        """The last checkpoint signed and stored (or recovered at open)."""
        return self._checkpoint

    async def append_receipt(
        self,
        payload: bytes,
        *,
        kind: RecordKind = RecordKind.RECEIPT,
        timeout: float = APPEND_TIMEOUT_S,
    ) -> tuple[Receipt, int]:
        """Append a receipt durably; return its journal receipt and its leaf index.

        ``payload`` is a strict JSON object with a string ``session_id``; it is the entry,
        byte for byte, that a bundle later shows.

        Raises:
            ReceiptPayloadInvalid: the payload is not such an object.
            ValueError: ``kind`` is not RECEIPT or REFINEMENT.
            JournalClosed: the log was closed.
            JournalError, Busy, DeadlineExceeded: as :meth:`Journal.append`.
        """
        if self._closed:
            raise JournalClosed(f"transparency log {self.path} is closed")
        if kind not in APPENDABLE_KINDS:
            raise ValueError(f"a receipt is a RECEIPT or REFINEMENT record, not {kind!r}")
        parse_receipt_payload(payload)
        receipt = await self.journal.append(payload, kind=kind, timeout=timeout)
        if len(self._pending) >= MAX_PENDING_LEAVES and not self._lock.locked():
            async with self._lock:
                await self._fold()
        return receipt, receipt.seq - 1

    async def _fold(self) -> None:
        """Fold pending leaf hashes into the tree file (the caller holds the lock)."""
        if not self._pending:
            return
        leaves, self._pending = self._pending, []
        tree = self._require_tree()
        try:
            await self._run(tree.append, leaves)
        except BaseException:
            self._pending[:0] = leaves  # nothing was lost from the loop's view
            raise
        self._folded += len(leaves)

    async def checkpoint(self) -> SignedCheckpoint:
        """Sign a checkpoint of the tree as it stands and store it durably.

        Called at every terminal receipt and at shutdown: the checkpoint then covers (seals)
        every receipt durable when the call was made, the session's final one included.
        Concurrent calls share checkpoints: one signed while a call waited is returned if it
        covers that much (and the stored one if the tree has not grown).

        Raises:
            JournalClosed: the log was closed.
            OSError: the checkpoint could not be written (the old one stays in place).
        """
        if self._closed:
            raise JournalClosed(f"transparency log {self.path} is closed")
        want = self._seen
        async with self._lock:
            # Group commit for checkpoints: one signed while this call waited may already
            # cover every record that was durable when it was made.
            if self._checkpoint is not None and self._checkpoint.size >= want:
                return self._checkpoint
            await self._fold()
            signed = await self._run(self._sign_blocking)
            self._checkpoint = signed
            return signed

    def _sign_blocking(self) -> SignedCheckpoint:
        tree = self._require_tree()
        head = Checkpoint(self.signing_key.name, tree.size, tree.root())
        signed = sign_checkpoint(head, self.signing_key)
        store_checkpoint(self._storage, self.path, signed)
        return signed

    # -- proofs and bundles ---------------------------------------------------------------

    async def export_bundle(self, session_id: str, *, since: Checkpoint | None = None) -> bytes:
        """The bundle of the session's final receipt, under the latest checkpoint.

        A checkpoint is issued first if the stored one does not cover the receipt yet.
        With ``since`` (an older checkpoint of this log the recipient holds), the bundle
        also carries the consistency proof from it.

        Raises:
            SessionNotFound: the log holds no receipt of that session.
            LogMismatch: ``since`` is not in this log's history, or the journal and the tree
                disagree.
        """
        last = self._sessions.get(session_id)
        if last is None:
            raise SessionNotFound(f"no receipt of session {session_id!r} in {self.path}")
        if self._checkpoint is None or self._checkpoint.size < last.seq:
            await self.checkpoint()
        async with self._lock:
            signed = self._checkpoint
            assert signed is not None
            return await self._run(self._bundle_blocking, last, signed, since)

    def _bundle_blocking(
        self, last: Entry, signed: SignedCheckpoint, since: Checkpoint | None
    ) -> bytes:
        try:
            entry = read_entry_at(self._storage, self.path, last.segment, last.offset, last.seq)
        except FileNotFoundError as exc:
            raise SessionNotFound(
                f"the receipts of that session were acknowledged and deleted with their "
                f"segment (record {last.seq})"
            ) from exc
        return build_bundle(self._require_tree(), signed, entry, self.signing_key.verifier, since)

    async def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """The consistency proof between two tree sizes the log holds.

        Raises:
            LogMismatch: a size beyond the tree, below its base, or ``old_size`` of 0.
        """
        async with self._lock:
            await self._fold()
            return await self._run(self._require_tree().consistency_proof, old_size, new_size)

    # -- closing --------------------------------------------------------------------------

    async def close(self, *, seal: bool = True) -> None:
        """Issue a last checkpoint (unless ``seal`` is false), stop following the journal,
        and close it if this log opened it.

        Raises:
            JournalFailed: the journal had failed (its reason is the cause).
            OSError: the last checkpoint could not be written.
        """
        if self._closed:
            return
        try:
            if seal and self.journal.writer.state == "running":
                await self.checkpoint()
        finally:
            self._closed = True
            self.journal.writer.remove_commit_listener(self._on_commit)
            tree, self._tree = self._tree, None
            if tree is not None:
                await self._run(tree.close)
            if self._owns_executor:
                self._executor.shutdown(wait=True)
            if self._owns_journal:
                await self.journal.close()

    # -- helpers --------------------------------------------------------------------------

    def _require_tree(self) -> StoredTree:
        if self._tree is None:
            raise JournalClosed(f"transparency log {self.path} is closed")
        return self._tree

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))


def _check_size(tree: StoredTree, records: int) -> None:
    if tree.size != records:
        raise LogMismatch(f"the journal holds {tree.size} records, its writer {records}")


async def open_transparency_log(
    path: str | Path,
    hmac_key: bytes,
    signing_key: SigningKey,
    *,
    limits: JournalLimits | None = None,
    storage: Storage | None = None,
    name: str = "receipts",
) -> TransparencyLog:
    """Open (recovering) the receipts journal at ``path`` and its transparency log.

    The log owns the journal: :meth:`TransparencyLog.close` closes both.

    Raises:
        LogMismatch: the journal and its stored checkpoint disagree (see ``attach``).
        JournalLocked, JournalCorrupt, JournalTampered, UnsupportedFormat, JournalFailed:
            the journal could not be opened.
    """
    journal = await open_journal(
        path, hmac_key, kind=JournalKind.RECEIPTS, limits=limits, storage=storage, name=name
    )
    try:
        log = await TransparencyLog.attach(
            journal, hmac_key=hmac_key, signing_key=signing_key, storage=storage
        )
    except BaseException:
        await journal.close()
        raise
    log._owns_journal = True
    return log
