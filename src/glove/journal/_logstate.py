"""What the log owner and the offline tools share: rebuild the tree, check the stored
checkpoint against it, build a bundle (blocking; run in an executor).

Files in the receipts journal directory, beside the segments::

    checkpoint     the last signed checkpoint (a C2SP signed note, text); temp, fsync,
                   rename, fsync dir
    tree-hashes    the tree's stored hashes: a cache, rebuilt from the journal at every open
    tree-base      the compact range of deleted segments (see _treebase)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from glove.journal._bundle import (
    ConsistencyEvidence,
    ReceiptBundle,
    encode_bundle,
    parse_receipt_payload,
    verify_bundle,
)
from glove.journal._checkpoint import Checkpoint, SignedCheckpoint, open_checkpoint
from glove.journal._codec import RecordKind
from glove.journal._entries import Entry, first_retained_seq, iter_entries
from glove.journal._keys import VerifierKey
from glove.journal._merkle import leaf_hash, stored_index
from glove.journal._note import MAX_NOTE_BYTES
from glove.journal._storage import Storage
from glove.journal._tree import HashFile, StoredTree
from glove.journal._treebase import read_base
from glove.journal.errors import (
    LogMismatch,
    NoteError,
    NotSealed,
    ReceiptError,
    ReceiptPayloadInvalid,
    SignatureInvalid,
)

CHECKPOINT_NAME: Final = "checkpoint"
SESSION_KINDS: Final = frozenset({int(RecordKind.RECEIPT), int(RecordKind.REFINEMENT)})
"""Record kinds whose payload is a receipt naming a session (indexed by session id)."""

_log = logging.getLogger("glove.journal")


def session_of(entry: Entry) -> str | None:
    """The session a receipt entry belongs to, or None for any other entry."""
    if entry.kind not in SESSION_KINDS:
        return None
    try:
        session_id: str = parse_receipt_payload(entry.payload)["session_id"]
    except ReceiptPayloadInvalid:
        return None
    return session_id


def recover_tree(
    storage: Storage,
    path: str,
    key: bytes | None,
    journal_id: bytes,
    hashes: HashFile,
    *,
    upto: int | None = None,
    want: str | None = None,
) -> tuple[StoredTree, dict[str, Entry], Entry | None]:
    """Rebuild the tree of the journal at ``path`` (records up to ``upto``) into ``hashes``.

    Returns the tree, the last receipt of every session (its place, without the payload),
    and the last receipt of session ``want`` with its payload (if asked for and found).

    Raises:
        LogMismatch: segments were deleted but the tree base does not cover them.
        JournalCorrupt, JournalTampered, UnsupportedFormat: the journal does not scan.
        OSError: a file cannot be read.
    """
    base = read_base(storage, path, key, journal_id)
    first = first_retained_seq(storage, path)
    # The base may already cover the oldest segment(s): the writer folds a segment into it
    # before unlinking the file, and may have died in between. Those records are skipped.
    if base.size < first - 1:
        raise LogMismatch(
            f"the journal's oldest record is {first} but the tree base covers {base.size} "
            "deleted leaves: the tree cannot be recovered"
        )
    tree = StoredTree(hashes, base)
    sessions: dict[str, Entry] = {}
    found: list[Entry] = []

    def entries() -> Iterator[tuple[int, bytes]]:
        for entry in iter_entries(storage, path, key, upto=upto):
            if entry.seq <= base.size:
                continue
            session_id = session_of(entry)
            if session_id is not None:
                sessions[session_id] = Entry(entry.seq, entry.kind, b"", *entry.place)
                if session_id == want:
                    found[:] = [entry]
            yield entry.seq, entry.payload

    rewritten = tree.rebuild_from(entries())
    if rewritten:
        _log.info("journal %s: rewrote %d stale tree hashes", path, rewritten)
    return tree, sessions, found[0] if found else None


def load_checkpoint(storage: Storage, path: str, verifier: VerifierKey) -> SignedCheckpoint | None:
    """The stored checkpoint, verified with ``verifier``; None if none was stored yet.

    Raises:
        LogMismatch: it is malformed, too large, of another log, or not signed by the key.
        OSError: it cannot be read.
    """
    where = str(Path(path) / CHECKPOINT_NAME)
    if not storage.exists(where):
        return None
    data = storage.read_file(where)
    if len(data) > MAX_NOTE_BYTES:
        raise LogMismatch(f"the stored checkpoint {where} is larger than a checkpoint")
    try:
        return open_checkpoint(data, verifier)
    except (NoteError, SignatureInvalid) as exc:
        raise LogMismatch(f"the stored checkpoint {where} does not verify: {exc}") from exc


def store_checkpoint(storage: Storage, path: str, signed: SignedCheckpoint) -> None:
    """Write the checkpoint: temp file, fsync, rename, no directory fsync. A power cut may
    leave the previous checkpoint in place, which the tree still extends (every record it
    covers was durable before it was signed); gloved signs again at its next start."""
    storage.replace_file(str(Path(path) / CHECKPOINT_NAME), signed.note.encode("utf-8"))


def check_checkpoint(tree: StoredTree, signed: SignedCheckpoint, where: str) -> None:
    """Refuse a tree that does not extend the stored checkpoint.

    Raises:
        LogMismatch: the journal ends before the checkpoint (its tail was cut) or its root
            at the checkpoint's size differs (it was rewritten).
    """
    if signed.size > tree.size:
        raise LogMismatch(
            f"journal {where} ends at {tree.size} records but its signed checkpoint covers "
            f"{signed.size}: the tail was cut"
        )
    if signed.size < tree.base.size:
        _log.warning(
            "journal %s: the stored checkpoint (%d leaves) predates the tree base (%d); its "
            "consistency cannot be checked",
            where,
            signed.size,
            tree.base.size,
        )
        return
    if tree.root(signed.size) != signed.root:
        raise LogMismatch(
            f"journal {where} was rewritten: its tree at {signed.size} records does not have "
            "the root its signed checkpoint holds"
        )


def build_bundle(
    tree: StoredTree,
    signed: SignedCheckpoint,
    entry: Entry,
    verifier: VerifierKey,
    since: Checkpoint | None = None,
) -> bytes:
    """The bundle of receipt ``entry`` under ``signed``, checked before it is returned.

    Raises:
        NotSealed: the checkpoint does not cover the entry.
        LogMismatch: the tree disagrees with the entry, ``since`` is not in this log's
            history, or the bundle does not verify.
    """
    index = entry.seq - 1
    if index >= signed.size:
        raise NotSealed(
            f"the stored checkpoint covers {signed.size} records; the receipt is record "
            f"{entry.seq}: the session is not sealed yet"
        )
    if tree.read([stored_index(0, index)])[0] != leaf_hash(entry.payload):
        raise LogMismatch(f"the tree's leaf {index} is not the journal's record {entry.seq}")
    receipt = parse_receipt_payload(entry.payload)
    consistency = None
    if since is not None:
        if since.origin != signed.checkpoint.origin:
            raise LogMismatch(f"that checkpoint is of log {since.origin!r}, not of this one")
        if since.size > signed.size or tree.root(since.size) != since.root:
            raise LogMismatch(
                f"that checkpoint (size {since.size}) is not in this log's history: the log "
                "forked, or the checkpoint is not this log's"
            )
        proof = tree.consistency_proof(since.size, signed.size)
        consistency = ConsistencyEvidence(since.size, since.root, tuple(proof))
    bundle = ReceiptBundle(
        session_id=receipt["session_id"],
        receipt=receipt,
        checkpoint=signed.note,
        tree_size=signed.size,
        leaf_index=index,
        leaf=entry.payload,
        inclusion_proof=tuple(tree.inclusion_proof(index, signed.size)),
        consistency=consistency,
    )
    data = encode_bundle(bundle)
    try:
        verify_bundle(data, verifier)
    except ReceiptError as exc:
        raise LogMismatch(f"the bundle built from the journal does not verify: {exc}") from exc
    return data
