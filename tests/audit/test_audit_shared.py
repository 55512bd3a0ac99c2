"""Several writers on one activity log (``shared=True``): they take turns, nothing is lost.

This is how two ``glove run`` with the same configuration work side by side: one log, one
strictly increasing sequence, each record naming its run.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from glove.actors import running
from glove.audit import MAX_AUDIT_RECORD_BYTES, AuditLog, AuditWriteFailed

WRITER = """
import asyncio, sys
from glove.actors import running
from glove.audit import AuditLog

async def main(path, who, count):
    async with running(AuditLog(path, shared=True)) as log:
        for n in range(count):
            await log.append({"who": who, "n": n})

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_two_shared_writers_interleave_with_one_sequence(tmp_path: Path) -> None:
    """Two shared logs on one path, appending at once: every record lands, seqs 1..N."""
    path = tmp_path / "audit.log"
    async with (
        running(AuditLog(path, shared=True)) as one,
        running(AuditLog(path, shared=True, name="audit-2")) as two,
    ):

        async def fill(log: AuditLog, who: str) -> None:
            for n in range(100):
                await log.append({"who": who, "n": n})

        await asyncio.gather(fill(one, "a"), fill(two, "b"))
    records = _records(path)
    assert [r["seq"] for r in records] == list(range(1, 201))
    for who in ("a", "b"):
        assert [r["n"] for r in records if r["who"] == who] == list(range(100))


def test_two_processes_share_one_log(tmp_path: Path) -> None:
    """Real processes with real flock: 3 writers x 150 records, no seq given twice."""
    path = tmp_path / "audit.log"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), who, "150"])
        for who in ("p", "q", "r")
    ]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0, 0]
    records = _records(path)
    assert [r["seq"] for r in records] == list(range(1, 451))
    for who in ("p", "q", "r"):
        assert [r["n"] for r in records if r["who"] == who] == list(range(150))


async def test_shared_writers_rotate_without_losing_the_sequence(tmp_path: Path) -> None:
    """With a small size bound, rotation by either writer keeps one sequence across files."""
    path = tmp_path / "audit.log"
    size = MAX_AUDIT_RECORD_BYTES
    padding = "x" * 2000
    async with (
        running(AuditLog(path, shared=True, max_bytes=size, keep_files=8)) as one,
        running(AuditLog(path, shared=True, max_bytes=size, keep_files=8, name="audit-2")) as two,
    ):
        for n in range(60):
            await (one if n % 2 else two).append({"n": n, "pad": padding})
    files = [path.with_name(f"audit.log.{i}") for i in range(8, 0, -1)] + [path]
    seqs = [r["seq"] for f in files if f.exists() for r in _records(f)]
    assert seqs == list(range(1, 61))
    assert path.with_name("audit.log.1").exists()


async def test_a_shared_log_resumes_after_another_writer(tmp_path: Path) -> None:
    """A writer that joins later continues the sequence the others left."""
    path = tmp_path / "audit.log"
    async with running(AuditLog(path, shared=True)) as first:
        await first.append({"n": 1})
        async with running(AuditLog(path, shared=True, name="late")) as late:
            await first.append({"n": 2})
            ack = await late.append({"n": 3})
    assert ack.seq == 3


async def test_a_missing_folder_is_not_created(tmp_path: Path) -> None:
    """``audit = "/nonexistent/dir/x"`` fails to start instead of creating the folder."""
    path = tmp_path / "missing" / "audit.log"
    async with running(AuditLog(path, shared=True)) as log:
        pass
    assert isinstance(log.exit_reason, AuditWriteFailed)
    assert "does not exist" in str(log.exit_reason)
    assert not path.parent.exists()
