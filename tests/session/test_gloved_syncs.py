"""How many fsync/fdatasync calls one session costs a real gloved, counted with strace.

Two runs of a fresh gloved under ``strace -f``: one session, then three more. The difference
is what sessions add in the steady state (start-up and shutdown syncs cancel out): per
session, three commits of the session journal (created, composed, running), one of the
receipt journal, one checkpoint file, and one fdatasync per output stream that carried bytes
(docs/sessions.md, "Durable writes").
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from ._gloved import GLOVED, Gloved, plan_text

STRACE = shutil.which("strace")
_CALL = re.compile(r"\b(fdatasync|fsync)\(\d+<([^>]*)>")
_SESSION_DIR = re.compile(r"/\d{8}T\d{6}Z-[0-9a-f]{16}/")

#: What one session adds: (call, file relative to the state directory) -> count.
PER_SESSION = {
    ("fdatasync", "sessions/seg-00000000.glj"): 3,
    ("fdatasync", "receipts/seg-00000000.glj"): 1,
    ("fsync", "receipts/checkpoint.tmp"): 1,
}
#: What a session whose command wrote to stdout and stderr adds on top.
PER_OUTPUT = {
    ("fdatasync", "sessions-data/ID/stdout"): 1,
    ("fdatasync", "sessions-data/ID/stderr"): 1,
}


def _traced_run(base: Path, harnesses: list[str]) -> collections.Counter[tuple[str, str]]:
    """A fresh home's gloved under strace runs ``harnesses`` one after another and stops;
    its syncs by call and file (session ids folded to ``ID``)."""
    home = Gloved(base)
    home.setup()
    trace = base / "trace"
    home.log = base / "gloved.log"
    with home.log.open("wb") as err:
        home.proc = subprocess.Popen(
            [
                str(STRACE), "-f", "-qq", "-y", "-e", "trace=fdatasync,fsync",
                "-o", str(trace), home.python, *GLOVED,
            ],
            env=home.env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
    try:
        home.wait_ready()
        for harness in harnesses:
            session_id = home.call("session.create", {"plan": plan_text(harness)})["session_id"]
            assert home.wait_terminal(session_id)["outcome"]["kind"] == "exited"
        children = Path(f"/proc/{home.proc.pid}/task/{home.proc.pid}/children").read_text()
        os.kill(int(children.split()[0]), signal.SIGTERM)  # gloved; strace ends with it
        assert home.proc.wait(timeout=60) == 0, home.stderr()
    finally:
        if home.proc.poll() is None:
            home.proc.kill()
            home.proc.wait(timeout=30)
    state = str(home.state) + "/"
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in trace.read_text().splitlines():
        found = _CALL.search(line)
        if found is not None:
            path = _SESSION_DIR.sub("/ID/", found.group(2)).removeprefix(state)
            counts[found.group(1), path] += 1
    return counts


@pytest.mark.skipif(STRACE is None, reason="strace is not installed")
def test_a_session_costs_five_syncs_and_one_per_stream_with_output(tmp_path: Path) -> None:
    """Three sessions more (two of /bin/true, one writing stdout and stderr) add exactly
    three session-journal commits, one receipt commit and one checkpoint file each, plus
    one fdatasync per stream with bytes: no pty file, no empty stream, no directory."""
    one = _traced_run(tmp_path / "one", ["ok"])
    four = _traced_run(tmp_path / "four", ["ok", "ok", "ok", "hello"])
    added = four - one
    assert not (one - four), (one, four)
    expected: collections.Counter[tuple[str, str]] = collections.Counter()
    for _ in range(3):
        expected.update(PER_SESSION)
    expected.update(PER_OUTPUT)
    assert added == expected, (one, four)
