"""The journal directory on disk: segment files, side files, and the recovery adapter.

A journal is a directory::

    PATH/
      lock                      flock'ed by the one writer
      seg-00000000.glj          segments, oldest first; all but the last are SEALED
      seg-00000001.glj
      acked                     the receipt acknowledgement cursor (HMAC'ed)
      seg-00000001.glj.broken-<offset>   bytes cut from a torn tail, kept for the operator
      repair.log                what ``glove journal repair`` did, one line per action

This module is the blocking adapter of :mod:`glove.journal._recovery`: it reads segment
files and hands their bytes to the pure scan, and it performs the only repairs recovery may
do on its own (cutting a torn or zero tail of a segment that was open when it crashed).
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from glove.journal import _chain
from glove.journal._codec import (
    HEADER_BYTES,
    SegmentHeader,
    SegmentState,
    encode_header,
    state_byte_offset,
)
from glove.journal._recovery import SegmentScan, TailKind, scan_chain
from glove.journal._storage import Storage
from glove.journal.errors import JournalCorrupt, JournalTampered

LOCK_NAME: Final = "lock"
ACK_NAME: Final = "acked"
REPAIR_LOG_NAME: Final = "repair.log"
_SEGMENT_RE: Final = re.compile(r"^seg-(\d{8})\.glj$")

_log = logging.getLogger("glove.journal")


def segment_name(number: int) -> str:
    """File name of segment ``number``."""
    return f"seg-{number:08d}.glj"


def list_segments(storage: Storage, path: str) -> list[int]:
    """Segment numbers present in the journal directory, oldest first.

    Raises:
        JournalTampered: the numbers are not contiguous (a segment was removed).
    """
    numbers = sorted(
        int(m.group(1)) for name in storage.listdir(path) if (m := _SEGMENT_RE.match(name))
    )
    for before, after in itertools.pairwise(numbers):
        if after != before + 1:
            raise JournalTampered(
                f"segment {segment_name(before + 1)} is missing", segment=segment_name(after)
            )
    return numbers


def remove_leftover_temps(storage: Storage, path: str) -> None:
    """Delete half-created segment files (``*.tmp``): they never became part of the journal."""
    for name in storage.listdir(path):
        if name.endswith(".tmp"):
            _log.warning("journal %s: removing unfinished file %s", path, name)
            storage.unlink(str(Path(path) / name))


def load_segments(
    storage: Storage, path: str, key: bytes, *, keep_records: bool = False
) -> list[SegmentScan]:
    """Read and scan every segment of the journal at ``path``, oldest first.

    Raises:
        JournalCorrupt, JournalTampered, UnsupportedFormat: as ``scan_chain``.
        OSError: a file could not be read.
    """
    numbers = list_segments(storage, path)
    data = [
        (segment_name(n), storage.read_file(str(Path(path) / segment_name(n)))) for n in numbers
    ]
    scans = scan_chain(data, key, keep_records=keep_records)
    for number, scan in zip(numbers, scans, strict=True):
        if scan.header.segment != number:
            raise JournalTampered(
                f"segment file holds segment {scan.header.segment}", segment=scan.name, offset=0
            )
    return scans


@dataclass(frozen=True, slots=True)
class TailCut:
    """A tail that recovery cut off: where, how much, and where the bytes were kept."""

    segment: str
    offset: int
    length: int
    kind: str
    kept_in: str


def is_prealloc_tail(scan: SegmentScan) -> bool:
    """Whether the segment's tail is its writer's zero-filled region, not damage.

    Only a segment that was open (ONLINE) has one: the writer cuts it off before it seals or
    closes a segment. Zeros from a record boundary to the end are what a crash leaves of a
    batch that never reached the disk, or the region no batch reached yet; either way no
    acknowledged record is there (every acknowledged record was written and synced whole,
    and its bytes are not zero: a record starts with its magic).
    """
    return (
        scan.tail is not None
        and scan.tail.kind is TailKind.ZERO
        and scan.header.state is SegmentState.ONLINE
        and not scan.sealed
    )


def cut_tail(storage: Storage, path: str, scan: SegmentScan, *, allow_clean: bool) -> TailCut:
    """Cut the damaged tail of a segment back to its last good record, keeping the bytes.

    Only a segment whose header says ONLINE (it crashed while open) may be cut unless
    ``allow_clean`` (the operator's explicit repair).

    Raises:
        JournalCorrupt: the segment was closed cleanly, so no crash explains the tail.
        OSError: the side file, truncation or fdatasync failed.
    """
    tail = scan.tail
    assert tail is not None
    if scan.header.state is not SegmentState.ONLINE and not allow_clean:
        raise JournalCorrupt(
            f"{tail.kind.value} tail in a segment that was closed cleanly",
            segment=scan.name,
            offset=tail.offset,
            seq=scan.end.seq + 1,
        )
    seg_path = str(Path(path) / scan.name)
    data = storage.read_file(seg_path)
    kept = f"{seg_path}.broken-{tail.offset}"
    storage.write_file_durably(kept, data[tail.offset :])
    fd = storage.open_rw(seg_path)
    try:
        storage.ftruncate(fd, tail.offset)
        storage.fdatasync(fd)
    finally:
        storage.close(fd)
    _log.warning(
        "journal %s: cut %s tail of %d bytes at offset %d of %s (kept in %s)",
        path,
        tail.kind.value,
        tail.length,
        tail.offset,
        scan.name,
        Path(kept).name,
    )
    return TailCut(scan.name, tail.offset, tail.length, tail.kind.value, Path(kept).name)


def create_segment(
    storage: Storage,
    path: str,
    key: bytes,
    *,
    journal_id: bytes,
    journal_kind: int,
    number: int,
    first_seq: int,
    start_tag: bytes,
) -> SegmentHeader:
    """Create segment ``number`` durably (temp file, fsync, rename, fsync dir), state ONLINE."""
    draft = SegmentHeader(
        journal_id, journal_kind, number, first_seq, start_tag, b"\0" * 32, SegmentState.ONLINE
    )
    header = SegmentHeader(
        journal_id,
        journal_kind,
        number,
        first_seq,
        start_tag,
        _chain.header_tag(key, draft),
        SegmentState.ONLINE,
    )
    data = encode_header(header)
    assert len(data) == HEADER_BYTES
    storage.write_file_durably(str(Path(path) / segment_name(number)), data)
    return header


def set_state(storage: Storage, fd: int, state: SegmentState) -> None:
    """Rewrite a segment's state byte in place and fdatasync (before and after, journald)."""
    storage.pwrite(fd, bytes([int(state)]), state_byte_offset())
    storage.fdatasync(fd)


def log_repair(storage: Storage, path: str, line: str) -> None:
    """Append one line to the journal's repair log, durably."""
    log_path = str(Path(path) / REPAIR_LOG_NAME)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    fd = storage.open_append(log_path, create=True)
    try:
        storage.write(fd, f"{stamp} {line}\n".encode())
        storage.fdatasync(fd)
    finally:
        storage.close(fd)
    _log.warning("journal %s: repair: %s", path, line)
