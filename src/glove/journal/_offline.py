"""Offline export and consistency proofs, from a receipts journal directory (blocking).

These run without the daemon and without the HMAC key, and never write into the journal
directory: the tree is rebuilt into a private temporary file from the segments (checked for
framing, CRCs and order) and the tree base, and everything is checked against the stored
checkpoint, whose signature must verify under the log's key. A journal that is being written
to meanwhile is fine: only records the signed checkpoint covers are used.
"""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

from glove.journal._checkpoint import Checkpoint, SignedCheckpoint
from glove.journal._entries import Entry
from glove.journal._keys import VerifierKey
from glove.journal._logstate import build_bundle, check_checkpoint, load_checkpoint, recover_tree
from glove.journal._storage import PosixStorage, Storage
from glove.journal._tree import HashFile, StoredTree
from glove.journal.errors import LogMismatch, NotSealed, SessionNotFound


def _signed_checkpoint(storage: Storage, path: str, verifier: VerifierKey) -> SignedCheckpoint:
    if not storage.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no such journal directory", path)
    signed = load_checkpoint(storage, path, verifier)
    if signed is None:
        raise NotSealed(f"{path} holds no checkpoint yet: nothing is sealed")
    return signed


def export_offline(
    path: str | Path,
    session_id: str,
    verifier: VerifierKey,
    *,
    since: Checkpoint | None = None,
    storage: Storage | None = None,
) -> bytes:
    """The bundle of the session's final receipt under the journal's stored checkpoint.

    Raises:
        NotSealed: no checkpoint is stored, or it does not cover the session's final receipt.
        SessionNotFound: the journal holds no receipt of that session.
        LogMismatch: the journal and its checkpoint disagree (a cut tail, a rewrite), the
            checkpoint is not signed by ``verifier``, or ``since`` is not in its history.
        JournalCorrupt, JournalTampered, UnsupportedFormat: the journal does not scan.
        OSError: the directory or a file in it cannot be read.
    """
    store = storage if storage is not None else PosixStorage()
    where = str(path)
    signed = _signed_checkpoint(store, where, verifier)
    with tempfile.TemporaryDirectory(prefix="glove-export-") as scratch:
        tree, _, entry = _rebuild(store, where, scratch, want=session_id)
        try:
            check_checkpoint(tree, signed, where)
            if entry is None:
                raise SessionNotFound(f"no receipt of session {session_id!r} in {where}")
            return build_bundle(tree, signed, entry, verifier, since)
        finally:
            tree.close()


def consistency_offline(
    path: str | Path,
    old: Checkpoint,
    new: Checkpoint,
    verifier: VerifierKey,
    *,
    storage: Storage | None = None,
) -> list[bytes]:
    """The consistency proof from ``old`` to ``new``, both checked against the journal.

    Raises:
        LogMismatch: the journal does not hold a tree with both roots (one of them is not in
            its history, or the journal was cut or rewritten).
        NotSealed: the journal has no stored checkpoint.
        JournalCorrupt, JournalTampered, UnsupportedFormat: the journal does not scan.
        OSError: a file cannot be read.
    """
    store = storage if storage is not None else PosixStorage()
    where = str(path)
    signed = _signed_checkpoint(store, where, verifier)
    with tempfile.TemporaryDirectory(prefix="glove-consistency-") as scratch:
        tree, _, _ = _rebuild(store, where, scratch)
        try:
            check_checkpoint(tree, signed, where)
            for head in (old, new):
                if head.size > tree.size or tree.root(head.size) != head.root:
                    raise LogMismatch(
                        f"the journal's tree has no root {head.root.hex()} at size {head.size}"
                    )
            return tree.consistency_proof(old.size, new.size)
        finally:
            tree.close()


def _rebuild(
    storage: Storage, path: str, scratch: str, *, want: str | None = None
) -> tuple[StoredTree, dict[str, Entry], Entry | None]:
    hashes = HashFile(Path(scratch) / "tree-hashes")
    try:
        return recover_tree(storage, path, None, b"", hashes, want=want)
    except BaseException:
        hashes.close()
        raise
