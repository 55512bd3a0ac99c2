"""The transcript ring on real files: offsets, eviction, durability across a crash, digest."""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.session._transcript import (
    RingReader,
    TranscriptReader,
    TranscriptWriter,
    recovered_summary,
)
from glove.session._transcript_format import (
    META_FILE,
    META_SLOT_BYTES,
    MIN_RING_BYTES,
    RING_FILE,
    TRANSCRIPT_BLOCK_BYTES,
    DigestChain,
    Meta,
    decode_meta,
    digest_of,
    encode_meta,
    final_digest,
    pick_meta,
    ring_segments,
    slot_offset,
    window_for,
)
from glove.session.errors import NoTerminal, TranscriptCorrupt

CAPACITY = MIN_RING_BYTES
MAX_CHUNK = 64 * 1024


def _stream(size: int, seed: int) -> bytes:
    """Deterministic, position-dependent bytes (a shifted copy would not compare equal)."""
    rng = random.Random(seed)
    return rng.randbytes(size)


def _write(directory: Path, data: bytes, chunks: list[int]) -> TranscriptWriter:
    """Append ``data`` in ``chunks`` as the drain does: commit first when a chunk would
    pass the window."""
    writer = TranscriptWriter.create(directory, CAPACITY)
    at = 0
    sizes = iter(chunks)
    while at < len(data):
        size = min(next(sizes, MAX_CHUNK), len(data) - at)
        if writer.pending + size > writer.window:
            meta = writer.snapshot()
            writer.commit(meta)
            writer.committed(meta)
        writer.append(data[at : at + size])
        at += size
    return writer


def test_a_meta_record_round_trips_and_a_torn_one_is_refused() -> None:
    """encode/decode are inverse; a flipped byte or a wrong slot size is TranscriptCorrupt."""
    meta = Meta(3, CAPACITY, window_for(CAPACITY), 70_000, 1, b"\x07" * 32, False)
    slot = encode_meta(meta)
    assert len(slot) == META_SLOT_BYTES
    assert decode_meta(slot) == meta
    torn = bytearray(slot)
    torn[20] ^= 1
    with pytest.raises(TranscriptCorrupt, match="checksum"):
        decode_meta(bytes(torn))
    with pytest.raises(TranscriptCorrupt):
        decode_meta(slot[:100])
    bad = Meta(3, CAPACITY, window_for(CAPACITY), 10, 1, b"\x07" * 32, False)  # 1 block > end
    with pytest.raises(TranscriptCorrupt, match="digest blocks"):
        decode_meta(encode_meta(bad))


def test_the_newer_valid_slot_wins_and_a_torn_newer_one_falls_back() -> None:
    """pick_meta takes the valid record with the higher sequence; a torn newer slot leaves
    the older one as the truth; no valid slot at all is an error."""
    window = window_for(CAPACITY)
    older = Meta(4, CAPACITY, window, 100, 0, bytes(32), False)
    newer = Meta(5, CAPACITY, window, 200, 0, bytes(32), True)
    data = bytearray(2 * META_SLOT_BYTES)
    for meta in (older, newer):
        data[slot_offset(meta.seq) : slot_offset(meta.seq) + META_SLOT_BYTES] = encode_meta(meta)
    assert pick_meta(bytes(data)) == newer
    data[slot_offset(5) + 9] ^= 0xFF
    assert pick_meta(bytes(data)) == older
    data[slot_offset(4) + 9] ^= 0xFF
    with pytest.raises(TranscriptCorrupt, match="no valid meta record"):
        pick_meta(bytes(data))


def test_ring_segments_wrap_at_the_capacity() -> None:
    """Offsets map to the ring modulo its size, in one segment or two."""
    assert ring_segments(10, 5, 100) == [(10, 5)]
    assert ring_segments(195, 10, 100) == [(95, 5), (0, 5)]
    assert ring_segments(7, 0, 100) == []
    with pytest.raises(ValueError, match="do not fit"):
        ring_segments(0, 101, 100)


@given(st.binary(max_size=3 * TRANSCRIPT_BLOCK_BYTES), st.lists(st.integers(1, 70_000)))
@settings(max_examples=60, deadline=None)
def test_the_chained_digest_does_not_depend_on_how_bytes_arrive(
    data: bytes, cuts: list[int]
) -> None:
    """Fed in any chunks, the digest is the one of the whole; resumed from a saved chain it
    is the same; a different byte changes it."""
    chain = DigestChain()
    at = 0
    for cut in cuts:
        chain.update(data[at : at + cut])
        at += cut
    chain.update(data[at:])
    assert chain.digest() == digest_of(data)
    blocks = len(data) // TRANSCRIPT_BLOCK_BYTES
    saved = DigestChain()
    saved.update(data[: blocks * TRANSCRIPT_BLOCK_BYTES])
    resumed = final_digest(saved.chain, data[blocks * TRANSCRIPT_BLOCK_BYTES :], len(data))
    assert resumed == digest_of(data)
    if data:
        changed = bytes([data[0] ^ 1]) + data[1:]
        assert digest_of(changed) != digest_of(data)


