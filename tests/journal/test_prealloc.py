"""The zero-filled region ahead of the last record: kept after a crash, cut on close, and
never mistaken for data or confused with damage (docs/journal.md, "Preallocation")."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from glove.journal import (
    JournalCorrupt,
    JournalKind,
    JournalLimits,
    Receipt,
    _chain,
    open_journal,
    verify,
)
from glove.journal._codec import (
    HEADER_BYTES,
    RECORD_OVERHEAD_BYTES,
    RecordKind,
    encode_body,
    encode_record,
)
from glove.journal._layout import segment_name
from glove.journal._writer import PREALLOC_BYTES

SEG0 = segment_name(0)
PAYLOAD = 16
RECORD = RECORD_OVERHEAD_BYTES + PAYLOAD


def _end(count: int) -> int:
    return HEADER_BYTES + count * RECORD


async def _crash_image(jdir: Path, key: bytes, count: int, image: Path) -> list[Receipt]:
    """Append ``count`` records one batch each and copy the directory while the writer is
    open: what a kill -9 (or a power cut after the last sync) leaves behind."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    receipts = [await journal.append(bytes([i % 251 + 1]) * PAYLOAD) for i in range(count)]
    shutil.copytree(jdir, image)
    await journal.close()
    return receipts


async def test_live_segment_is_zero_filled_and_close_cuts_it(jdir: Path, key: bytes) -> None:
    """While open the segment holds zeros past its last record; a clean close removes them."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    await journal.append(b"x" * PAYLOAD)
    data = (jdir / SEG0).read_bytes()
    assert len(data) >= _end(1) + PREALLOC_BYTES // 2
    assert not any(data[_end(1) :])
    live = verify(jdir, key)
    assert live.ok
    assert not live.clean
    await journal.close()
    assert (jdir / SEG0).stat().st_size == _end(1)
    assert verify(jdir, key).clean


async def test_crash_keeps_the_zero_region_and_reports_nothing(tmp_path: Path, key: bytes) -> None:
    """Reopening a crash image keeps the zero region (no cut, no .broken) and appends on."""
    image = tmp_path / "image"
    receipts = await _crash_image(tmp_path / "j", key, 5, image)
    size = (image / SEG0).stat().st_size
    assert size > _end(5)
    journal = await open_journal(image, key, kind=JournalKind.SESSION)
    status = await journal.status()
    assert status.recovered == ()
    assert status.seq == 5
    assert status.tag == receipts[-1].tag
    assert (image / SEG0).stat().st_size == size
    more = await journal.append(b"y" * PAYLOAD)
    await journal.close()
    assert more.seq == 6
    assert not list(image.glob("*.broken-*"))
    report = verify(image, key, (6, more.tag))
    assert report.ok
    assert report.records == 6


@pytest.mark.parametrize("keep", [1, 30, RECORD - 1])
async def test_torn_record_over_zeros_is_cut_and_kept_aside(
    tmp_path: Path, key: bytes, keep: int
) -> None:
    """A record torn over the zero region (its first bytes landed) is a torn tail: cut."""
    image = tmp_path / "image"
    receipts = await _crash_image(tmp_path / "j", key, 4, image)
    seg = image / SEG0
    data = bytearray(seg.read_bytes())
    donor = (tmp_path / "j" / SEG0).read_bytes()[_end(3) : _end(4)]
    data[_end(4) : _end(4) + keep] = donor[:keep]  # a fifth record's bytes, partly
    seg.write_bytes(bytes(data))
    report = verify(image, key)
    assert report.error == "JournalCorrupt"
    assert report.tail is not None
    assert report.tail.recoverable
    journal = await open_journal(image, key, kind=JournalKind.SESSION)
    status = await journal.status()
    await journal.close()
    assert len(status.recovered) == 1
    assert status.seq == 4
    assert status.tag == receipts[-1].tag
    assert len(list(image.glob("*.broken-*"))) == 1
    assert verify(image, key).ok


async def test_batch_with_a_record_missing_before_a_landed_one_is_torn(
    tmp_path: Path, key: bytes
) -> None:
    """A batch whose second record landed but not its first (zeros) is a crash, not damage."""
    image = tmp_path / "image"
    receipts = await _crash_image(tmp_path / "j", key, 1, image)
    journal_id, tag = receipts[0].journal_id, receipts[0].tag
    # The next batch as the writer makes it: records 2 and 3, batch positions 0 and 1.
    second_body = encode_body(2, 0, int(RecordKind.DATA), b"b" * PAYLOAD, 0)
    second_tag = _chain.record_tag(key, journal_id, tag, 2, second_body)
    third_body = encode_body(3, 0, int(RecordKind.DATA), b"c" * PAYLOAD, 1)
    third = encode_record(third_body, _chain.record_tag(key, journal_id, second_tag, 3, third_body))
    data = bytearray((image / SEG0).read_bytes())
    data[_end(2) : _end(3)] = third  # only the batch's second record reached the disk
    (image / SEG0).write_bytes(bytes(data))
    journal = await open_journal(image, key, kind=JournalKind.SESSION)
    status = await journal.status()
    await journal.close()
    assert status.seq == 1
    assert status.tag == tag
    assert len(status.recovered) == 1


async def test_zeroed_record_before_a_later_batch_is_corruption(tmp_path: Path, key: bytes) -> None:
    """Zeros over an acknowledged record followed by a later batch's record refuse to open."""
    image = tmp_path / "image"
    await _crash_image(tmp_path / "j", key, 6, image)
    seg = image / SEG0
    data = bytearray(seg.read_bytes())
    data[_end(4) : _end(5)] = bytes(RECORD)
    seg.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt) as caught:
        await open_journal(image, key, kind=JournalKind.SESSION)
    assert caught.value.offset == _end(4)
    assert caught.value.seq == 5


