"""gloved as a controller drives it: many sessions at once, kill -9 and recovery, typed
refusals of bad plans, exposures, a daemon without setup, journals that do not verify."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glove.control import AsyncClient, ControlError, RemoteError
from glove.session import LIFECYCLE_METHODS
from tests.conftest import Unpriv

from ._gloved import LIMITS, Gloved, leaked_sandboxes, plan_text

CONCURRENT_SESSIONS = 50
CONNECTIONS = 5
#: kill -9 rounds in the suite (benchmarks/sessions/kill9.py runs many more).
KILL_ROUNDS = 6
LEAK_DEADLINE_S = 10.0


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


def _verify_receipts(home: Gloved) -> None:
    done = home.glove(
        "journal",
        "verify",
        str(home.state / "receipts"),
        "--key-file",
        str(home.config / "journal.key"),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _wait_no_leaks() -> None:
    deadline = time.monotonic() + LEAK_DEADLINE_S
    while leaked_sandboxes():
        assert time.monotonic() < deadline, f"sandboxes outlived gloved: {leaked_sandboxes()}"
        time.sleep(0.05)


def test_fifty_concurrent_sessions_each_get_exactly_one_receipt(gloved: Gloved) -> None:
    """A controller-like async client runs 50 sessions at once to completion; each has one
    terminal receipt with its outcome, and the receipt journal verifies."""

    async def drive() -> list[dict[str, Any]]:
        # A connection carries at most 32 requests in flight: spread the watches over five.
        clients = [AsyncClient.for_runtime_dir(gloved.runtime) for _ in range(CONNECTIONS)]
        for client in clients:
            await client.connect()
        try:

            async def one(client: AsyncClient, harness: str) -> dict[str, Any]:
                view = await client.call("session.create", {"plan": plan_text(harness)})
                last = view
                async with client.stream(
                    "session.watch", {"session_id": view["session_id"]}, timeout=120
                ) as changes:
                    async for change in changes:
                        last = change
                return last

            harnesses = ["hello" if i % 2 else "ok" for i in range(CONCURRENT_SESSIONS)]
            return list(
                await asyncio.gather(
                    *(one(clients[i % CONNECTIONS], h) for i, h in enumerate(harnesses))
                )
            )
        finally:
            for client in clients:
                await client.aclose()

    finals = asyncio.run(drive())
    assert [f["state"] for f in finals] == ["terminal"] * CONCURRENT_SESSIONS
    codes = sorted(f["outcome"]["exit_code"] for f in finals)
    assert codes == [0] * 25 + [3] * 25
    receipts = gloved.all_receipts()
    by_session = [r["session_id"] for r in receipts]
    assert sorted(by_session) == sorted(f["session_id"] for f in finals)
    assert len(set(by_session)) == CONCURRENT_SESSIONS
    for final in finals:
        (receipt,) = [r for r in receipts if r["session_id"] == final["session_id"]]
        assert receipt["seq"] == final["receipt_seq"]
        assert receipt["receipt"]["outcome"] == final["outcome"]
        assert receipt["receipt"]["plan"]["sha256"] == final["plan_sha256"]
    _verify_receipts(gloved)


def test_kill9_at_random_points_leaves_exactly_one_honest_receipt_each(tmp_path: Path) -> None:
    """gloved is SIGKILLed at random moments with sessions in every state; after each
    restart every session it ever acknowledged is terminal with exactly one receipt, a
    session cut short says daemon_lost (never exit 0), and no sandbox outlives it."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    home.setup()
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    acknowledged: list[str] = []
    try:
        for _round in range(KILL_ROUNDS):
            home.start()
            with home.client() as client:
                for harness in rng.choices(["ok", "short", "sleep", "hello"], k=4):
                    acknowledged.append(
                        client.call("session.create", {"plan": plan_text(harness)})["session_id"]
                    )
                    time.sleep(rng.uniform(0, 0.05))
            time.sleep(rng.uniform(0, 0.5))
            home.kill9()
            _wait_no_leaks()
        home.start()
        views = {v["session_id"]: v for v in home.call("session.list", {"limit": 500})["sessions"]}
        assert set(acknowledged) <= set(views), "a session the daemon acknowledged vanished"
        receipts = home.all_receipts()
        ids = [r["session_id"] for r in receipts]
        for session_id in acknowledged:
            view = views[session_id]
            assert view["state"] == "terminal", view
            assert ids.count(session_id) == 1, f"{session_id}: {ids.count(session_id)} receipts"
            (receipt,) = [r for r in receipts if r["session_id"] == session_id]
            assert receipt["seq"] == view["receipt_seq"]
            outcome = receipt["receipt"]["outcome"]
            assert outcome == view["outcome"]
            harness = view["harness"]
            if outcome["kind"] == "exited":
                assert outcome["exit_code"] == {"ok": 0, "short": 0, "hello": 3}[harness]
            else:
                assert outcome["kind"] == "daemon_lost", outcome
                assert outcome["exit_code"] is None
        assert home.stop() == 0
        _verify_receipts(home)
    finally:
        if home.proc is not None and home.proc.poll() is None:
            home.kill9()


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"exposures": ["/home/user/secret"]}, "$.exposures[0]", "raw paths"),
        ({"argv": ["/bin/sh"]}, "$.argv", "refused"),
        ({"harness": "nope"}, "$.harness", "nope"),
        ({"limits": {**LIMITS, "memory_bytes": 64 * 1024**3}}, "$.limits.memory_bytes", "max"),
        ({"exposures": ["missing"]}, "$.exposures[0]", "missing"),
    ],
)
def test_a_bad_plan_is_a_typed_error_and_the_daemon_serves_on(
    gloved: Gloved, change: dict[str, Any], path: str, words: str
) -> None:
    """A raw path, an argv, an unknown harness, a limit above the local maximum or an unknown
    exposure: plan.validate says invalid with the JSON path, session.create answers
    invalid_plan with the same problems, and the next good session runs."""
    rest = {k: v for k, v in change.items() if k != "harness"}
    text = plan_text(str(change.get("harness", "ok")), **rest)
    verdict = gloved.call("plan.validate", {"plan": text})
    assert verdict["valid"] is False
    assert path in [e["path"] for e in verdict["errors"]], verdict
    assert any(words in e["message"] for e in verdict["errors"]), verdict
    with pytest.raises(RemoteError) as refused:
        gloved.call("session.create", {"plan": text})
    assert refused.value.code == "invalid_plan"
    assert refused.value.data["errors"] == verdict["errors"]
    view = gloved.call("session.create", {"plan": plan_text("ok")})
    assert gloved.wait_terminal(view["session_id"])["outcome"]["exit_code"] == 0


