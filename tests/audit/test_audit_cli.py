"""``glove audit show``: the activity log as a table or JSON lines, filtered, followed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

RECORDS = [
    {"seq": 1, "ts": "2026-12-01T10:00:00.000001Z", "run": "aaaa", "kind": "mcp.call",
     "tool": "fs__read_text_file", "decision": "allow", "reason": "allowed by read"},
    {"seq": 2, "ts": "2026-12-01T10:00:01.000002Z", "run": "aaaa", "kind": "mcp.call",
     "tool": "fs__write_file", "decision": "deny", "reason": "no rule allows it"},
    {"seq": 3, "ts": "2026-12-01T10:00:02.000003Z", "run": "bbbb", "kind": "mcp.call",
     "tool": "echo__echo", "decision": "unknown_tool", "reason": "no upstream exposes this tool"},
]  # fmt: skip


def _glove(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "glove", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _log(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "audit.log"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS) + extra)
    return path


def test_the_table_shows_one_row_per_record(tmp_path: Path) -> None:
    """A person gets a header and a row per decision, oldest first, with the reason."""
    done = _glove("audit", "show", str(_log(tmp_path)))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["SEQ", "TIME", "RUN", "DECISION", "TOOL", "WHY"]
    assert len(lines) == 4
    assert lines[2].split()[:5] == ["2", "10:00:01.000002", "aaaa", "deny", "fs__write_file"]
    assert "no rule allows it" in lines[2]


def test_json_lines_and_filters(tmp_path: Path) -> None:
    """--json prints the records themselves; --tool (a glob), --decision and --run filter."""
    path = str(_log(tmp_path))
    everything = _glove("audit", "show", "--json", path)
    assert [json.loads(line) for line in everything.stdout.splitlines()] == RECORDS
    by_tool = _glove("audit", "show", "--json", "--tool", "fs__*", path)
    assert [json.loads(line)["seq"] for line in by_tool.stdout.splitlines()] == [1, 2]
    by_decision = _glove("audit", "show", "--json", "--decision", "deny", path)
    assert [json.loads(line)["seq"] for line in by_decision.stdout.splitlines()] == [2]
    by_run = _glove("audit", "show", "--json", "--run", "bbbb", path)
    assert [json.loads(line)["seq"] for line in by_run.stdout.splitlines()] == [3]


def test_lines_that_are_not_records_are_counted_not_fatal(tmp_path: Path) -> None:
    """Garbage in the file is skipped and counted on stderr; the records still show."""
    done = _glove("audit", "show", "--json", str(_log(tmp_path, "not json\n[1]\n")))
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 3
    assert "skipped 1 line(s)" in done.stderr  # [1] is JSON but no record: filtered


def test_a_missing_file_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """An unreadable log is one line naming it, exit 1, no traceback."""
    done = _glove("audit", "show", str(tmp_path / "nope.log"))
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        == f"glove audit show: cannot read {tmp_path / 'nope.log'}: No such file or directory"
    )


def test_follow_prints_new_records_and_survives_rotation(tmp_path: Path) -> None:
    """--follow keeps printing as records are appended, and across a rotation."""
    path = _log(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "glove", "audit", "show", "--follow", "--json", str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen = [json.loads(proc.stdout.readline())["seq"] for _ in range(3)]
        with path.open("a") as handle:
            handle.write(json.dumps({**RECORDS[0], "seq": 4}) + "\n")
        seen.append(json.loads(proc.stdout.readline())["seq"])
        os.rename(path, tmp_path / "audit.log.1")
        time.sleep(0.5)
        path.write_text(json.dumps({**RECORDS[0], "seq": 5}) + "\n")
        seen.append(json.loads(proc.stdout.readline())["seq"])
        assert seen == [1, 2, 3, 4, 5]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
