"""RFC 6962 / RFC 9162 Merkle tree hashing, proofs and their verification (sans-IO).

Hashing (RFC 9162 §2.1.1)::

    MTH({})      = SHA-256()
    leaf hash    = SHA-256(0x00 || entry)
    MTH(D[n])    = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])),  k the largest power of 2 < n

Proofs are generated as RFC 9162 §2.1.3.1 (``PATH``) and §2.1.4.1 (``PROOF``/``SUBPROOF``)
define them, and verified with the algorithms of §2.1.3.2 and §2.1.4.2, step by step.

**Stored hashes.** A tree is kept as the hashes of its complete (perfect, aligned) subtrees in
the order they become complete: appending leaf ``i`` stores its leaf hash and then one node per
subtree that leaf completes. So the hash of the level-``l`` subtree number ``k`` (leaves
``[k·2^l, (k+1)·2^l)``) is stored at index ``2i - popcount(i) + l`` with ``i = (k+1)·2^l - 1``,
and ``n`` leaves have ``2n - popcount(n)`` stored hashes. The same layout is used by Go's
``sumdb/tlog``; it lets a proof be read with O(log n) lookups while the writer keeps only the
O(log n) right edge of the tree (:class:`CompactRange`) in memory.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from typing import Final

from glove.journal.errors import ProofInvalid

HASH_BYTES: Final = 32
LEAF_PREFIX: Final = b"\x00"
NODE_PREFIX: Final = b"\x01"
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
MAX_PROOF_HASHES: Final = 128
"""Most hashes a proof may hold (a tree of 2^63 leaves needs at most 64)."""

HashReader = Callable[[Sequence[int]], list[bytes]]
"""Reads stored hashes by index (see the module docstring), in the order asked."""


def leaf_hash(entry: bytes) -> bytes:
    """``SHA-256(0x00 || entry)``."""
    return hashlib.sha256(LEAF_PREFIX + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def stored_count(size: int) -> int:
    """Stored hashes of a tree of ``size`` leaves."""
    return 2 * size - size.bit_count()


def stored_index(level: int, number: int) -> int:
    """Index of the stored hash of level-``level`` subtree number ``number``."""
    last = ((number + 1) << level) - 1
    return 2 * last - last.bit_count() + level


def _largest_power_below(n: int) -> int:
    """The largest power of two strictly less than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def subtrees(lo: int, hi: int) -> list[tuple[int, int]]:
    """Split ``[lo, hi)`` into aligned perfect subtrees ``(level, number)``, left to right."""
    out: list[tuple[int, int]] = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        if lo:
            level = min(level, (lo & -lo).bit_length() - 1)
        out.append((level, lo >> level))
        lo += 1 << level
    return out


def fold_right(hashes: Sequence[bytes]) -> bytes:
    """``H(h0, H(h1, ... H(h_{n-2}, h_{n-1})))``: the root of a decomposition, big to small."""
    acc = hashes[-1]
    for value in reversed(hashes[:-1]):
        acc = node_hash(value, acc)
    return acc


def range_hash(lo: int, hi: int, read: HashReader) -> bytes:
    """``MTH(D[lo:hi])`` for a range whose decomposition runs big to small (every range the
    RFC's recursions produce: ``lo`` is aligned to a power of two at least ``hi - lo``).

    Raises:
        ValueError: an empty range, or one the RFC recursions never produce.
    """
    if lo >= hi:
        raise ValueError(f"empty range [{lo}, {hi})")
    parts = subtrees(lo, hi)
    if any(a[0] < b[0] for a, b in itertools.pairwise(parts)):
        raise ValueError(f"[{lo}, {hi}) is not a left-aligned range")
    return fold_right(read([stored_index(level, number) for level, number in parts]))


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """``MTH`` of a list of leaf hashes, straight from the definition (for tests and tools)."""
    if not leaf_hashes:
        return EMPTY_ROOT
    if len(leaf_hashes) == 1:
        return leaf_hashes[0]
    k = _largest_power_below(len(leaf_hashes))
    return node_hash(root_of(leaf_hashes[:k]), root_of(leaf_hashes[k:]))


class CompactRange:
    """The right edge of a tree: one hash per set bit of its size, biggest subtree first.

    O(log n) state; enough to append leaves (returning the hashes to store) and to compute
    the root of the whole tree.
    """

    def __init__(self, size: int = 0, nodes: Sequence[bytes] = ()) -> None:
        if len(nodes) != size.bit_count() or any(len(n) != HASH_BYTES for n in nodes):
            raise ValueError(f"a compact range of size {size} has {size.bit_count()} hashes")
        self.size = size
        self.nodes = list(nodes)

    @classmethod
    def read(cls, size: int, read: HashReader) -> CompactRange:
        """The compact range of the first ``size`` leaves, from stored hashes."""
        parts = subtrees(0, size)
        return cls(size, read([stored_index(level, number) for level, number in parts]))

    def node_indexes(self) -> list[int]:
        """The stored indexes of this range's hashes, in order."""
        return [stored_index(level, number) for level, number in subtrees(0, self.size)]

    def append(self, leaf: bytes) -> list[bytes]:
        """Append one leaf hash; return the hashes that become stored, in stored order."""
        stored = [leaf]
        value, n = leaf, self.size
        while n & 1:
            value = node_hash(self.nodes.pop(), value)
            stored.append(value)
            n >>= 1
        self.nodes.append(value)
        self.size += 1
        return stored

    def root(self) -> bytes:
        """The tree hash of all leaves appended so far."""
        return fold_right(self.nodes) if self.nodes else EMPTY_ROOT

    def copy(self) -> CompactRange:
        """An independent copy."""
        return CompactRange(self.size, self.nodes)