def test_plan_text_is_judged_byte_for_byte(gloved: Gloved) -> None:
    """Duplicate keys (also after unescaping), malformed JSON and an oversized plan are each
    refused by path; the daemon keeps serving."""
    dup = plan_text("ok")[:-1] + ', "h\\u0061rness": "ok"}'
    verdict = gloved.call("plan.validate", {"plan": dup})
    assert verdict["valid"] is False
    assert "duplicate" in verdict["errors"][0]["message"].lower()
    verdict = gloved.call("plan.validate", {"plan": "{"})
    assert verdict["valid"] is False
    big = plan_text("ok", labels={"k": "x" * 70000})
    with pytest.raises(RemoteError) as refused:
        gloved.call("plan.validate", {"plan": big})
    assert refused.value.code == "invalid_params"
    assert gloved.call("health")["status"] == "ok"


def test_exposures_are_pinned_generational_and_revocable(gloved: Gloved, tmp_path: Path) -> None:
    """glove init exposes a directory; a session reads it at its target; revoking makes
    plans naming it invalid; re-creating bumps the generation."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "note.txt").write_text("from the host\n")
    made = gloved.call("exposure.create", {"alias": "work", "path": str(work)})
    assert (made["generation"], made["mode"], made["target"]) == (1, "ro", "/workspace/work")
    view = gloved.call("session.create", {"plan": plan_text("ls", exposures=["work"])})
    final = gloved.wait_terminal(view["session_id"])
    assert final["outcome"]["exit_code"] == 0, final
    out = gloved.state / "sessions-data" / view["session_id"] / "stdout"
    assert out.read_text() == "from the host\n"
    gloved.call("exposure.revoke", {"alias": "work"})
    verdict = gloved.call("plan.validate", {"plan": plan_text("ls", exposures=["work"])})
    assert verdict["valid"] is False
    assert verdict["errors"][0]["path"] == "$.exposures[0]"
    again = gloved.call("exposure.create", {"alias": "work", "path": str(work)})
    assert again["generation"] == 3  # the revocation was generation 2: never reused
    with pytest.raises(RemoteError) as refused:
        gloved.call("exposure.create", {"alias": "etc", "path": str(gloved.config)})
    assert refused.value.code == "exposure_error"


def _live_sessions(home: Gloved) -> list[str]:
    root = home.call("diag.tree")["root"]
    (sessions,) = [c for c in root["children"] if c["name"] == "sessions"]
    return [c["name"] for c in sessions.get("children", [])]


def test_sessions_appear_in_the_live_tree_and_stop_says_cancelled(gloved: Gloved) -> None:
    """A running session is a session-<id> child of sessions in diag.tree; session.stop
    ends it and its receipt says cancelled."""
    view = gloved.call("session.create", {"plan": plan_text("sleep")})
    session_id = view["session_id"]
    deadline = time.monotonic() + 30
    while gloved.call("session.status", {"session_id": session_id})["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert f"session-{session_id}" in _live_sessions(gloved)
    # Its driver is the first child of its tree, the contained run (with the sandbox) next.
    root = gloved.call("diag.tree")["root"]
    (sessions,) = [c for c in root["children"] if c["name"] == "sessions"]
    (tree,) = [c for c in sessions["children"] if c["name"] == f"session-{session_id}"]
    assert [c["name"] for c in tree["children"]] == ["driver", "contained"]
    assert tree["children"][0]["kind"] == "SessionDriver"
    assert tree["children"][1]["children"][-1]["name"] == "sandbox"
    shown = gloved.glove("diag", "tree", "--runtime-dir", str(gloved.runtime))
    assert shown.returncode == 0, shown.stderr
    assert "driver" in shown.stdout, shown.stdout
    assert "SessionDriver" in shown.stdout, shown.stdout
    gloved.call("session.stop", {"session_id": session_id})
    final = gloved.wait_terminal(session_id)
    assert final["outcome"]["kind"] == "cancelled"
    assert f"session-{session_id}" not in _live_sessions(gloved)
    with pytest.raises(RemoteError) as refused:
        gloved.call("session.status", {"session_id": "20260101T000000Z-0000000000000000"})
    assert refused.value.code == "session_not_found"


def test_without_setup_the_lifecycle_is_not_offered(tmp_path: Path) -> None:
    """gloved with no gloved.toml serves health and capabilities (not operational, and why);
    every lifecycle method answers method_not_found, as an unknown one does."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    (home.base / "run").mkdir(mode=0o700)
    home.start()
    try:
        caps = home.call("capabilities")
        assert caps["lifecycle_operational"] is False
        assert caps["schema_version"] == 0
        assert "glove setup" in caps["reason"]
        for method in LIFECYCLE_METHODS:
            with pytest.raises(RemoteError) as refused:
                home.call(method, {})
            assert refused.value.code == "method_not_found", method
    finally:
        assert home.stop() == 0


