"""A PTY session for an unprivileged owner: their gloved, their CLI, ``glove attach`` on a
terminal of their own."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import Unpriv

from ._terminals import pty_plan, terminal_home

DEADLINE_S = 30.0


def _read_until(master: int, needle: bytes, seen: bytearray) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while needle not in seen:
        assert time.monotonic() < deadline, f"no {needle!r} in {bytes(seen[-500:])!r}"
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break


@pytest.mark.unpriv
def test_an_unprivileged_owner_types_reads_attaches_and_gets_a_receipt(
    request: pytest.FixtureRequest, unpriv: Unpriv
) -> None:
    """As the test user: a shell session takes typed input from the CLI, its log shows the
    answer, ``glove attach`` on a terminal replays it and detaches with Ctrl-], a hang-up
    ends it, and its receipt carries the transcript's digest."""
    base = Path(tempfile.mkdtemp(prefix="glove-terminal-", dir="/var/tmp"))
    os.chown(base, unpriv.uid, unpriv.gid)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    home = terminal_home(base, creds=unpriv.credentials(), python=unpriv.python)
    home.start()
    try:
        created = home.glove("session", "create", "-", "--json", stdin=pty_plan("shell"))
        assert created.returncode == 0, created.stderr
        session_id = json.loads(created.stdout)["session_id"]
        deadline = time.monotonic() + DEADLINE_S
        while "agent$" not in home.glove("session", "log", session_id).stdout:
            assert time.monotonic() < deadline, "no prompt"
            time.sleep(0.1)
        typed = home.glove("session", "input", session_id, "--data", "echo $((6*7))", "--enter")
        assert typed.returncode == 0, typed.stderr
        while "42\n" not in home.glove("session", "log", session_id).stdout:
            assert time.monotonic() < deadline, "no answer"
            time.sleep(0.1)

        master, slave = os.openpty()
        try:
            attach = subprocess.Popen(
                [home.python, "-m", "glove", "attach", session_id],
                **home.creds,
                env=home.env,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
            )
            seen = bytearray()
            _read_until(master, b"42\r\n", seen)  # replayed
            os.write(master, b"\x1d")
            _read_until(master, b"detached from", seen)
            assert attach.wait(timeout=DEADLINE_S) == 0
        finally:
            os.close(master)
            os.close(slave)

        hung = home.glove("session", "signal", session_id, "HUP")
        assert hung.returncode == 0, hung.stderr
        waited = home.glove("session", "wait", session_id, "--json")
        assert json.loads(waited.stdout)["state"] == "terminal", waited.stdout
        page = json.loads(home.glove("receipts", "page", "--json").stdout)
        (receipt,) = [r["receipt"] for r in page["receipts"] if r["session_id"] == session_id]
        assert receipt["transcript"]["complete"] is True
        assert receipt["transcript"]["digest"].startswith("sha256:")
        if os.getuid() == 0:
            owner = (home.state / "sessions-data" / session_id / "transcript.ring").stat()
            assert (owner.st_uid, owner.st_mode & 0o777) == (unpriv.uid, 0o600)
    finally:
        assert home.stop() == 0
