"""gloved's session bookkeeping for real: cleanup, the running cap, paged listing, exposure
listing, the journaled lifecycle states, a prepare-time failure, and recovery that finds
the receipt already written."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glove.control import RemoteError
from glove.journal import PosixStorage, RecordKind
from glove.journal._entries import iter_entries

from ._gloved import Gloved, plan_text

RUNNING_DEADLINE_S = 30.0
PAGED_SESSIONS = 5


@pytest.fixture
def gloved(tmp_path: Path) -> Iterator[Gloved]:
    """A set-up home with a running gloved."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    home.setup()
    home.start()
    try:
        yield home
    finally:
        home.stop()


def _until_running(home: Gloved, session_id: str) -> None:
    deadline = time.monotonic() + RUNNING_DEADLINE_S
    while home.call("session.status", {"session_id": session_id})["state"] != "running":
        assert time.monotonic() < deadline, "the session never ran"
        time.sleep(0.05)


def _hmac_key(home: Gloved) -> bytes:
    return bytes.fromhex((home.config / "journal.key").read_text().strip())


def _events(home: Gloved) -> list[tuple[Any, dict[str, Any]]]:
    """Every record of the session journal (verified with the key): (entry, decoded event)."""
    path = str(home.state / "sessions")
    return [
        (entry, json.loads(entry.payload))
        for entry in iter_entries(PosixStorage(), path, _hmac_key(home))
        if entry.kind == RecordKind.DATA
    ]


def _states(home: Gloved, session_id: str) -> list[str]:
    """The journaled lifecycle of one session, in order."""
    out = []
    for _entry, event in _events(home):
        if event["id"] == session_id:
            out.append(event["state"] if event["t"] == "state" else event["t"])
    return out


def test_cleanup_removes_a_terminal_sessions_data_and_refuses_a_running_one(
    gloved: Gloved,
) -> None:
    """session.cleanup of a running session answers session_conflict and keeps its files;
    of a terminal one it says cleaned, removes its sessions-data and keeps record and
    receipt; cleaning again is harmless."""
    sleeper = gloved.call("session.create", {"plan": plan_text("sleep")})["session_id"]
    _until_running(gloved, sleeper)
    with pytest.raises(RemoteError) as refused:
        gloved.call("session.cleanup", {"session_id": sleeper})
    assert refused.value.code == "session_conflict"
    assert (gloved.state / "sessions-data" / sleeper).is_dir()
    gloved.call("session.stop", {"session_id": sleeper})
    gloved.wait_terminal(sleeper)
    done = gloved.call("session.create", {"plan": plan_text("hello")})["session_id"]
    final = gloved.wait_terminal(done)
    data = gloved.state / "sessions-data" / done
    assert (data / "stdout").read_text() == "hello\n"
    assert final["cleaned"] is False
    view = gloved.call("session.cleanup", {"session_id": done})
    assert (view["cleaned"], view["state"], view["receipt_seq"]) == (
        True,
        "terminal",
        final["receipt_seq"],
    )
    assert not data.exists()
    assert gloved.call("session.status", {"session_id": done})["cleaned"] is True
    assert gloved.call("session.cleanup", {"session_id": done})["cleaned"] is True
    assert (gloved.state / "sessions-data" / sleeper).is_dir()  # only the one asked for
    assert [r["session_id"] for r in gloved.all_receipts()] == [sleeper, done]
    with pytest.raises(RemoteError) as missing:
        gloved.call("session.cleanup", {"session_id": "20260101T000000Z-0000000000000000"})
    assert missing.value.code == "session_not_found"
    gloved.stop()
    assert _states(gloved, done)[-1] == "cleaned"  # durable: a restart keeps it cleaned
    gloved.start()
    assert gloved.call("session.status", {"session_id": done})["cleaned"] is True


