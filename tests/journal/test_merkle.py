"""RFC 6962 / RFC 9162 Merkle trees against the published Certificate Transparency vectors."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.journal import (
    EMPTY_ROOT,
    ProofInvalid,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)
from glove.journal._merkle import (
    CompactRange,
    consistency_proof,
    inclusion_proof,
    root_of,
    stored_count,
    stored_index,
    tree_hash,
)

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "merkle"
GOLDEN = json.loads((VECTORS / "rfc6962-golden.json").read_text())
PROBES = VECTORS / "transparency-dev"
# transparency-dev accepts this probe's 12-byte "roots" because equal sizes short-circuit
# before any hashing; Glove refuses every hash that is not 32 bytes, so it fails closed here.
STRICTER_THAN_UPSTREAM = {"consistency/additional/sizes-are-equal-one-and-proof-is-empty.json"}


def _h(text: str) -> bytes:
    return bytes.fromhex(text)


def _b64(value: str | None) -> bytes:
    return base64.b64decode(value) if value is not None else b""


class _Store:
    """A list of stored hashes built by a CompactRange, readable by index."""

    def __init__(self, leaves: list[bytes]) -> None:
        self.hashes: list[bytes] = []
        self.range = CompactRange()
        for leaf in leaves:
            self.hashes.extend(self.range.append(leaf))

    def read(self, indexes: Any) -> list[bytes]:
        return [self.hashes[i] for i in indexes]


GOLDEN_LEAVES = [leaf_hash(_h(x)) for x in GOLDEN["leaves"]]


@pytest.mark.parametrize("case", GOLDEN["hashes"], ids=lambda c: c["desc"])
def test_hasher_vectors(case: dict[str, str]) -> None:
    """The empty root, leaf and node hashes match RFC 6962's published values."""
    if case["fn"] == "empty_root":
        got = EMPTY_ROOT
    elif case["fn"] == "leaf":
        got = leaf_hash(_h(case["entry"]))
    else:
        got = node_hash(_h(case["left"]), _h(case["right"]))
    assert got.hex() == case["want"]


def test_roots_of_the_eight_leaf_tree() -> None:
    """The tree hash of every prefix of the CT test tree is the published root, three ways."""
    store = _Store(GOLDEN_LEAVES)
    for size, want in enumerate(GOLDEN["roots"], start=1):
        assert root_of(GOLDEN_LEAVES[:size]).hex() == want
        assert tree_hash(size, store.read).hex() == want
        assert CompactRange.read(size, store.read).root().hex() == want
    assert len(store.hashes) == stored_count(8)


@pytest.mark.parametrize("case", GOLDEN["inclusion"], ids=lambda c: f"{c['index']}-{c['size']}")
def test_inclusion_proofs_are_generated_byte_for_byte(case: dict[str, Any]) -> None:
    """Inclusion proofs equal the published ones and verify against the published root."""
    store = _Store(GOLDEN_LEAVES)
    proof = inclusion_proof(case["index"], case["size"], store.read)
    assert [p.hex() for p in proof] == case["proof"]
    root = _h(GOLDEN["roots"][case["size"] - 1])
    verify_inclusion(case["index"], case["size"], GOLDEN_LEAVES[case["index"]], proof, root)


@pytest.mark.parametrize("case", GOLDEN["consistency"], ids=lambda c: f"{c['old']}-{c['new']}")
def test_consistency_proofs_are_generated_byte_for_byte(case: dict[str, Any]) -> None:
    """Consistency proofs equal the published ones and verify between the published roots."""
    store = _Store(GOLDEN_LEAVES)
    proof = consistency_proof(case["old"], case["new"], store.read)
    assert [p.hex() for p in proof] == case["proof"]
    old_root, new_root = _h(GOLDEN["roots"][case["old"] - 1]), _h(GOLDEN["roots"][case["new"] - 1])
    verify_consistency(case["old"], case["new"], old_root, new_root, proof)


def _probe_files(kind: str) -> list[Path]:
    files = sorted((PROBES / kind).rglob("*.json"))
    assert files, f"no {kind} probes under {PROBES}"
    return files


