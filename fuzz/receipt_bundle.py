"""Fuzz target: bytes -> the receipt bundle decoder and verifier, notes, checkpoints, keys.

Contract under test: ``decode_bundle`` returns a bundle or raises ``BundleMalformed``, and a
decoded bundle re-encodes to exactly its input; ``verify_bundle`` returns a verified receipt
or raises one of the receipt errors (never anything else); the note, checkpoint and verifier
key parsers raise only their typed errors.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from journal_common import run

from glove.journal import (
    Checkpoint,
    ConsistencyEvidence,
    ReceiptBundle,
    ReceiptError,
    SigningKey,
    SigningKeyError,
    decode_bundle,
    encode_bundle,
    parse_verifier_key,
    sign_checkpoint,
    verify_bundle,
)
from glove.journal._checkpoint import parse_checkpoint_text
from glove.journal._merkle import CompactRange, consistency_proof, inclusion_proof, leaf_hash
from glove.journal._note import parse_note
from glove.journal.errors import BundleMalformed, NoteError

KEY = SigningKey("example.com/fuzz-log", bytes(range(32)))
VERIFIER = KEY.verifier


def seed_inputs() -> list[bytes]:
    """Valid bundles (with and without a consistency proof), a checkpoint, a key line."""
    entries = [
        b'{"session_id":"s%d","n":%d,"t":"d\\u00e9j\\u00e0","x":1.5e-07,"ok":true}' % (i % 3, i)
        for i in range(11)
    ]
    store: list[bytes] = []
    tree = CompactRange()
    for entry in entries:
        store.extend(tree.append(leaf_hash(entry)))
    read = lambda indexes: [store[i] for i in indexes]  # noqa: E731
    signed = sign_checkpoint(Checkpoint(KEY.name, tree.size, tree.root()), KEY)
    old = CompactRange.read(4, read)
    out = []
    for index in (0, 5, 10):
        for since in (None, 4):
            consistency = None
            if since is not None:
                proof = tuple(consistency_proof(since, tree.size, read))
                consistency = ConsistencyEvidence(since, old.root(), proof)
            bundle = ReceiptBundle(
                session_id=f"s{index % 3}",
                receipt=json.loads(entries[index]),
                checkpoint=signed.note,
                tree_size=tree.size,
                leaf_index=index,
                leaf=entries[index],
                inclusion_proof=tuple(inclusion_proof(index, tree.size, read)),
                consistency=consistency,
            )
            out.append(encode_bundle(bundle))
    return [*out, signed.note.encode(), VERIFIER.text.encode()]


def one_input(data: bytes) -> None:
    """Decode and verify ``data`` every way a bundle is read; only typed errors allowed."""
    try:
        bundle = decode_bundle(data)
    except BundleMalformed:
        pass
    else:
        assert encode_bundle(bundle) == data
    with contextlib.suppress(ReceiptError):
        verify_bundle(data, VERIFIER)
    try:
        note = parse_note(data)
    except NoteError:
        pass
    else:
        with contextlib.suppress(NoteError):
            parse_checkpoint_text(note.text)
    with contextlib.suppress(SigningKeyError):
        parse_verifier_key(data.decode("utf-8", "replace"))


if __name__ == "__main__":
    run("bundle", one_input, seed_inputs)