def test_a_journal_that_does_not_verify_stops_the_daemon_starting(tmp_path: Path) -> None:
    """A byte changed in the session journal: gloved refuses to start and says which
    journal failed verification (it never serves from state it cannot trust)."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    home.setup()
    home.start()
    view = home.call("session.create", {"plan": plan_text("ok")})
    home.wait_terminal(view["session_id"])
    assert home.stop() == 0
    segments = sorted((home.state / "sessions").glob("*.seg*")) or sorted(
        p for p in (home.state / "sessions").iterdir() if p.is_file() and p.stat().st_size > 64
    )
    target = segments[0]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(AssertionError, match="exited"):
        home.start()
    assert home.proc is not None
    assert home.proc.returncode != 0
    assert "refusing to start: gloved/session-journal could not start: JournalCorrupt" in (
        home.stderr()
    )
    assert "Traceback" not in home.stderr()


def test_the_cli_speaks_for_a_controller(gloved: Gloved, tmp_path: Path) -> None:
    """glove plan validate / session create, wait, status, list / receipts page, ack /
    capabilities / init: the JSON contract and the exit codes."""
    plan = tmp_path / "plan.json"
    plan.write_text(plan_text("hello"))
    done = gloved.glove("plan", "validate", str(plan), "--json")
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["valid"] is True
    assert verdict["sha256"].startswith("sha256:")
    assert verdict["blake3"].startswith("blake3:")
    bad = tmp_path / "bad.json"
    bad.write_text(plan_text("nope"))
    done = gloved.glove("plan", "validate", str(bad), "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["errors"][0]["path"] == "$.harness"
    done = gloved.glove("session", "create", str(plan), "--json")
    assert done.returncode == 0, done.stderr
    session_id = json.loads(done.stdout)["session_id"]
    done = gloved.glove("session", "wait", session_id, "--json")
    assert done.returncode == 3, done.stderr  # the command's own exit code
    assert json.loads(done.stdout)["outcome"]["exit_code"] == 3
    status = json.loads(gloved.glove("session", "status", session_id, "--json").stdout)
    assert (status["state"], status["outcome"]["kind"]) == ("terminal", "exited")
    listed = json.loads(gloved.glove("session", "list", "--json").stdout)
    assert [s["session_id"] for s in listed["sessions"]] == [session_id]
    table = gloved.glove("session", "list").stdout
    assert table.splitlines()[0].split()[:2] == ["SESSION", "STATE"]
    page = json.loads(gloved.glove("receipts", "page", "--json").stdout)
    assert [(r["seq"], r["session_id"]) for r in page["receipts"]] == [(1, session_id)]
    assert gloved.glove("receipts", "ack", "1").returncode == 0
    assert gloved.glove("receipts", "ack", "1").returncode != 0
    sleeper = tmp_path / "sleep.json"
    sleeper.write_text(plan_text("sleep"))
    long_id = json.loads(gloved.glove("session", "create", str(sleeper), "--json").stdout)
    done = gloved.glove("session", "wait", long_id["session_id"], "--timeout", "0.5")
    assert done.returncode == 75  # EXIT_DEADLINE: the wait expired, the session goes on
    assert gloved.glove("session", "stop", long_id["session_id"]).returncode == 0
    done = gloved.glove("session", "wait", long_id["session_id"])
    assert done.returncode == 1  # cancelled: not an exit 0
    caps = json.loads(gloved.glove("capabilities", "--json").stdout)
    assert caps["lifecycle_operational"] is True
    assert caps["schema_version"] == 1
    work = tmp_path / "w"
    work.mkdir()
    made = json.loads(gloved.glove("init", "w", str(work), "--json").stdout)
    assert made["generation"] == 1
    assert gloved.glove("init", "--revoke", "w").returncode == 0
    assert gloved.glove("init", "w", str(work), "--mode", "rx").returncode == 64


def test_without_a_daemon_the_cli_says_so(tmp_path: Path) -> None:
    """No gloved running: one line naming the socket, exit 69, no traceback."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    home.setup()
    for argv in (("session", "list"), ("receipts", "page"), ("receipts", "ack", "1")):
        done = home.glove(*argv)
        assert done.returncode == 69, argv
        assert "gloved" in done.stderr
        assert "Traceback" not in done.stderr


