"""Offline verification of a journal directory, and the operator's explicit repair.

``verify`` never writes. It scans every segment, checks the HMAC chain end to end, and,
given a checkpoint ``(seq, tag)`` taken from an earlier receipt, checks that the journal still
holds that record with that tag: the one thing the files alone cannot show is a clean cut at a
record boundary (RocksDB's boundary-gap note), and a checkpoint catches it.

``repair`` is the only way past a refusal. It is explicit and logged (``repair.log`` in the
journal directory plus a WARNING log line), and it keeps every byte it removes in a
``.broken-<offset>`` side file. Without ``truncate_at`` it only cuts a torn or zero tail (even
in a segment closed cleanly); with ``truncate_at=(segment, offset)`` it cuts that segment there
and moves every later segment aside.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import msgspec

from glove.journal import _chain, _layout
from glove.journal._codec import HEADER_BYTES, SegmentState
from glove.journal._recovery import SegmentScan, scan_segment
from glove.journal._storage import PosixStorage, Storage
from glove.journal.errors import (
    JournalCorrupt,
    JournalError,
    JournalTampered,
    JournalTruncated,
)


class TailReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A damaged tail found by the scan."""

    kind: str
    segment: str
    offset: int
    length: int
    recoverable: bool


class VerifyReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``verify`` found. ``ok`` is true only for a journal that verifies completely."""

    ok: bool
    path: str
    journal_id: str = ""
    segments: int = 0
    records: int = 0
    first_seq: int = 0
    last_seq: int = 0
    last_tag: str = ""
    clean: bool = False
    tail: TailReport | None = None
    error: str | None = None
    message: str = ""
    segment: str = ""
    offset: int = -1
    seq: int = -1
    checkpoint: str | None = None


_CHECKPOINT_RE: Final = re.compile(r"(0|[1-9][0-9]{0,19}):([0-9a-f]{64})")


def parse_checkpoint(text: str) -> tuple[int, bytes]:
    """Parse ``SEQ:TAGHEX`` exactly as ``Receipt.checkpoint`` prints it: the sequence in
    ASCII decimal without leading zeros, a colon, the 32-byte tag in 64 lower-case hex digits.

    Anything else (a sign, spaces, underscores, non-ASCII digits, upper-case or spaced hex)
    is refused rather than read as the number it resembles.

    Raises:
        ValueError: not of that form.
    """
    match = _CHECKPOINT_RE.fullmatch(text)
    if match is None:
        raise ValueError(
            f"checkpoint {text[:100]!r} is not SEQ:TAGHEX (decimal without leading zeros, "
            "a colon, 64 lower-case hex digits), as a receipt prints it"
        )
    return int(match[1]), bytes.fromhex(match[2])


def verify(
    path: str | Path,
    key: bytes,
    checkpoint: tuple[int, bytes] | None = None,
    *,
    storage: Storage | None = None,
) -> VerifyReport:
    """Verify the journal at ``path`` without changing it.

    Returns a report; ``report.ok`` is true only when every segment verifies, nothing lies past
    the last record, and the checkpoint (if any) is held with its tag. Findings are reported,
    not raised.

    Raises:
        ValueError: the key is too short.
        OSError: the directory cannot be read.
    """
    key = _chain.check_key(key)
    store = storage if storage is not None else PosixStorage()
    where = str(path)
    ck_text = f"{checkpoint[0]}:{checkpoint[1].hex()}" if checkpoint else None
    try:
        scans = _layout.load_segments(store, where, key)
        if not scans:
            raise JournalCorrupt("no segments: not a journal, or every segment was removed")
        first, last = scans[0], scans[-1]
        base = VerifyReport(
            ok=True,
            path=where,
            journal_id=last.header.journal_id.hex(),
            segments=len(scans),
            records=sum(s.count for s in scans),
            first_seq=first.header.first_seq,
            last_seq=last.end.seq,
            last_tag=last.end.tag.hex(),
            clean=last.header.state is not SegmentState.ONLINE,
            checkpoint=ck_text,
        )
        if last.tail is not None and not _layout.is_prealloc_tail(last):
            tail = last.tail
            return msgspec.structs.replace(
                base,
                ok=False,
                tail=TailReport(
                    tail.kind.value,
                    last.name,
                    tail.offset,
                    tail.length,
                    last.header.state is SegmentState.ONLINE,
                ),
                error=JournalCorrupt.__name__,
                message=f"{tail.kind.value} tail of {tail.length} bytes after the last record",
                segment=last.name,
                offset=tail.offset,
                seq=last.end.seq + 1,
            )
        if checkpoint is not None:
            _check_checkpoint(store, where, key, scans, checkpoint)
        return base
    except JournalError as exc:
        return VerifyReport(
            ok=False,
            path=where,
            error=type(exc).__name__,
            message=str(exc),
            segment=getattr(exc, "segment", ""),
            offset=getattr(exc, "offset", -1),
            seq=getattr(exc, "seq", -1),
            checkpoint=ck_text,
        )


def _check_checkpoint(
    storage: Storage,
    path: str,
    key: bytes,
    scans: list[SegmentScan],
    checkpoint: tuple[int, bytes],
) -> None:
    seq, tag = checkpoint
    first, last = scans[0], scans[-1]
    if seq > last.end.seq:
        raise JournalTruncated(
            f"journal ends at seq {last.end.seq}, before the checkpoint", seq=seq
        )
    if seq < first.header.first_seq - 1:
        raise JournalTruncated("checkpoint is older than the oldest retained segment", seq=seq)
    for scan in scans:
        if scan.header.first_seq - 1 == seq:
            found = scan.header.start_tag
            break
        if scan.header.first_seq <= seq <= scan.end.seq:
            data = storage.read_file(str(Path(path) / scan.name))
            records = scan_segment(data, key, name=scan.name, keep_records=True).records
            found = next(r.tag for r in records if r.seq == seq)
            break
    else:  # pragma: no cover - the range checks above make this unreachable
        raise JournalTruncated("checkpoint not found", seq=seq)
    if not _chain.tags_equal(found, tag):
        raise JournalTampered("checkpoint tag differs from the journal's", seq=seq)


def repair(
    path: str | Path,
    key: bytes,
    *,
    truncate_at: tuple[str, int] | None = None,
    storage: Storage | None = None,
) -> list[str]:
    """Repair the journal explicitly; return the actions taken (also in ``repair.log``).

    Raises:
        ValueError: ``truncate_at`` names no segment or an offset inside the header.
        JournalCorrupt, JournalTampered: without ``truncate_at``, damage that is not a tail.
        OSError: a file operation failed.

    The caller must make sure no writer runs (the CLI takes the journal's lock).
    """
    key = _chain.check_key(key)
    store = storage if storage is not None else PosixStorage()
    where = str(path)
    actions: list[str] = []
    if truncate_at is None:
        scans = _layout.load_segments(store, where, key)
        if scans and scans[-1].tail is not None and not _layout.is_prealloc_tail(scans[-1]):
            cut = _layout.cut_tail(store, where, scans[-1], allow_clean=True)
            actions.append(
                f"cut {cut.kind} tail of {cut.length} bytes at {cut.segment}:{cut.offset} "
                f"(kept in {cut.kept_in})"
            )
    else:
        actions.extend(_truncate_at(store, where, *truncate_at))
    for line in actions:
        _layout.log_repair(store, where, line)
    return actions


def _truncate_at(storage: Storage, path: str, segment: str, offset: int) -> list[str]:
    numbers = _layout.list_segments(storage, path)
    names = [_layout.segment_name(n) for n in numbers]
    if segment not in names:
        raise ValueError(f"no segment {segment} in {path}")
    if offset < HEADER_BYTES:
        raise ValueError(f"offset {offset} is inside the segment header")
    actions: list[str] = []
    index = names.index(segment)
    for later in names[index + 1 :]:
        src = str(Path(path) / later)
        storage.rename(src, f"{src}.broken-0")
        actions.append(f"moved later segment {later} aside to {later}.broken-0")
    seg_path = str(Path(path) / segment)
    data = storage.read_file(seg_path)
    if offset < len(data):
        storage.write_file_durably(f"{seg_path}.broken-{offset}", data[offset:])
    fd = storage.open_rw(seg_path)
    try:
        storage.ftruncate(fd, min(offset, len(data)))
        _layout.set_state(storage, fd, SegmentState.ONLINE)
    finally:
        storage.close(fd)
    storage.fsync_dir(path)
    actions.append(
        f"truncated {segment} at offset {offset}, {max(len(data) - offset, 0)} bytes kept in "
        f"{segment}.broken-{offset}"
    )
    return actions