def test_a_closed_transcript_keeps_the_newest_capacity_bytes(tmp_path: Path) -> None:
    """Four rings' worth in: the reader holds exactly the last ``capacity`` bytes at their
    offsets, counts the rest as evicted, and the digest covers every byte."""
    data = _stream(4 * CAPACITY + 12_345, 1)
    writer = _write(tmp_path, data, [4096] * 10_000)
    assert writer.start == len(data) - CAPACITY == writer.evicted
    meta = writer.snapshot(closed=True)
    writer.commit(meta)
    writer.committed(meta)
    summary = writer.summary()
    writer.close_files()
    reader = TranscriptReader.open(tmp_path)
    try:
        assert (reader.start, reader.end) == (len(data) - CAPACITY, len(data))
        assert reader.ring.read(reader.start, CAPACITY) == data[-CAPACITY:]
        assert reader.summary() == summary
        assert summary.digest == digest_of(data)
        assert summary.evicted == len(data) - CAPACITY
        assert summary.complete is True
    finally:
        reader.close()


def test_the_memory_tail_serves_recent_bytes_and_nothing_evicted(tmp_path: Path) -> None:
    """cached() answers from memory for the newest bytes, and never for an evicted or
    future offset."""
    data = _stream(3 * CAPACITY, 2)
    writer = _write(tmp_path, data, [1000] * 10_000)
    try:
        end = writer.end
        assert writer.cached(end - 100, 100) == data[-100:]
        assert writer.cached(writer.start - 1, 10) is None
        assert writer.cached(end, 10) is None
    finally:
        writer.close_files()


@given(
    size=st.integers(0, 5 * CAPACITY),
    chunks=st.lists(st.integers(512, MAX_CHUNK), min_size=1, max_size=50),
    commit_every=st.integers(4, 40),
    torn=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_after_a_crash_the_durable_transcript_reads_back_exactly(
    size: int, chunks: list[int], commit_every: int, torn: bool
) -> None:
    """Bytes written past the last durable record (within the window), and optionally a
    torn record being written at the crash: the reader vouches only for bytes that are
    intact, they equal the stream at their offsets, and the digest is the prefix's."""
    data = _stream(size, size)
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        writer = TranscriptWriter.create(directory, CAPACITY)
        at = step = 0
        durable = 0
        while at < len(data):
            chunk = min(chunks[step % len(chunks)], len(data) - at)
            if writer.pending + chunk > writer.window or step % commit_every == 0:
                meta = writer.snapshot()
                writer.commit(meta)
                writer.committed(meta)
                durable = meta.end
            writer.append(data[at : at + chunk])
            at += chunk
            step += 1
        if torn:  # the crash hits a record while it is written: garbage in the next slot
            seq = writer.snapshot().seq
            fd = os.open(directory / META_FILE, os.O_WRONLY)
            os.pwrite(fd, os.urandom(META_SLOT_BYTES), slot_offset(seq))
            os.close(fd)
        writer.close_files()  # the crash: no closing record
        reader = TranscriptReader.open(directory)
        try:
            assert reader.end == durable
            assert reader.start == max(0, durable + writer.window - CAPACITY)
            held = reader.ring.read(reader.start, reader.end - reader.start)
            assert held == data[reader.start : reader.end]
            summary = reader.summary()
            assert summary.digest == digest_of(data[:durable])
            assert summary.complete is False
        finally:
            reader.close()


def test_recovery_reports_torn_files_without_raising(tmp_path: Path) -> None:
    """A session directory with no transcript gives None; a ring of the wrong size or a meta
    file with no valid record gives an entry that says so (recovery goes on)."""
    assert recovered_summary(tmp_path) is None
    writer = TranscriptWriter.create(tmp_path, CAPACITY)
    writer.append(b"hello")
    writer.close_files()
    os.truncate(tmp_path / RING_FILE, 1000)
    entry = recovered_summary(tmp_path)
    assert entry is not None
    assert entry.digest is None
    assert "does not verify" in str(entry.error)
    (tmp_path / META_FILE).write_bytes(bytes(2 * META_SLOT_BYTES))
    entry = recovered_summary(tmp_path)
    assert entry is not None
    assert "no valid meta record" in str(entry.error)


def test_a_reader_refuses_a_missing_or_resized_ring(tmp_path: Path) -> None:
    """No ring is NoTerminal; a ring of another size than its record says is corrupt."""
    with pytest.raises(NoTerminal):
        RingReader.open(tmp_path, CAPACITY)
    (tmp_path / RING_FILE).write_bytes(b"x" * 10)
    with pytest.raises(TranscriptCorrupt, match="10 bytes"):
        RingReader.open(tmp_path, CAPACITY)


def test_the_files_are_owner_only(tmp_path: Path) -> None:
    """The ring and meta files are 0600 and the ring's space is the capacity."""
    writer = TranscriptWriter.create(tmp_path, CAPACITY)
    writer.close_files()
    for name in (RING_FILE, META_FILE):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / RING_FILE).stat().st_size == CAPACITY
    assert hashlib.sha256((tmp_path / META_FILE).read_bytes()).digest()  # readable