def test_sessions_run_for_an_unprivileged_owner(
    request: pytest.FixtureRequest, unpriv: Unpriv
) -> None:
    """The whole flow as the unprivileged test user (setup, gloved, a session to its
    receipt, the journal verified) through the CLI; root's client is refused by uid."""
    base = Path(tempfile.mkdtemp(prefix="glove-gloved-", dir="/var/tmp"))
    os.chown(base, unpriv.uid, unpriv.gid)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    home = Gloved(base, python=unpriv.python, creds=unpriv.credentials())
    home.setup()
    home.start()
    try:
        plan = base / "plan.json"
        plan.write_text(plan_text("hello"))
        os.chown(plan, unpriv.uid, unpriv.gid)
        done = home.glove("session", "create", str(plan), "--json")
        assert done.returncode == 0, done.stderr
        session_id = json.loads(done.stdout)["session_id"]
        done = home.glove("session", "wait", session_id, "--json")
        assert done.returncode == 3, done.stdout + done.stderr
        page = json.loads(home.glove("receipts", "page", "--json").stdout)
        assert [r["session_id"] for r in page["receipts"]] == [session_id]
        if os.getuid() == 0:
            with pytest.raises(ControlError):
                home.call("health")
    finally:
        assert home.stop() == 0
    _verify_receipts(home)
