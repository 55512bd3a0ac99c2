"""``glove session signal`` on a pipes session: INT reaches the whole job (a shell waiting
on its child, and the child), as the owner, root or unprivileged."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Unpriv

from ._gloved import HARNESSES, MARKER, Gloved, plan_text

WHO = ["root", "unpriv"] if os.getuid() == 0 else ["self"]
DEADLINE_S = 60.0
#: A shell waiting on a child shell that waits on a sleep. The child ends with 7 if it
#: gets INT itself, with 0 once the sleep is over; the outer one exits with the child's
#: code (its own INT is trapped): 7 only if the INT reached the whole group.
_CHILD = f"trap 'exit 7' INT; /bin/sleep 30 & wait; : {MARKER}"
_NESTED = ["/bin/sh", "-c", f"trap : INT; /bin/sh -c {shlex.quote(_CHILD)}; exit $?"]
NESTED_HARNESS = f"\n[harnesses.nested]\nargv = {json.dumps(_NESTED)}\n"


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.fixture(params=WHO)
def home(request: pytest.FixtureRequest, unpriv: Unpriv) -> Iterator[Gloved]:
    """A running gloved of root's or of the unprivileged user's."""
    base = Path(tempfile.mkdtemp(prefix="glove-signal-", dir="/var/tmp"))
    try:
        if request.param == "unpriv":
            os.chown(base, unpriv.uid, unpriv.gid)
            gloved = Gloved(base, creds=unpriv.credentials())
            gloved.python = unpriv.python
        else:
            gloved = Gloved(base)
        gloved.setup(HARNESSES + NESTED_HARNESS)
        gloved.start()
        try:
            yield gloved
        finally:
            gloved.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _sandbox_sleeps() -> list[int]:
    """The ``sleep`` processes of the ``sleep`` harness (children of its shell, which
    carries the suite's marker), seen from the host."""
    parents: dict[int, int] = {}
    marked: set[int] = set()
    sleeps: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat.rpartition(")")[2].split()[1])
        if any(MARKER.encode() in arg for arg in argv):
            marked.add(pid)
        if argv[0] == b"/bin/sleep":
            sleeps.append(pid)
    return [pid for pid in sleeps if parents.get(pid) in marked]


def test_int_reaches_a_pipes_sessions_whole_job(home: Gloved) -> None:
    """``glove session signal ID INT`` on a pipes session whose shell waits on a child
    shell: the init gives the INT to the command's process group, so the child gets it
    too and ends at once with its own code (7), which the session reports."""
    created = home.glove("session", "create", "-", "--json", stdin=plan_text("nested"))
    assert created.returncode == 0, created.stderr
    session_id = json.loads(created.stdout)["session_id"]
    _until(lambda: bool(_sandbox_sleeps()), "the child shell never started its sleep")
    sent = home.glove("session", "signal", session_id, "INT")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == "SIGINT -> command"
    waited = home.glove("session", "wait", session_id, "--json")
    outcome = json.loads(waited.stdout)["outcome"]
    assert (outcome["kind"], outcome["exit_code"]) == ("exited", 7), outcome
