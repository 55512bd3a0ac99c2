"""Tests of the activity log: durable JSONL appends, typed failures, rotation, resume."""

from __future__ import annotations

import asyncio
import errno
import json
import time
from pathlib import Path

import pytest

import glove.audit
from glove.actors import running
from glove.audit import (
    AuditLog,
    AuditRecordInvalid,
    AuditUnavailable,
    AuditWriteFailed,
)
from glove.testing import FaultStorage


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_public_names_are_sorted_and_exported() -> None:
    """The package pins its public names and every one of them exists."""
    assert set(glove.audit.__all__) == {
        "AUDIT_APPEND_TIMEOUT_S",
        "DEFAULT_KEEP_FILES",
        "DEFAULT_MAX_AUDIT_BYTES",
        "MAX_AUDIT_RECORD_BYTES",
        "AuditAck",
        "AuditError",
        "AuditLog",
        "AuditRecordInvalid",
        "AuditUnavailable",
        "AuditWriteFailed",
        "PendingRecord",
    }
    for name in glove.audit.__all__:
        assert hasattr(glove.audit, name)


async def test_append_writes_one_json_line_with_seq_and_ts(tmp_path: Path) -> None:
    """Each append is one JSON object line carrying seq, ts and the caller's fields."""
    path = tmp_path / "audit.jsonl"
    async with running(AuditLog(path, clock=lambda: 1_700_000_000_123_456_000)) as log:
        first = await log.append({"event": "tool_call", "tool": "read_file", "n": 1})
        second = await log.append({"event": "deny", "nested": {"a": [1, 2]}})
    assert (first.seq, second.seq) == (1, 2)
    records = _lines(path)
    assert records[0] == {
        "seq": 1,
        "ts": "2023-11-14T22:13:20.123456Z",
        "event": "tool_call",
        "tool": "read_file",
        "n": 1,
    }
    assert records[1]["nested"] == {"a": [1, 2]}
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


async def test_append_is_on_disk_before_it_returns(tmp_path: Path) -> None:
    """When append returns, another reader already sees the complete line in the file."""
    path = tmp_path / "audit.jsonl"
    async with running(AuditLog(path)) as log:
        for index in range(20):
            ack = await log.append({"i": index})
            assert _lines(path)[-1] == {"seq": ack.seq, "ts": ack.ts, "i": index}


async def test_concurrent_appends_get_distinct_contiguous_seqs(tmp_path: Path) -> None:
    """Concurrent appenders each get a unique sequence and every line is intact."""
    path = tmp_path / "audit.jsonl"
    async with running(AuditLog(path)) as log:
        acks = await asyncio.gather(*(log.append({"i": i}) for i in range(100)))
    assert sorted(a.seq for a in acks) == list(range(1, 101))
    assert [r["seq"] for r in _lines(path)] == list(range(1, 101))


@pytest.mark.parametrize(
    "record",
    [{"seq": 5}, {"ts": "x"}, {"bad": object()}, {"big": "x" * (70 * 1024)}],
    ids=["seq", "ts", "not-json", "too-big"],
)
async def test_invalid_records_are_refused(tmp_path: Path, record: dict[str, object]) -> None:
    """Reserved keys, unencodable values and oversize records raise AuditRecordInvalid."""
    path = tmp_path / "audit.jsonl"
    async with running(AuditLog(path)) as log:
        with pytest.raises(AuditRecordInvalid):
            await log.append(record)
        assert (await log.append({"ok": True})).seq == 1
    assert len(_lines(path)) == 1


async def test_resume_continues_sequence_and_cuts_torn_line(tmp_path: Path) -> None:
    """A reopened log continues the sequence and cuts an unacknowledged torn last line."""
    path = tmp_path / "audit.jsonl"
    async with running(AuditLog(path)) as log:
        await log.append({"a": 1})
        await log.append({"a": 2})
    with path.open("ab") as fh:
        fh.write(b'{"seq":3,"ts":"2026')
    async with running(AuditLog(path)) as log:
        assert log.last_seq == 2
        assert (await log.append({"a": 3})).seq == 3
    assert [r["seq"] for r in _lines(path)] == [1, 2, 3]


async def test_second_writer_fails_fast(tmp_path: Path) -> None:
    """A second AuditLog on the same file crashes at start with AuditUnavailable."""
    path = tmp_path / "audit.jsonl"
    async with running(AuditLog(path)) as first:
        await first.append({"a": 1})
        async with running(AuditLog(path, name="audit-2")) as second:
            assert second.state == "crashed"
            assert isinstance(second.exit_reason, AuditUnavailable)
            with pytest.raises(AuditUnavailable):
                await second.append({"a": 2})


