"""What a command wrote before a limit ended it arrives, whole, in both supervisors.

Each limit that ends a sandbox (wall time, CPU time, memory, pids, output) and the one that
only refuses writes (disk) is met by a command that first writes a line, a block several pipe
buffers long and a line from an orphan; every run goes through the blocking supervisor of
``glove exec`` and the asyncio one of gloved, on pipes and on a PTY, with a prompt consumer
and a slow one (``tests/container/drain_cases.py``), as root and as the unprivileged user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Unpriv

HERE = Path(__file__).parent
#: The bytes of the block each case writes (drain_cases.BIG).
BIG = 300_000
#: Limits that end the sandbox (disk refuses writes; the user's memory rlimit fails an
#: allocation, root's cgroup OOM-kills).
ENDED = {"wall_time", "cpu_time", "pids", "memory", "output"}


def _run_cases(case: str, who: str, unpriv: Unpriv) -> list[dict[str, Any]]:
    code = (HERE / "drain_cases.py").read_text()
    python = unpriv.python if who == "unpriv" else sys.executable
    argv = [python, "-c", code, case]
    if who == "unpriv":
        argv = unpriv.command(*argv)
    done = subprocess.run(argv, cwd="/", capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("who", ["root", "unpriv"] if os.getuid() == 0 else ["self"])
@pytest.mark.parametrize("case", ["wall_time", "cpu_time", "pids", "memory", "disk", "output"])
def test_everything_written_before_the_limit_arrives(case: str, who: str, unpriv: Unpriv) -> None:
    """Every byte the command wrote before its limit was met reaches the consumer, and the
    count in the result is exactly what arrived, whichever shell, terminal or consumer."""
    runs = _run_cases(case, who, unpriv)
    assert len(runs) == 8  # pipes and PTY, two shells, prompt and slow consumers
    for run in runs:
        where = f"{case} ({who}, pty={run['pty']}, {run['shell']}, slow={run['slow']}): {run}"
        assert run["xs"] == BIG, where
        assert {"first", "orphan", "last"} <= set(run["lines"]), where
        assert run["counted"] == run["received"], where
        assert run["hit"] is True, where
        ended_by_limit = case in ENDED and not (case == "memory" and who != "root")
        if ended_by_limit:
            assert run["outcome"] == "limit", where
        if case == "output":
            assert run["received"] == BIG + 4096, where
        if case == "disk":
            assert "after-enospc" in run["lines"], where
