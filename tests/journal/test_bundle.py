"""Receipt bundles: strict decoding, and no changed bit, key, entry or proof goes unnoticed."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from glove.journal import (
    BundleMalformed,
    Checkpoint,
    EntryMismatch,
    NoteError,
    ProofInvalid,
    ReceiptBundle,
    ReceiptError,
    SignatureInvalid,
    decode_bundle,
    encode_bundle,
    leaf_hash,
    open_transparency_log,
    sign_checkpoint,
    verify_bundle,
)
from glove.journal._bundle import MAX_BUNDLE_BYTES
from tests.journal._tlog_helpers import OTHER_SIGNING_KEY, SIGNING_KEY, receipt

VERIFIER = SIGNING_KEY.verifier


async def _bundles(jdir: Path, key: bytes, *, since: bool = False) -> dict[str, bytes]:
    log = await open_transparency_log(jdir, key, SIGNING_KEY)
    await log.append_receipt(receipt("first", 0, note="d\u00e9j\u00e0 vu \u2014 1e5"))
    old = await log.checkpoint()
    for i in range(1, 11):
        await log.append_receipt(receipt(f"s{i % 3}", i, ratio=1.5e-7, ok=True, tags=["a", "b"]))
    out = {
        name: await log.export_bundle(name, since=old.checkpoint if since else None)
        for name in ("first", "s0", "s1", "s2")
    }
    await log.close()
    return out


def _rewrite(data: bytes, **changes: Any) -> bytes:
    """Re-encode a bundle canonically with some fields changed (a careful forger)."""
    bundle = decode_bundle(data)
    doc = json.loads(data)
    doc.update(changes)
    return encode_bundle(
        ReceiptBundle(
            session_id=doc["session_id"],
            receipt=doc["receipt"],
            checkpoint=doc["checkpoint"],
            tree_size=doc["tree_size"],
            leaf_index=doc["leaf_index"],
            leaf=base64.b64decode(doc["leaf"]),
            inclusion_proof=tuple(base64.b64decode(h) for h in doc["inclusion_proof"]),
            consistency=bundle.consistency,
        )
    )


async def test_every_single_bit_flip_fails(jdir: Path, key: bytes) -> None:
    """Flipping any one bit of a bundle (with a consistency proof) makes verify fail."""
    bundles = await _bundles(jdir, key, since=True)
    for name in ("first", "s1"):  # non-ASCII text and a float exponent; lists and booleans
        data = bundles[name]
        verify_bundle(data, VERIFIER)
        survivors = []
        for position in range(len(data)):
            for bit in range(8):
                mutant = bytearray(data)
                mutant[position] ^= 1 << bit
                try:
                    verify_bundle(bytes(mutant), VERIFIER)
                except ReceiptError:
                    continue
                survivors.append((position, bit))
        assert survivors == [], f"{name}: {len(survivors)} flips verified, e.g. {survivors[:3]}"
        assert len(data) > 600  # every one of its 5,000+ bits was flipped


async def test_bundle_from_another_key_fails(jdir: Path, key: bytes, tmp_path: Path) -> None:
    """A bundle verifies only with its log's key: another key (same name) refuses it."""
    data = (await _bundles(jdir, key))["s2"]
    assert verify_bundle(data, VERIFIER).session_id == "s2"
    with pytest.raises(SignatureInvalid):
        verify_bundle(data, OTHER_SIGNING_KEY.verifier)
    other = tmp_path / "other-log"
    log = await open_transparency_log(other, key, OTHER_SIGNING_KEY)
    await log.append_receipt(receipt("s2", 5))
    foreign = await log.export_bundle("s2")
    await log.close()
    with pytest.raises(SignatureInvalid):
        verify_bundle(foreign, VERIFIER)


async def test_spliced_and_shifted_entries_fail(jdir: Path, key: bytes) -> None:
    """Another receipt's leaf, a neighbour's index or a wrong size under a valid checkpoint."""
    bundles = await _bundles(jdir, key)
    s0, s1 = json.loads(bundles["s0"]), json.loads(bundles["s1"])
    with pytest.raises(ProofInvalid):  # s0's entry under s1's proof
        verify_bundle(_rewrite(bundles["s1"], leaf=s0["leaf"], receipt=s0["receipt"]), VERIFIER)
    for index in (s1["leaf_index"] - 1, s1["leaf_index"] + 1):
        with pytest.raises(ProofInvalid):
            verify_bundle(_rewrite(bundles["s1"], leaf_index=index), VERIFIER)
    with pytest.raises(ProofInvalid, match="tree_size"):
        verify_bundle(_rewrite(bundles["s1"], tree_size=s1["tree_size"] + 1), VERIFIER)
    with pytest.raises(ProofInvalid):
        verify_bundle(_rewrite(bundles["s1"], inclusion_proof=s1["inclusion_proof"][:-1]), VERIFIER)
    bad_note = s1["checkpoint"].replace(f"\n{s1['tree_size']}\n", "\n3\n")
    with pytest.raises(SignatureInvalid):  # an edited checkpoint no longer verifies
        verify_bundle(_rewrite(bundles["s1"], checkpoint=bad_note), VERIFIER)