def tree_hash(size: int, read: HashReader) -> bytes:
    """``MTH(D[0:size])`` from stored hashes."""
    return EMPTY_ROOT if size == 0 else range_hash(0, size, read)


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes form ``PATH(index, D[size])``, bottom to top."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of size {size}")
    out: list[tuple[int, int]] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _largest_power_below(hi - lo)
        if index - lo < k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo += k
    out.reverse()
    return out


def consistency_ranges(old: int, new: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes form ``PROOF(old, D[new])``, bottom to top."""
    if not 0 < old <= new:
        raise ValueError(f"no consistency proof from size {old} to size {new}")
    out: list[tuple[int, int]] = []
    lo, hi, m, whole = 0, new, old, True
    while m != hi - lo:
        k = _largest_power_below(hi - lo)
        if m <= k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    if not whole:
        out.append((lo, hi))
    out.reverse()
    return out


def _hashes_of(ranges: list[tuple[int, int]], read: HashReader) -> list[bytes]:
    plans = [subtrees(lo, hi) for lo, hi in ranges]
    flat = read([stored_index(level, number) for plan in plans for level, number in plan])
    out, at = [], 0
    for plan in plans:
        out.append(fold_right(flat[at : at + len(plan)]))
        at += len(plan)
    return out


def inclusion_proof(index: int, size: int, read: HashReader) -> list[bytes]:
    """The inclusion proof of leaf ``index`` in the tree of ``size`` leaves (RFC 9162)."""
    return _hashes_of(inclusion_ranges(index, size), read)


def consistency_proof(old: int, new: int, read: HashReader) -> list[bytes]:
    """The consistency proof from size ``old`` to size ``new`` (RFC 9162; empty if equal)."""
    return _hashes_of(consistency_ranges(old, new), read)


def _check_hashes(proof: Sequence[bytes], *named: bytes) -> None:
    if len(proof) > MAX_PROOF_HASHES:
        raise ProofInvalid(f"a proof has at most {MAX_PROOF_HASHES} hashes")
    if any(len(h) != HASH_BYTES for h in (*proof, *named)):
        raise ProofInvalid(f"every hash is {HASH_BYTES} bytes")


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """Run RFC 9162 §2.1.3.2 and return the root the proof implies.

    Raises:
        ProofInvalid: the index is outside the tree, or the proof has the wrong shape.
    """
    _check_hashes(proof, leaf)
    if not 0 <= index < size:  # step 1
        raise ProofInvalid(f"leaf index {index} is not below tree size {size}")
    fn, sn = index, size - 1  # step 2
    r = leaf  # step 3
    for p in proof:  # step 4
        if sn == 0:  # 4a
            raise ProofInvalid("the inclusion proof is longer than the path")
        if fn & 1 or fn == sn:  # 4b
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1  # 4c
    if sn != 0:  # step 5
        raise ProofInvalid("the inclusion proof is shorter than the path")
    return r


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    Raises:
        ProofInvalid: it is not (or the proof is malformed).
    """
    _check_hashes((), root)
    if root_from_inclusion(index, size, leaf, proof) != root:
        raise ProofInvalid(f"leaf {index} is not in the tree of size {size} with that root")


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``new`` leaves with ``new_root`` extends the one of ``old``.

    Raises:
        ProofInvalid: it does not: a smaller new tree, a proof from the empty tree, or a
            proof that does not reproduce both roots (RFC 9162 §2.1.4.2).
    """
    _check_hashes(proof, old_root, new_root)
    if old > new:
        raise ProofInvalid(f"a tree of size {new} cannot extend one of size {old}")
    if old == 0:
        raise ProofInvalid("a consistency proof from the empty tree proves nothing")
    if old == new:
        if proof:
            raise ProofInvalid("trees of equal size need an empty consistency proof")
        if old_root != new_root:
            raise ProofInvalid(f"two different roots for the tree of size {old}")
        return
    fr, sr = _run_consistency(old, new, old_root, proof)
    if fr != old_root:
        raise ProofInvalid(f"the proof does not reproduce the root of size {old}")
    if sr != new_root:
        raise ProofInvalid(f"the proof does not reproduce the root of size {new}")


def _run_consistency(
    old: int, new: int, old_root: bytes, proof: Sequence[bytes]
) -> tuple[bytes, bytes]:
    """RFC 9162 §2.1.4.2 steps 1-7 for ``0 < old < new``: the two roots the proof implies."""
    if not proof:  # step 1
        raise ProofInvalid("the consistency proof is empty")
    path = list(proof)
    if old & (old - 1) == 0:  # step 2: first is an exact power of 2
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1  # step 3
    while fn & 1:  # step 4
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]  # step 5
    for c in path[1:]:  # step 6
        if sn == 0:  # 6a
            raise ProofInvalid("the consistency proof is longer than the path")
        if fn & 1 or fn == sn:  # 6b
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1  # 6c
    if sn != 0:  # step 7
        raise ProofInvalid("the consistency proof is shorter than the path")
    return fr, sr
