"""State written by the landed version (tests/vectors/legacy_state) still works.

The archive is a gloved home made by commit ac7a72f (see its ``generate.py``): three
terminal sessions (pipes, PTY, one reading an exposure), receipt 1 acknowledged, a bundle
exported, and one session left running when gloved was killed with SIGKILL. The code of
today must recover it, page and verify it, and carry on writing after it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.session._gloved import Gloved, plan_text

ARCHIVE = Path(__file__).parents[1] / "vectors" / "legacy_state" / "home.tar.xz"


@pytest.fixture
def legacy(tmp_path: Path) -> Iterator[Gloved]:
    """The legacy home unpacked into a private directory, its gloved started."""
    base = tmp_path / "home"
    base.mkdir(mode=0o700)
    subprocess.run(["tar", "-xJf", str(ARCHIVE), "-C", str(base)], check=True)
    (base / "run").mkdir(mode=0o700)
    gloved = Gloved(base)
    gloved.start()
    try:
        yield gloved
    finally:
        gloved.stop()


def manifest(gloved: Gloved) -> dict[str, Any]:
    return dict(json.loads((gloved.base / "manifest.json").read_text()))


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


def test_the_legacy_sessions_are_recovered_as_they_were_written(legacy: Gloved) -> None:
    """Every terminal session reads back field for field; the interrupted one is lost."""
    expected = manifest(legacy)["sessions"]
    listed = {
        s["session_id"]: s
        for s in json.loads(ok(legacy.glove("session", "list", "--json")))["sessions"]
    }
    for name in ("hello", "tty", "ls"):
        assert listed[expected[name]["id"]] == expected[name]["final"], name
    lost = listed[expected["interrupted"]["id"]]
    assert lost["state"] == "terminal"
    assert lost["outcome"]["kind"] == "daemon_lost"
    assert lost["receipt_seq"] == 4
    status = json.loads(ok(legacy.glove("session", "status", expected["hello"]["id"], "--json")))
    assert status["launch_binding"] == expected["hello"]["final"]["launch_binding"]


def test_the_legacy_receipts_page_verify_and_continue(legacy: Gloved) -> None:
    """Receipts 1-3 page with the old acknowledgement, 4 records the loss, 5 follows on."""
    page = json.loads(ok(legacy.glove("receipts", "page", "--json")))
    assert page["acked"] == 1
    assert [r["seq"] for r in page["receipts"]] == [1, 2, 3, 4]
    ok(legacy.glove("receipts", "ack", "2"))
    assert json.loads(ok(legacy.glove("receipts", "page", "--json")))["acked"] == 2
    bundle = legacy.base / "bundle-hello.json"
    public = legacy.base / "receipts.pub"
    out = ok(legacy.glove("receipts", "verify", str(bundle), "--public-key", str(public)))
    assert out.startswith("OK:"), out
    created = json.loads(
        ok(legacy.glove("session", "create", "-", "--json", stdin=plan_text("hello")))
    )
    final = legacy.wait_terminal(created["session_id"])
    assert final["receipt_seq"] == 5
    assert final["outcome"]["exit_code"] == 3
    fresh = legacy.base / "bundle-new.json"
    ok(
        legacy.glove(
            "receipts", "export", created["session_id"], "-o", str(fresh), "--since", str(bundle)
        )
    )
    ok(legacy.glove("receipts", "verify", str(fresh), "--public-key", str(public)))
    consistent = legacy.glove(
        "receipts", "consistency", str(bundle), str(fresh), "--public-key", str(public)
    )
    assert consistent.returncode == 0, consistent.stderr


def test_the_legacy_journals_and_transcript_read_back(legacy: Gloved) -> None:
    """Both journals verify end to end with the old key; the PTY transcript replays."""
    key = legacy.config / "journal.key"
    for journal in ("sessions", "receipts"):
        out = ok(
            legacy.glove("journal", "verify", str(legacy.state / journal), "--key-file", str(key))
        )
        assert out.startswith("OK "), out
    tty = manifest(legacy)["sessions"]["tty"]["id"]
    assert "tty says hi" in ok(legacy.glove("session", "log", tty))


def test_a_second_start_recovers_the_legacy_state_once(legacy: Gloved) -> None:
    """Restarting over the recovered state writes no second loss receipt."""
    assert legacy.stop() == 0
    legacy.start()
    receipts = legacy.all_receipts()
    assert [r["seq"] for r in receipts][-1] == 4
    kinds = [r["receipt"]["outcome"]["kind"] for r in receipts]
    assert kinds.count("daemon_lost") == 1