async def test_receipt_shown_must_be_the_entry(jdir: Path, key: bytes) -> None:
    """The decoded receipt must equal the entry exactly, and name the bundle's session."""
    bundles = await _bundles(jdir, key)
    doc = json.loads(bundles["s1"])
    changed = dict(doc["receipt"], n=999)
    with pytest.raises(EntryMismatch, match="not the entry"):
        verify_bundle(_rewrite(bundles["s1"], receipt=changed), VERIFIER)
    with pytest.raises(EntryMismatch, match="not the entry"):  # true vs 1: equal in Python
        verify_bundle(_rewrite(bundles["s1"], receipt=dict(doc["receipt"], ok=1)), VERIFIER)
    reordered = dict(reversed(list(doc["receipt"].items())))
    with pytest.raises(EntryMismatch, match="not the entry"):
        verify_bundle(_rewrite(bundles["s1"], receipt=reordered), VERIFIER)
    with pytest.raises(EntryMismatch, match="session"):
        verify_bundle(_rewrite(bundles["s1"], session_id="s2"), VERIFIER)


async def test_decoder_is_strict(jdir: Path, key: bytes) -> None:
    """Duplicate, unknown or missing keys, wrong types, re-encodings and oversize: refused."""
    data = (await _bundles(jdir, key))["s0"]
    text = data.decode()
    doc = json.loads(data)
    cases = {
        "duplicate key": text.replace('"tree_size"', '"tree_size": 1, "tree_size"', 1),
        "escaped duplicate": text.replace('"leaf_index"', '"leaf_\\u0069ndex": 0, "leaf_index"', 1),
        "unknown field": text.replace("{", '{\n  "extra": 1,', 1),
        "compact": json.dumps(doc),
        "reindented": json.dumps(doc, indent=4, ensure_ascii=False) + "\n",
        "no final newline": text[:-1],
        "bool size": text.replace(f'"tree_size": {doc["tree_size"]}', '"tree_size": true'),
        "float size": text.replace(f'"tree_size": {doc["tree_size"]}', '"tree_size": 11.0'),
        "negative index": text.replace(f'"leaf_index": {doc["leaf_index"]}', '"leaf_index": -1'),
        "NaN": text.replace(f'"tree_size": {doc["tree_size"]}', '"tree_size": NaN'),
        "array": "[]\n",
        "format": text.replace("glove-receipt-bundle/v1", "glove-receipt-bundle/v2"),
        "short hash": text.replace(doc["inclusion_proof"][0], "AAAA"),
        "deep": "[" * 100 + "]" * 100,
        "not utf8": "\udcff",
    }
    for name, mutant in cases.items():
        raw = mutant.encode("utf-8", "surrogateescape")
        with pytest.raises(BundleMalformed):
            decode_bundle(raw)
        with pytest.raises(ReceiptError):
            verify_bundle(raw, VERIFIER)
        assert name
    missing = dict(doc)
    del missing["leaf"]
    with pytest.raises(BundleMalformed, match="lacks"):
        decode_bundle((json.dumps(missing, indent=2, ensure_ascii=False) + "\n").encode())
    with pytest.raises(BundleMalformed, match="at most"):
        decode_bundle(b" " * (MAX_BUNDLE_BYTES + 1))


async def test_consistency_evidence_must_hold(jdir: Path, key: bytes) -> None:
    """An embedded consistency proof from a root that is not the old tree's fails."""
    data = (await _bundles(jdir, key, since=True))["s0"]
    bundle = decode_bundle(data)
    assert bundle.consistency is not None
    assert verify_bundle(data, VERIFIER).consistency_from == (1, bundle.consistency.from_root)
    forged = dataclasses.replace(bundle.consistency, from_root=bytes(32))
    with pytest.raises(ProofInvalid):
        verify_bundle(encode_bundle(dataclasses.replace(bundle, consistency=forged)), VERIFIER)


def test_checkpoint_of_another_origin_in_a_bundle_fails() -> None:
    """A bundle whose checkpoint names another origin is refused even if the key signed it."""
    entry = receipt("a", 1)
    note = sign_checkpoint(Checkpoint("other.example/log", 1, leaf_hash(entry)), SIGNING_KEY)
    bundle = ReceiptBundle("a", json.loads(entry), note.note, 1, 0, entry, ())
    assert decode_bundle(encode_bundle(bundle)) == bundle
    with pytest.raises(NoteError, match="origin"):
        verify_bundle(encode_bundle(bundle), VERIFIER)