def test_max_running_refuses_a_second_live_session_with_session_limit(tmp_path: Path) -> None:
    """With [sessions] max_running = 1, a create while one session is alive answers
    session_limit; once it is terminal the next create runs."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    home.setup()
    toml = home.config / "gloved.toml"
    text = toml.read_text()
    assert "max_running = 64" in text
    toml.write_text(text.replace("max_running = 64", "max_running = 1"))
    home.start()
    try:
        first = home.call("session.create", {"plan": plan_text("sleep")})["session_id"]
        with pytest.raises(RemoteError) as refused:
            home.call("session.create", {"plan": plan_text("ok")})
        assert refused.value.code == "session_limit"
        assert [s["session_id"] for s in home.call("session.list")["sessions"]] == [first]
        home.call("session.stop", {"session_id": first})
        home.wait_terminal(first)
        then = home.call("session.create", {"plan": plan_text("ok")})["session_id"]
        assert home.wait_terminal(then)["outcome"]["exit_code"] == 0
    finally:
        assert home.stop() == 0


def test_session_list_pages_by_id_and_filters_by_state(gloved: Gloved) -> None:
    """Five terminal sessions and one running: pages of two follow `next` to the end in id
    order, `after` starts past an id, and `state` picks only the sessions in it."""
    done = []
    for _ in range(PAGED_SESSIONS):
        session_id = gloved.call("session.create", {"plan": plan_text("ok")})["session_id"]
        gloved.wait_terminal(session_id)
        done.append(session_id)
    sleeper = gloved.call("session.create", {"plan": plan_text("sleep")})["session_id"]
    _until_running(gloved, sleeper)
    everyone = sorted([*done, sleeper])
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["after"] = cursor
        page = gloved.call("session.list", params)
        pages += 1
        assert len(page["sessions"]) <= 2
        seen.extend(s["session_id"] for s in page["sessions"])
        cursor = page["next"]
        if cursor is None:
            break
        assert cursor == seen[-1]
    assert seen == everyone
    assert pages == 3
    tail = gloved.call("session.list", {"after": everyone[2]})
    assert [s["session_id"] for s in tail["sessions"]] == everyone[3:]
    assert tail["next"] is None
    running = gloved.call("session.list", {"state": "running"})
    assert [s["session_id"] for s in running["sessions"]] == [sleeper]
    terminal = gloved.call("session.list", {"state": "terminal", "limit": 3})
    assert [s["session_id"] for s in terminal["sessions"]] == sorted(done)[:3]
    assert terminal["next"] == sorted(done)[2]
    rest = gloved.call("session.list", {"state": "terminal", "after": terminal["next"]})
    assert [s["session_id"] for s in rest["sessions"]] == sorted(done)[3:]
    assert rest["next"] is None
    with pytest.raises(RemoteError) as refused:
        gloved.call("session.list", {"state": "asleep"})
    assert refused.value.code == "invalid_params"
    gloved.call("session.stop", {"session_id": sleeper})
    gloved.wait_terminal(sleeper)


def test_exposure_list_shows_live_exposures_and_their_generations(
    gloved: Gloved, tmp_path: Path
) -> None:
    """exposure.list is empty at first, then names each live exposure with its generation,
    mode and target; a revoked one leaves it, a re-created one shows its new generation."""
    assert gloved.call("exposure.list")["exposures"] == []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    gloved.call("exposure.create", {"alias": "a", "path": str(tmp_path / "a")})
    gloved.call("exposure.create", {"alias": "b", "path": str(tmp_path / "b"), "mode": "rw"})

    def listed() -> list[tuple[str, int, str, str]]:
        views = gloved.call("exposure.list")["exposures"]
        return [(v["alias"], v["generation"], v["mode"], v["target"]) for v in views]

    assert listed() == [("a", 1, "ro", "/workspace/a"), ("b", 1, "rw", "/workspace/b")]
    gloved.call("exposure.revoke", {"alias": "a"})
    assert listed() == [("b", 1, "rw", "/workspace/b")]
    gloved.call("exposure.create", {"alias": "a", "path": str(tmp_path / "a")})
    assert listed() == [("a", 3, "ro", "/workspace/a"), ("b", 1, "rw", "/workspace/b")]


def test_the_journal_records_each_lifecycle_state_in_order(gloved: Gloved) -> None:
    """A session run to its end leaves, in the session journal, exactly created, preparing,
    composed, running, finalizing, terminal; the terminal record names its receipt."""
    session_id = gloved.call("session.create", {"plan": plan_text("hello")})["session_id"]
    final = gloved.wait_terminal(session_id)
    assert gloved.stop() == 0
    assert _states(gloved, session_id) == [
        "created",
        "preparing",
        "composed",
        "running",
        "finalizing",
        "terminal",
    ]
    (terminal,) = [e for _, e in _events(gloved) if e["t"] == "terminal"]
    assert terminal["receipt_seq"] == final["receipt_seq"]
    assert terminal["outcome"] == final["outcome"]


def test_an_exposure_replaced_before_launch_fails_at_prepare_with_a_receipt(
    gloved: Gloved, tmp_path: Path
) -> None:
    """The exposed directory is swapped for another at the same path: the plan still
    validates (the alias is pinned), but prepare finds another directory, so the session
    never launches and its one receipt says setup_error and why."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "note.txt").write_text("the pinned one\n")
    gloved.call("exposure.create", {"alias": "work", "path": str(work)})
    work.rename(tmp_path / "work.old")
    work.mkdir()
    (work / "note.txt").write_text("an impostor\n")
    text = plan_text("ls", exposures=["work"])
    assert gloved.call("plan.validate", {"plan": text})["valid"] is True
    session_id = gloved.call("session.create", {"plan": text})["session_id"]
    final = gloved.wait_terminal(session_id)
    outcome = final["outcome"]
    assert (outcome["kind"], outcome["exit_code"]) == ("setup_error", None), outcome
    assert "another directory" in outcome["error"]
    assert final["launch_binding"] is None
    (receipt,) = gloved.all_receipts()
    assert receipt["session_id"] == session_id
    assert receipt["receipt"]["outcome"] == outcome
    out = gloved.state / "sessions-data" / session_id / "stdout"
    assert not out.exists() or not out.read_bytes()  # nothing ran, so nothing was read
    assert gloved.stop() == 0
    assert _states(gloved, session_id) == ["created", "preparing", "terminal"]