@pytest.mark.parametrize(
    "path", _probe_files("inclusion"), ids=lambda p: str(p.relative_to(PROBES))
)
def test_transparency_dev_inclusion_probes(path: Path) -> None:
    """Every inclusion probe of transparency-dev/merkle: happy paths hold, must-fails fail."""
    probe = json.loads(path.read_text())
    args = (
        probe["leafIdx"],
        probe["treeSize"],
        _b64(probe["leafHash"]),
        [_b64(p) for p in probe["proof"] or []],
        _b64(probe["root"]),
    )
    if probe["wantErr"]:
        with pytest.raises(ProofInvalid):
            verify_inclusion(*args)
    else:
        verify_inclusion(*args)


@pytest.mark.parametrize(
    "path", _probe_files("consistency"), ids=lambda p: str(p.relative_to(PROBES))
)
def test_transparency_dev_consistency_probes(path: Path) -> None:
    """Every consistency probe of transparency-dev/merkle: happy paths hold, must-fails fail."""
    probe = json.loads(path.read_text())
    args = (
        probe["size1"],
        probe["size2"],
        _b64(probe["root1"]),
        _b64(probe["root2"]),
        [_b64(p) for p in probe["proof"] or []],
    )
    if probe["wantErr"] or str(path.relative_to(PROBES)) in STRICTER_THAN_UPSTREAM:
        with pytest.raises(ProofInvalid):
            verify_consistency(*args)
    else:
        verify_consistency(*args)


def test_stored_index_layout() -> None:
    """Stored hashes sit where the layout says: leaf i at 2i - popcount(i), nodes after it."""
    store = _Store([leaf_hash(bytes([i])) for i in range(37)])
    for i in range(37):
        assert store.hashes[stored_index(0, i)] == leaf_hash(bytes([i]))
    for level in range(1, 6):
        for number in range(37 >> level):
            left = store.hashes[stored_index(level - 1, 2 * number)]
            right = store.hashes[stored_index(level - 1, 2 * number + 1)]
            assert store.hashes[stored_index(level, number)] == node_hash(left, right)


@settings(max_examples=150, deadline=None)
@given(size=st.integers(1, 300), data=st.data())
def test_generated_proofs_verify_and_mutations_fail(size: int, data: st.DataObject) -> None:
    """For random trees, every generated proof verifies and any changed bit makes it fail."""
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(size)]
    store = _Store(leaves)
    root = root_of(leaves)
    assert store.range.root() == root
    index = data.draw(st.integers(0, size - 1))
    proof = inclusion_proof(index, size, store.read)
    verify_inclusion(index, size, leaves[index], proof, root)
    if proof:
        which, bit = data.draw(st.integers(0, len(proof) - 1)), data.draw(st.integers(0, 255))
        bad = list(proof)
        bad[which] = (int.from_bytes(bad[which], "big") ^ (1 << bit)).to_bytes(32, "big")
        with pytest.raises(ProofInvalid):
            verify_inclusion(index, size, leaves[index], bad, root)
        with pytest.raises(ProofInvalid):
            verify_inclusion(index, size, leaves[index], proof[:-1], root)
    with pytest.raises(ProofInvalid):
        verify_inclusion(index, size, leaves[index], [*proof, root], root)
    if size > 1:
        with pytest.raises(ProofInvalid):
            verify_inclusion((index + 1) % size, size, leaves[index], proof, root)
    old = data.draw(st.integers(1, size))
    cproof = consistency_proof(old, size, store.read)
    old_root = root_of(leaves[:old])
    verify_consistency(old, size, old_root, root, cproof)
    if cproof:
        bad = list(cproof)
        bad[0] = bytes(32)
        with pytest.raises(ProofInvalid):
            verify_consistency(old, size, old_root, root, bad)
    if old < size:
        with pytest.raises(ProofInvalid):
            verify_consistency(old, size, root_of([*leaves[: old - 1], bytes(32)]), root, cproof)
        with pytest.raises(ProofInvalid):
            verify_consistency(size, old, root, old_root, cproof)


def test_proofs_refuse_out_of_range_requests() -> None:
    """Asking for a proof of a leaf outside the tree, or from size 0, is a ValueError."""
    store = _Store(GOLDEN_LEAVES)
    with pytest.raises(ValueError, match="not in a tree"):
        inclusion_proof(8, 8, store.read)
    with pytest.raises(ValueError, match="no consistency proof"):
        consistency_proof(0, 8, store.read)
    with pytest.raises(ValueError, match="no consistency proof"):
        consistency_proof(5, 4, store.read)
    assert consistency_proof(8, 8, store.read) == []
