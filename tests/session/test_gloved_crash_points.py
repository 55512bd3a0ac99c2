"""kill -9 of gloved between a session's durable writes: recovery gives each session its
right receipt, and nothing a controller was shown is lost (docs/sessions.md, "Durable
writes").

A real gloved runs with a kill armed by ``glove.testing.faulty_gloved`` (``STAGE:victim:kill``)
at one point of the victim's lifecycle: right after ``preparing`` is written (no fdatasync of
its own), once the sandbox launched (before ``running``), after ``finalizing`` is written,
after the receipt is durable, after its checkpoint, after the terminal state is shown.
Two sessions ended before it. After a restart: every session is terminal with exactly one
receipt; what a watcher saw is still true; the victim's receipt says ``daemon_lost`` (and
in which state) before its receipt existed and its own outcome after; every receipt exports
offline (sealed) and the receipt journal verifies.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from glove.journal import PosixStorage, RecordKind, iter_entries
from glove.testing.faults import KILL_STAGES
from tests.conftest import Unpriv

from ._gloved import FAULTY_GLOVED, HARNESSES, Gloved, leaked_sandboxes, plan_text

VICTIM = """
[harnesses.victim]
argv = ["/bin/sh", "-c", "echo victim; exit 5"]
"""
#: The state the victim's journal shows when gloved dies at each stage (daemon_lost's text).
LOST_IN = {"prepare": "preparing", "launch": "composed", "finalize": "finalizing"}
LEAK_DEADLINE_S = 30.0


def _home(request: pytest.FixtureRequest, who: str, unpriv: Unpriv, tmp_path: Path) -> Gloved:
    if who == "root" or who == "self":
        return Gloved(Path(os.path.realpath(tmp_path)))
    base = Path(tempfile.mkdtemp(prefix="glove-crash-", dir="/var/tmp"))
    os.chown(base, unpriv.uid, unpriv.gid)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    return Gloved(base, python=unpriv.python, creds=unpriv.credentials())


def _json(home: Gloved, *args: str) -> Any:
    done = home.glove(*args, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _plan(home: Gloved, harness: str) -> str:
    path = home.base / f"{harness}.json"
    path.write_text(plan_text(harness))
    if home.creds:
        os.chown(path, int(home.creds["user"]), int(home.creds["group"]))
    return str(path)


def _watch_until_gone(home: Gloved, session_id: str) -> list[dict[str, Any]]:
    """Every view ``glove session watch --json`` printed before gloved died (or the session
    ended), as the home's owner."""
    done = home.glove("session", "watch", session_id, "--json")
    views = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            views.append(json.loads(line))
    return views


def _states(home: Gloved, session_id: str) -> list[str]:
    key = bytes.fromhex((home.config / "journal.key").read_text().strip())
    out = []
    for entry in iter_entries(PosixStorage(), str(home.state / "sessions"), key):
        event = json.loads(entry.payload) if entry.kind == RecordKind.DATA else {}
        if event.get("id") == session_id:
            out.append(event["state"] if event["t"] == "state" else event["t"])
    return out


@pytest.mark.parametrize("stage", KILL_STAGES)
@pytest.mark.parametrize("who", ["root", "unpriv"] if os.getuid() == 0 else ["self"])
def test_kill9_between_durable_writes_keeps_every_answer(
    request: pytest.FixtureRequest, tmp_path: Path, unpriv: Unpriv, who: str, stage: str
) -> None:
    """gloved SIGKILLs itself at ``stage`` of one session: after the restart each session
    is terminal with one receipt, each view a watcher saw still holds, the victim's outcome
    is daemon_lost (naming its journaled state) until its receipt was durable and its own
    exit after, and every receipt is sealed for an offline export."""
    home = _home(request, who, unpriv, tmp_path)
    home.setup(HARNESSES + VICTIM)
    home.start(entry=(*FAULTY_GLOVED, "--fault", f"{stage}:victim:kill", "--"))
    ok_plan, victim_plan = _plan(home, "ok"), _plan(home, "victim")
    done = []
    for _ in range(2):
        session_id = _json(home, "session", "create", ok_plan)["session_id"]
        done.append(_json(home, "session", "wait", session_id))
    victim = _json(home, "session", "create", victim_plan)["session_id"]
    seen = _watch_until_gone(home, victim)
    assert home.proc is not None
    assert home.proc.wait(timeout=60) == -9, home.stderr()
    deadline = time.monotonic() + LEAK_DEADLINE_S
    while leaked_sandboxes():
        assert time.monotonic() < deadline, f"sandboxes outlived gloved: {leaked_sandboxes()}"
        time.sleep(0.05)
    journaled = _states(home, victim)  # what the dead daemon left: written records too
    home.start()
    try:
        for view in done:  # terminal before the kill: the same answer now
            now = _json(home, "session", "status", view["session_id"])
            for field in ("state", "receipt_seq", "outcome", "launch_binding", "updated_ns"):
                assert now[field] == view[field], (field, now, view)
        final = _json(home, "session", "status", victim)
        assert final["state"] == "terminal", final
        for view in seen:  # nothing a watcher was shown is lost
            if view["launch_binding"] is not None:
                assert final["launch_binding"] == view["launch_binding"]
            if view["state"] == "terminal":
                assert (final["receipt_seq"], final["outcome"]) == (
                    view["receipt_seq"],
                    view["outcome"],
                )
        outcome = final["outcome"]
        if stage in LOST_IN:
            assert journaled[-1] == LOST_IN[stage], journaled
            assert outcome["kind"] == "daemon_lost", outcome
            assert f"while the session was {LOST_IN[stage]}" in outcome["error"]
        else:
            assert (outcome["kind"], outcome["exit_code"]) == ("exited", 5), outcome
        if stage != "prepare":
            assert final["launch_binding"] is not None  # composed was durable before launch
        receipts = _json(home, "receipts", "page", "--limit", "1000")["receipts"]
        ids = [r["session_id"] for r in receipts]
        assert sorted(ids) == sorted([*(v["session_id"] for v in done), victim])
        (receipt,) = [r for r in receipts if r["session_id"] == victim]
        assert receipt["seq"] == final["receipt_seq"]
        assert receipt["receipt"]["outcome"] == outcome
    finally:
        assert home.stop() == 0, home.stderr()
    for session_id in ids:  # sealed: the stored checkpoint covers every receipt
        out = home.base / f"{session_id}.bundle"
        exported = home.glove("receipts", "export", session_id, "-o", str(out))
        assert exported.returncode == 0, exported.stdout + exported.stderr
    verified = home.glove(
        "journal", "verify", str(home.state / "receipts"),
        "--key-file", str(home.config / "journal.key"),
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
