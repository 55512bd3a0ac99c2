"""Recovery batteries: truncation at every offset, a flipped bit everywhere, a torn middle."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from glove.journal import (
    JournalCorrupt,
    JournalKind,
    Receipt,
    open_journal,
    repair,
    verify,
)
from glove.journal._codec import HEADER_BYTES, RECORD_OVERHEAD_BYTES
from glove.journal._layout import segment_name

SEG0 = segment_name(0)


async def _build(jdir: Path, key: bytes, count: int, payload_bytes: int) -> list[Receipt]:
    """Write ``count`` records one batch each, close, then mark the segment as crashed."""
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    receipts = [await journal.append(bytes([i % 251]) * payload_bytes) for i in range(count)]
    await journal.close()
    _mark_online(jdir / SEG0)
    return receipts


def _mark_online(seg: Path) -> None:
    """Set the header state byte to ONLINE, as a writer that crashed leaves it."""
    data = bytearray(seg.read_bytes())
    data[8] = 1
    seg.write_bytes(bytes(data))


def _record_offsets(count: int, payload_bytes: int) -> list[int]:
    size = RECORD_OVERHEAD_BYTES + payload_bytes
    return [HEADER_BYTES + i * size for i in range(count + 1)]


async def test_truncation_at_every_offset_of_the_last_two_records(
    tmp_path: Path, key: bytes
) -> None:
    """Every cut recovers exactly the complete records before it, keeps .broken, appends on."""
    source = tmp_path / "source"
    receipts = await _build(source, key, 20, 24)
    offsets = _record_offsets(20, 24)
    for cut in range(offsets[18], offsets[20]):
        jdir = tmp_path / f"cut-{cut}"
        shutil.copytree(source, jdir)
        with (jdir / SEG0).open("r+b") as fh:
            fh.truncate(cut)
        complete = sum(1 for end in offsets[1:] if end <= cut)
        journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
        status = await journal.status()
        assert status.seq == complete, cut
        assert status.tag == receipts[complete - 1].tag
        at_boundary = cut in offsets
        assert bool(status.recovered) != at_boundary, cut
        broken = list(jdir.glob("*.broken-*"))
        assert len(broken) == (0 if at_boundary else 1)
        if broken:
            kept = (source / SEG0).read_bytes()[offsets[complete] : cut]
            assert broken[0].read_bytes() == kept
        more = await asyncio.gather(*(journal.append(b"more %d" % i) for i in range(10)))
        assert [r.seq for r in more] == list(range(complete + 1, complete + 11))
        await journal.close()
        report = verify(jdir, key)
        assert report.ok, (cut, report)
        assert report.records == complete + 10
        shutil.rmtree(jdir)


async def test_every_flipped_byte_is_detected_with_its_position(tmp_path: Path, key: bytes) -> None:
    """A bit flipped in any byte fails verify and names the damaged record's offset and seq."""
    jdir = tmp_path / "j"
    await _build(jdir, key, 20, 16)
    offsets = _record_offsets(20, 16)
    seg = jdir / SEG0
    original = seg.read_bytes()
    for position in range(len(original)):
        if position == 8:
            continue  # the state byte: covered by the next test
        data = bytearray(original)
        data[position] ^= 1 << (position % 8)
        seg.write_bytes(bytes(data))
        report = verify(jdir, key)
        assert not report.ok, position
        if position < HEADER_BYTES:
            assert report.error in ("JournalCorrupt", "UnsupportedFormat"), position
            continue
        index = next(i for i in range(20) if offsets[i] <= position < offsets[i + 1])
        assert report.error == "JournalCorrupt", (position, report)
        assert report.offset == offsets[index], (position, report)
        assert report.seq == index + 1, (position, report)
    seg.write_bytes(original)
    assert verify(jdir, key).ok


@pytest.mark.parametrize("bit", range(8))
async def test_state_byte_flips_are_classified(tmp_path: Path, key: bytes, bit: int) -> None:
    """The mutable state byte may only say ONLINE/OFFLINE; SEALED without a seal is tampering."""
    jdir = tmp_path / "j"
    await _build(jdir, key, 3, 16)
    seg = jdir / SEG0
    data = bytearray(seg.read_bytes())
    data[8] ^= 1 << bit
    seg.write_bytes(bytes(data))
    report = verify(jdir, key)
    if data[8] == 0:
        assert report.ok
        assert report.clean
    elif data[8] == 2:
        assert report.error == "JournalTampered"
    else:
        assert report.error == "JournalCorrupt"


async def test_torn_middle_sector_refuses_and_repair_truncates(tmp_path: Path, key: bytes) -> None:
    """Zeroing a 512-byte sector inside record 2 of 5 refuses to open; repair cuts there."""
    jdir = tmp_path / "j"
    receipts = await _build(jdir, key, 5, 400)
    offsets = _record_offsets(5, 400)
    seg = jdir / SEG0
    data = bytearray(seg.read_bytes())
    data[offsets[1] + 100 : offsets[1] + 612] = bytes(512)
    seg.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt) as info:
        await open_journal(jdir, key, kind=JournalKind.SESSION)
    assert (info.value.offset, info.value.seq) == (offsets[1], 2)
    assert seg.read_bytes() == bytes(data)
    actions = repair(jdir, key, truncate_at=(SEG0, offsets[1]))
    assert "truncated" in actions[-1]
    assert (jdir / f"{SEG0}.broken-{offsets[1]}").read_bytes() == bytes(data[offsets[1] :])
    assert "truncated" in (jdir / "repair.log").read_text()
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    assert (await journal.append(b"after repair")).seq == 2
    await journal.close()
    report = verify(jdir, key, (1, receipts[0].tag))
    assert report.ok, report
    assert not verify(jdir, key, (5, receipts[4].tag)).ok


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "glove", "journal", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_cli_verify_exit_codes_and_repair(tmp_path: Path, key: bytes) -> None:
    """verify exits 0/1/2/3 by finding and --json reports it; repair cuts a clean torn tail."""
    jdir = tmp_path / "j"
    receipts = await _build(jdir, key, 4, 16)
    key_file = tmp_path / "key"
    key_file.write_text(key.hex() + "\n")
    ok = _cli(
        "verify", str(jdir), "--key-file", str(key_file), "--checkpoint", receipts[3].checkpoint
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("OK ")
    truncated = _cli(
        "verify", str(jdir), "--key-file", str(key_file), "--checkpoint", f"9:{'00' * 32}"
    )
    assert truncated.returncode == 3
    seg = jdir / SEG0
    data = bytearray(seg.read_bytes())
    data[-1] ^= 1
    seg.write_bytes(bytes(data))
    corrupt = _cli("verify", str(jdir), "--key-file", str(key_file), "--json")
    assert corrupt.returncode == 1
    assert '"error":"JournalCorrupt"' in corrupt.stdout
    fixed = _cli("repair", str(jdir), "--key-file", str(key_file))
    assert fixed.returncode == 0, fixed.stderr
    assert "cut torn tail" in fixed.stdout
    assert _cli("verify", str(jdir), "--key-file", str(key_file)).returncode == 0
    wrong_key = tmp_path / "wrong"
    wrong_key.write_bytes(bytes(32))
    tampered = _cli("verify", str(jdir), "--key-file", str(wrong_key))
    assert tampered.returncode == 2
    assert "JournalTampered" in tampered.stdout
