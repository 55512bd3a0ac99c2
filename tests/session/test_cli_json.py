"""Every client command's ``--json`` prints what gloved answered, key for key and value for
value: the contract the typed calls (``glove.control``'s Structs) must keep. Each output is
compared with the same method's raw result (``Client.call``, a dict) where the call can be
repeated, and with the key set it has always had where it cannot."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._gloved import Gloved, plan_text
from ._terminals import pty_plan, terminal_home

#: ``session.status`` and every result that is a session's view (create, stop, cleanup,
#: wait, watch, each row of list).
SESSION_KEYS = {
    "session_id", "state", "harness", "created_ns", "updated_ns", "plan_sha256",
    "plan_blake3", "receipt_seq", "outcome", "launch_binding", "cleaned", "terminal",
    "evaluation",
}  # fmt: skip


@pytest.fixture
def gloved(tmp_path: Path) -> Iterator[Gloved]:
    """A running gloved with the test and the terminal harnesses."""
    home = terminal_home(Path(os.path.realpath(tmp_path)))
    home.start()
    try:
        yield home
    finally:
        home.stop()


def _json(home: Gloved, *args: str, code: int = 0, stdin: str | None = None) -> Any:
    done = home.glove(*args, "--json", stdin=stdin)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def _lines(home: Gloved, *args: str) -> list[Any]:
    done = home.glove(*args, "--json")
    assert done.returncode == 0, (args, done.stderr)
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_session_commands_print_gloved_s_views(gloved: Gloved, tmp_path: Path) -> None:
    """create, wait, watch, status, list, stop, cleanup: each view as gloved sends it."""
    made = _json(gloved, "session", "create", "-", stdin=plan_text("hello"))
    assert set(made) == SESSION_KEYS
    sid = made["session_id"]
    waited = _json(gloved, "session", "wait", sid, code=3)
    raw = gloved.call("session.status", {"session_id": sid})
    assert waited == raw
    assert set(raw) == SESSION_KEYS
    assert _json(gloved, "session", "status", sid) == raw
    assert _lines(gloved, "session", "watch", sid) == [raw]
    listed = _json(gloved, "session", "list", "--limit", "1")
    assert listed == gloved.call("session.list", {"limit": 1})
    assert set(listed) == {"sessions", "next"}
    assert _json(gloved, "session", "stop", sid) == gloved.call(
        "session.status", {"session_id": sid}
    )
    cleaned = _json(gloved, "session", "cleanup", sid)
    assert cleaned == gloved.call("session.status", {"session_id": sid})
    assert cleaned["cleaned"] is True
    refused = _json(gloved, "session", "create", "-", code=1, stdin=plan_text("nope"))
    assert set(refused) == {"valid", "errors"}
    assert refused["valid"] is False


def test_plan_receipts_and_init_print_gloved_s_results(gloved: Gloved, tmp_path: Path) -> None:
    """plan validate (valid: no errors key; invalid: no digests), receipts page, init."""
    good, bad = plan_text("ok"), plan_text("nope")
    plan = tmp_path / "plan.json"
    for text, code, keys in (
        (good, 0, {"valid", "sha256", "blake3"}),
        (bad, 1, {"valid", "errors"}),
    ):
        plan.write_text(text)
        verdict = _json(gloved, "plan", "validate", str(plan), code=code)
        assert verdict == gloved.call("plan.validate", {"plan": text})
        assert set(verdict) == keys
    sid = _json(gloved, "session", "create", "-", stdin=good)["session_id"]
    gloved.wait_terminal(sid)
    page = _json(gloved, "receipts", "page")
    assert page == gloved.call("receipts.page", {"after": 0, "limit": 100})
    assert set(page) == {"receipts", "next_cursor", "acked"}
    assert set(page["receipts"][0]) == {
        "seq",
        "session_id",
        "checkpoint",
        "t_ns",
        "receipt",
        "kind",
    }
    work = tmp_path / "w"
    work.mkdir()
    made = _json(gloved, "init", "w", str(work), "--target", "/workspace/x")
    assert made == {"alias": "w", "generation": 1, "mode": "ro", "target": "/workspace/x",
                    "path": str(work)}  # fmt: skip
    again = gloved.call("exposure.create", {"alias": "v", "path": str(work), "mode": "rw"})
    assert set(again) == {"alias", "generation", "mode", "target", "path"}
    revoked = _json(gloved, "init", "--revoke", "w")  # a revocation is the next generation
    assert revoked == {"alias": "w", "generation": 2, "mode": "ro", "target": "/workspace/x",
                       "revoked": True}  # fmt: skip


def test_session_input_prints_what_the_terminal_took(gloved: Gloved) -> None:
    """session input --json: accepted and queued, as gloved counts them."""
    sid = _json(gloved, "session", "create", "-", stdin=pty_plan("shell"))["session_id"]
    taken = _json(gloved, "session", "input", sid, "--data", "echo hi", "--enter")
    assert set(taken) == {"accepted", "queued"}
    assert taken["accepted"] == len("echo hi\r")
    assert gloved.glove("session", "stop", sid).returncode == 0
