"""The Merkle tree of a receipts journal: O(log n) in memory, its stored hashes in a file.

``PATH/tree-hashes`` holds the tree's stored hashes (32 bytes each, in the layout of
:mod:`glove.journal._merkle`), so a proof costs O(log n) reads while memory holds only the
compact range. The file is a **cache**: it is never fsync'ed, and every open rebuilds it from
the journal (and the tree base for deleted segments), comparing as it goes and rewriting only
what differs. What it must agree with is the signed checkpoint, which the log owner checks.

Blocking: run it in an executor. One thread at a time.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from glove.journal._merkle import (
    HASH_BYTES,
    CompactRange,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    stored_count,
    stored_index,
    subtrees,
    tree_hash,
)
from glove.journal._treebase import TreeBase
from glove.journal.errors import LogMismatch

HASHES_NAME: Final = "tree-hashes"
FILE_MODE: Final = 0o600
REBUILD_CHUNK_LEAVES: Final = 4096
"""Leaves hashed, compared and written per step of a rebuild."""


class HashFile:
    """A file of 32-byte hashes addressed by index (pread/pwrite)."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        self.path = str(path)
        self._fd = os.open(self.path, flags, FILE_MODE)
        self.count = os.fstat(self._fd).st_size // HASH_BYTES

    def read_range(self, start: int, count: int) -> bytes:
        """``count`` hashes from ``start``, concatenated (fewer bytes past the end)."""
        if count <= 0:
            return b""
        return os.pread(self._fd, count * HASH_BYTES, start * HASH_BYTES)

    def read(self, indexes: Sequence[int]) -> list[bytes]:
        """The hashes at ``indexes``.

        Raises:
            LogMismatch: an index is past the end of the file.
        """
        out = []
        for index in indexes:
            value = os.pread(self._fd, HASH_BYTES, index * HASH_BYTES)
            if len(value) != HASH_BYTES:
                raise LogMismatch(f"tree hash {index} is missing from {self.path}")
            out.append(value)
        return out

    def write(self, start: int, data: bytes) -> None:
        """Write concatenated hashes at index ``start``."""
        view, offset = memoryview(data), start * HASH_BYTES
        while view:
            done = os.pwrite(self._fd, view, offset)
            view, offset = view[done:], offset + done
        self.count = max(self.count, start + len(data) // HASH_BYTES)

    def truncate(self, count: int) -> None:
        """Keep only the first ``count`` hashes."""
        os.ftruncate(self._fd, count * HASH_BYTES)
        self.count = count

    def close(self) -> None:
        """Close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class StoredTree:
    """A Merkle tree whose stored hashes live in a :class:`HashFile`.

    Leaves below ``base.size`` were deleted with their segments: only the base's compact
    range is kept of them, which is all that proofs about later leaves and tree heads of at
    least ``base.size`` leaves need. Asking for anything else is a :class:`LogMismatch`.
    """

    def __init__(self, hashes: HashFile, base: TreeBase) -> None:
        self.file = hashes
        self.base = base
        self.range = base.compact_range()
        self._base_indexes = {stored_index(lv, n) for lv, n in subtrees(0, base.size)}
        self._floor = stored_count(base.size)
        if base.size:
            for (level, number), node in zip(subtrees(0, base.size), base.nodes, strict=True):
                self.file.write(stored_index(level, number), node)

    @property
    def size(self) -> int:
        """Leaves in the tree."""
        return self.range.size

    def read(self, indexes: Sequence[int]) -> list[bytes]:
        """Stored hashes by index (a :data:`~glove.journal._merkle.HashReader`).

        Raises:
            LogMismatch: an index belongs to the deleted part, or is not in the file.
        """
        for index in indexes:
            if index < self._floor and index not in self._base_indexes:
                raise LogMismatch(
                    f"that needs leaves below {self.base.size}, deleted with their segments"
                )
        return self.file.read(indexes)

    def append(self, leaves: Iterable[bytes]) -> None:
        """Append leaf hashes, writing their stored hashes to the file."""
        start = stored_count(self.range.size)
        out = bytearray()
        for leaf in leaves:
            for value in self.range.append(leaf):
                out += value
        if out:
            self.file.write(start, bytes(out))

    def rebuild_from(self, entries: Iterable[tuple[int, bytes]]) -> int:
        """Append ``(seq, payload)`` entries, reusing matching stored hashes already in the
        file and rewriting those that differ; drop whatever the file holds beyond.

        Returns how many stored hashes had to be rewritten.

        Raises:
            LogMismatch: the entries do not continue the tree (a gap or a repeat).
        """
        rewritten = 0
        chunk: list[bytes] = []
        for seq, payload in entries:
            if seq != self.range.size + len(chunk) + 1:
                raise LogMismatch(
                    f"record {seq} does not continue a tree of {self.range.size + len(chunk)}"
                )
            chunk.append(leaf_hash(payload))
            if len(chunk) >= REBUILD_CHUNK_LEAVES:
                rewritten += self._merge(chunk)
                chunk = []
        rewritten += self._merge(chunk)
        self.file.truncate(stored_count(self.range.size))
        return rewritten

    def _merge(self, leaves: list[bytes]) -> int:
        if not leaves:
            return 0
        start = stored_count(self.range.size)
        fresh = bytearray()
        for leaf in leaves:
            for value in self.range.append(leaf):
                fresh += value
        if self.file.read_range(start, len(fresh) // HASH_BYTES) == fresh:
            return 0
        self.file.write(start, bytes(fresh))
        return len(fresh) // HASH_BYTES

    def root(self, size: int | None = None) -> bytes:
        """The tree hash at ``size`` (default: now).

        Raises:
            LogMismatch: ``size`` is beyond the tree or below its base.
        """
        if size is None or size == self.size:
            return self.range.root()
        self._check_size(size)
        return tree_hash(size, self.read)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """The inclusion proof of leaf ``index`` in the tree of ``size`` leaves.

        Raises:
            LogMismatch: the leaf or the size is outside what the tree holds.
        """
        self._check_size(size)
        if not self.base.size <= index < size:
            raise LogMismatch(f"leaf {index} is not among leaves {self.base.size}..{size - 1}")
        return inclusion_proof(index, size, self.read)

    def consistency_proof(self, old: int, new: int) -> list[bytes]:
        """The consistency proof from ``old`` to ``new`` leaves.

        Raises:
            LogMismatch: a size outside what the tree holds.
        """
        self._check_size(new)
        self._check_size(old)
        if not 0 < old <= new:
            raise LogMismatch(f"no consistency proof from {old} to {new} leaves")
        return consistency_proof(old, new, self.read)

    def _check_size(self, size: int) -> None:
        if size > self.size:
            raise LogMismatch(f"the tree has {self.size} leaves, not {size}")
        if size < self.base.size:
            raise LogMismatch(
                f"a tree of {size} leaves predates the retained journal "
                f"(leaves below {self.base.size} were deleted)"
            )

    def copy_range(self) -> CompactRange:
        """A copy of the current compact range."""
        return self.range.copy()

    def close(self) -> None:
        """Close the hash file."""
        with contextlib.suppress(OSError):
            self.file.close()