def test_recovery_keeps_a_receipt_that_was_written_before_the_terminal_record(
    tmp_path: Path,
) -> None:
    """gloved dies after appending a session's receipt but before its terminal record (the
    record is cut from the journal's tail): the restarted daemon makes the session terminal
    with that receipt's outcome and seq, and writes no second receipt."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    home.setup()
    home.start()
    try:
        session_id = home.call("session.create", {"plan": plan_text("hello")})["session_id"]
        final = home.wait_terminal(session_id)
    finally:
        home.kill9()
    entry, event = _events(home)[-1]
    assert (event["t"], event["id"]) == ("terminal", session_id)
    segment = home.state / "sessions" / f"seg-{entry.segment:08d}.glj"
    os.truncate(segment, entry.offset)  # the terminal record never reached the disk
    assert _states(home, session_id)[-1] == "finalizing"
    home.start()
    try:
        view = home.call("session.status", {"session_id": session_id})
        assert view["state"] == "terminal"
        assert view["receipt_seq"] == final["receipt_seq"]
        assert view["outcome"] == final["outcome"]
        assert view["outcome"]["exit_code"] == 3  # the receipt's truth, not daemon_lost
        receipts = home.all_receipts()
        assert [r["session_id"] for r in receipts] == [session_id]
    finally:
        assert home.stop() == 0
    assert _states(home, session_id)[-2:] == ["finalizing", "terminal"]


def test_an_exposure_alias_is_any_identifier_a_plan_may_name(
    gloved: Gloved, tmp_path: Path
) -> None:
    """``exposure.create`` takes exactly the plan's identifiers: a digit-first alias works
    end to end; an upper-case or ``_``-first one is refused like a plan would refuse it."""
    work = tmp_path / "w"
    work.mkdir()
    gloved.call("exposure.create", {"alias": "2work", "path": str(work)})
    verdict = gloved.call("plan.validate", {"plan": plan_text(exposures=["2work"])})
    assert verdict["valid"] is True, verdict
    for bad in ("Work", "_w", "-w", "w" * 65):
        with pytest.raises(RemoteError) as refused:
            gloved.call("exposure.create", {"alias": bad, "path": str(work)})
        assert refused.value.code == "invalid_params", bad
        assert not gloved.call("plan.validate", {"plan": plan_text(exposures=[bad])})["valid"]