async def test_zero_tail_of_a_cleanly_closed_segment_is_refused(jdir: Path, key: bytes) -> None:
    """Zeros after the last record of an OFFLINE segment were not the writer's: refuse."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    await journal.append(b"a")
    await journal.close()
    with (jdir / SEG0).open("ab") as fh:
        fh.write(bytes(4096))
    with pytest.raises(JournalCorrupt, match="closed cleanly"):
        await open_journal(jdir, key, kind=JournalKind.SESSION)


async def test_every_flip_in_a_crash_image_is_detected(tmp_path: Path, key: bytes) -> None:
    """A bit flipped in a record or in the zero region of a crash image never verifies.

    In a record: JournalCorrupt at that record. In the zero region: a torn tail right after
    the last record (never data, never silently accepted).
    """
    image = tmp_path / "image"
    count = 12
    await _crash_image(tmp_path / "j", key, count, image)
    seg = image / SEG0
    original = seg.read_bytes()
    rng = random.Random(7)
    in_records = range(HEADER_BYTES, _end(count))
    in_zeros = list(range(_end(count), _end(count) + 600))
    in_zeros += [rng.randrange(_end(count), len(original)) for _ in range(200)]
    for position in [*in_records, *in_zeros]:
        data = bytearray(original)
        data[position] ^= 1 << (position % 8)
        seg.write_bytes(bytes(data))
        report = verify(image, key)
        assert not report.ok, position
        assert report.error == "JournalCorrupt", (position, report)
        if position < _end(count):
            index = (position - HEADER_BYTES) // RECORD
            assert report.offset == _end(index), (position, report)
            assert report.seq == index + 1, (position, report)
        else:
            assert report.offset == _end(count), (position, report)
            assert report.seq == count + 1, (position, report)
    seg.write_bytes(original)
    assert verify(image, key).ok


async def test_rotation_seals_without_the_zero_region(jdir: Path, key: bytes) -> None:
    """A sealed segment ends at its seal record: the zero region goes before SEALED."""
    limits = JournalLimits(max_segment_bytes=8 * 1024, max_segment_records=1000, max_segments=8)
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION, limits=limits)
    for _ in range(40):
        await journal.append(b"r" * 400)
    live = sorted(jdir.glob("seg-*.glj"))
    assert len(live) > 1
    sealed_sizes = [p.stat().st_size for p in live[:-1]]
    await journal.close()
    report = verify(jdir, key)
    assert report.ok
    for path, size in zip(live[:-1], sealed_sizes, strict=True):
        data = path.read_bytes()
        assert len(data) == size
        assert data[-1] != 0 or any(data[-64:])  # ends in the seal record's tag, not zeros
    assert (live[-1]).stat().st_size <= limits.max_segment_bytes