async def test_enospc_is_typed_cut_back_and_recoverable(tmp_path: Path) -> None:
    """ENOSPC after a partial write raises AuditWriteFailed, leaves no partial line, resumes."""
    path = tmp_path / "audit.jsonl"
    storage = FaultStorage()
    async with running(AuditLog(path, storage=storage)) as log:
        await log.append({"a": 1})
        size = path.stat().st_size
        storage.write_errno = errno.ENOSPC
        storage.partial_bytes = 7
        with pytest.raises(AuditWriteFailed, match="No space"):
            await log.append({"a": 2})
        assert path.stat().st_size == size
        assert log.state == "running"
        assert (await log.append({"a": 3})).seq == 2
    assert [r["a"] for r in _lines(path)] == [1, 3]


async def test_failed_fdatasync_is_not_retried_and_fails_closed(tmp_path: Path) -> None:
    """EIO from fdatasync raises AuditWriteFailed, crashes the actor, later appends fail."""
    path = tmp_path / "audit.jsonl"
    storage = FaultStorage()
    async with running(AuditLog(path, storage=storage)) as log:
        await log.append({"a": 1})
        storage.sync_errno = errno.EIO
        with pytest.raises(AuditWriteFailed, match="not retried"):
            await log.append({"a": 2})
        for _ in range(100):
            if log.state == "crashed":
                break
            await asyncio.sleep(0.01)
        assert log.state == "crashed"
        with pytest.raises(AuditUnavailable):
            await log.append({"a": 3})
    assert storage.syncs == 2


async def test_concurrent_appends_share_fdatasync(tmp_path: Path) -> None:
    """64 concurrent appends are all durable but need far fewer than 64 fdatasyncs."""
    storage = FaultStorage()
    async with running(AuditLog(tmp_path / "audit.jsonl", storage=storage)) as log:
        before = storage.syncs
        acks = await asyncio.gather(*(log.append({"i": i}) for i in range(64)))
        syncs = storage.syncs - before
    assert sorted(a.seq for a in acks) == list(range(1, 65))
    assert syncs <= 8, syncs


async def test_rotation_bounds_the_files_and_keeps_the_sequence(tmp_path: Path) -> None:
    """At max_bytes the log rotates, keeps keep_files old files and continues the seq."""
    path = tmp_path / "audit.jsonl"
    record = {"pad": "x" * 1000}
    async with running(AuditLog(path, max_bytes=64 * 1024, keep_files=2)) as log:
        for _ in range(200):
            await log.append(record)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    for name in names:
        assert (tmp_path / name).stat().st_size <= 64 * 1024
    seqs = [r["seq"] for r in _lines(path)]
    older = [r["seq"] for r in _lines(tmp_path / "audit.jsonl.1")]
    assert seqs[-1] == 200
    assert older[-1] + 1 == seqs[0]
    async with running(AuditLog(path, max_bytes=64 * 1024, keep_files=2)) as log:
        assert log.last_seq == 200


async def test_appends_after_the_deadline_are_unavailable(tmp_path: Path) -> None:
    """An append with an already-expired deadline raises AuditUnavailable; the log goes on."""
    path = tmp_path / "audit.jsonl"
    async with running(AuditLog(path)) as log:
        with pytest.raises(AuditUnavailable):
            await log.append({"a": 1}, timeout=0.0)
        ack = await log.append({"a": 2})
    assert _lines(path)[-1]["a"] == 2
    assert ack.seq == len(_lines(path))


async def test_overlapped_syncs_survive_rotations_in_the_executor(tmp_path: Path) -> None:
    """Two-phase writers keep syncs overlapped while later batches rotate the file in the
    executor (its close made slow): every record becomes durable and the log stays up."""
    path = tmp_path / "audit.jsonl"
    record = {"pad": "x" * 8000}

    class SlowClose(FaultStorage):
        """A storage whose close returns late (fault injection: widens a rotation)."""

        def close(self, fd: int) -> None:
            super().close(fd)
            time.sleep(0.02)

    async with running(
        AuditLog(path, max_bytes=64 * 1024, keep_files=2, storage=SlowClose())
    ) as log:

        async def writer() -> None:
            for _ in range(60):
                await (await log.write(record)).durable()

        await asyncio.gather(*(writer() for _ in range(4)))
        assert log.state == "running"
        assert log.last_seq == 240
