"""refinement-eval-v1 through a real gloved and real PTYs: adversarial agents each get the
verdict docs/evaluation.md gives them, from the raw terminal stream alone; the fixture is
read from the library and never reaches the child; refusals carry their codes; the
envelope is a REFINEMENT record of its own domain."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glove.control import ControlError

from ._gloved import Gloved, plan_text
from ._refinement import (
    FIXTURE,
    REQUIRED,
    add_bundle,
    add_fixture,
    refinement_home,
    refinement_plan,
)

#: Each agent's verdict and reason codes (docs/evaluation.md, "Adversarial agents").
EXPECTED: dict[str, tuple[str, list[str]]] = {
    "ev-pass": ("pass", []),
    "ev-files": ("fail", ["required_missing"]),
    "ev-escapes": ("fail", ["required_missing"]),
    "ev-sgr": ("fail", ["forbidden_literal"]),
    "ev-cut": ("invalid_evidence", ["utf8_truncated"]),
    "ev-background": ("pass", []),
    "ev-wall": ("resource_terminated", ["limit_hit", "exit_code_mismatch"]),
    "ev-exit": ("fail", ["exit_code_mismatch"]),
    "ev-look": ("pass", []),
}
#: The plan limits an agent runs with, where they differ from the suite's.
LIMITS: dict[str, dict[str, Any]] = {"ev-wall": {"wall_time_s": 2}}


def _look(library: Path) -> str:
    """An agent that looks for the fixture inside the sandbox (and says so if found)."""
    return (
        f"if test -e {library} || grep -q sha256- /proc/self/mountinfo; then "
        f"echo FIXTURE-VISIBLE; fi; echo '{REQUIRED}'; exit 0"
    )


class Ran:
    """One home's sessions, run once for the module: views, receipts, the CLI's answers."""

    def __init__(self, home: Gloved, fixture: dict[str, Any]) -> None:
        self.home = home
        self.fixture = fixture
        self.views: dict[str, dict[str, Any]] = {}
        self.ids: dict[str, str] = {}
        self.receipts: dict[str, dict[str, Any]] = {}

    def run(self, names: list[str]) -> None:
        for name in names:
            plan = refinement_plan(name, self.fixture, **LIMITS.get(name, {}))
            self.ids[name] = self.home.call("session.create", {"plan": plan})["session_id"]
        for name, session_id in self.ids.items():
            self.views[name] = self.home.wait_terminal(session_id, timeout=120)
        by_id = {r["session_id"]: r for r in self.home.all_receipts()}
        self.receipts = {name: by_id[session_id] for name, session_id in self.ids.items()}


@pytest.fixture(scope="module")
def ran() -> Iterator[Ran]:
    """A root-owned home that ran every adversarial agent once, all at the same time."""
    base = Path(tempfile.mkdtemp(prefix="glove-refine-", dir="/var/tmp"))
    library = base / "state" / "glove" / "library"
    home = refinement_home(base, extra={"ev-look": _look(library)})
    done = Ran(home, add_fixture(home))
    home.start()
    try:
        done.run(list(EXPECTED))
        yield done
    finally:
        assert home.stop() == 0
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("agent", list(EXPECTED))
def test_each_adversarial_agent_gets_its_documented_verdict(ran: Ran, agent: str) -> None:
    """Fake evidence files and JSON, escape sequences, a split forbidden word, a cut UTF-8
    tail, a background writer, a run past its wall time, a wrong exit code, a look for the
    fixture: each agent's session shows exactly its documented verdict and reasons."""
    verdict, codes = EXPECTED[agent]
    evaluation = ran.views[agent]["evaluation"]
    assert evaluation["verdict"] == verdict, evaluation
    assert [reason["code"] for reason in evaluation["reasons"]] == codes, evaluation


def test_the_envelope_is_a_refinement_record_committing_to_the_stream(ran: Ran) -> None:
    """Every refinement session's terminal record is a REFINEMENT envelope: its domain, the
    fixture, the termination Glove saw, evidence whose digest and length are the PTY
    stream's as the receipt's output names it, and the outcome status shows."""
    for agent, item in ran.receipts.items():
        assert item["kind"] == "refinement", agent
        envelope = item["receipt"]
        assert envelope["receipt"] == "glove-refinement/v1"
        evaluation = envelope["evaluation"]
        assert evaluation["kind"] == "refinement-eval-v1"
        assert evaluation["fixture"] == ran.fixture
        assert evaluation["refusal"] is None
        evidence = evaluation["evidence"]
        assert evidence["sha256"] == envelope["output"]["pty"]["sha256"], agent
        assert evidence["bytes_total"] == envelope["output"]["pty"]["bytes"], agent
        assert evidence["bytes_evicted"] == envelope["transcript"]["evicted"], agent
        assert evidence["normalizer"] == "glove-text-v1"
        assert evaluation["termination"]["drained"] is True, agent
        assert evaluation["outcome"] == ran.views[agent]["evaluation"]


def test_the_sgr_split_word_is_found_in_the_text_only(ran: Ran) -> None:
    """FOR ESC[0m BIDDEN is not in the raw bytes; the reason says it was found in the text."""
    evidence = ran.receipts["ev-sgr"]["receipt"]["evaluation"]["evidence"]
    assert evidence["forbidden_raw"][0] is None
    assert evidence["forbidden_text"][0] is not None
    (reason,) = ran.views["ev-sgr"]["evaluation"]["reasons"]
    assert reason["stream"] == "text"


def test_fake_evidence_in_files_and_output_is_only_text(ran: Ran) -> None:
    """The agent that wrote reward.json and a fake receipt and printed a passing verdict
    fails: its session carries one envelope, Glove's, and the fake JSON is in the stream."""
    envelopes = [r for r in ran.home.all_receipts() if r["session_id"] == ran.ids["ev-files"]]
    assert len(envelopes) == 1
    log = ran.home.glove("session", "log", ran.ids["ev-files"])
    assert '"verdict": "pass"' in log.stdout


def test_wait_and_status_show_the_evaluation_once_terminal(ran: Ran) -> None:
    """`glove session wait ID --json` and `glove session status ID --json` carry
    "evaluation" with the verdict and reasons, beside the keys they always had."""
    session_id = ran.ids["ev-exit"]
    waited = ran.home.glove("session", "wait", session_id, "--json")
    assert waited.returncode == 3, waited.stderr
    status = ran.home.glove("session", "status", session_id, "--json")
    assert status.returncode == 0, status.stderr
    for shown in (json.loads(waited.stdout), json.loads(status.stdout)):
        assert shown["evaluation"]["verdict"] == "fail"
        assert shown["evaluation"]["reasons"][0]["code"] == "exit_code_mismatch"
        assert {"outcome", "receipt_seq", "launch_binding", "plan_sha256"} <= set(shown)


def test_receipts_page_names_each_records_kind_and_a_refinements_verdict(ran: Ran) -> None:
    """`glove receipts page` prints the record kind of every receipt and, for a refinement
    envelope, its verdict beside the outcome."""
    shown = ran.home.glove("receipts", "page", "--limit", "1000")
    assert shown.returncode == 0, shown.stderr
    (line,) = [row for row in shown.stdout.splitlines() if ran.ids["ev-exit"] in row]
    assert "exited 3, fail" in line
    assert " refinement " in line


def test_a_resource_plan_keeps_its_receipt_kind_and_shows_no_evaluation(ran: Ran) -> None:
    """A PTY plan without an evaluation still ends with a RECEIPT record of the resource
    domain, and its status has a null evaluation."""
    plan = json.loads(plan_text("ok", terminal="pty"))
    view = ran.home.call("session.create", {"plan": json.dumps(plan)})
    final = ran.home.wait_terminal(view["session_id"])
    assert final["evaluation"] is None
    (item,) = [r for r in ran.home.all_receipts() if r["session_id"] == view["session_id"]]
    assert item["kind"] == "receipt"
    assert item["receipt"]["receipt"] == "glove-session/v1"
    assert "evaluation" not in item["receipt"]


def test_plan_validate_shows_the_evaluation_and_refuses_it_without_a_pty(ran: Ran) -> None:
    """`glove plan validate` prints the fixture of a refinement plan; session.create of a
    pipes plan with an evaluation is invalid_plan at $.evaluation."""
    plan = refinement_plan("ev-pass", ran.fixture)
    shown = ran.home.glove("plan", "validate", "-", stdin=plan)
    assert shown.returncode == 0, shown.stderr
    assert f"refinement-eval-v1, fixture {ran.fixture['digest']}" in shown.stdout
    verdict = json.loads(ran.home.glove("plan", "validate", "-", "--json", stdin=plan).stdout)
    assert verdict["evaluation"] == {"kind": "refinement-eval-v1", "fixture": ran.fixture}
    pipes = json.loads(plan)
    pipes["terminal"] = "pipes"
    with pytest.raises(ControlError) as refused:
        ran.home.call("session.create", {"plan": json.dumps(pipes)})
    assert refused.value.code == "invalid_plan"
    assert [e["path"] for e in refused.value.data["errors"]] == ["$.evaluation"]


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda home: {"digest": "sha256:" + "0" * 64, "size": 10}, "projection_missing"),
        (lambda home: {**add_fixture(home, version=1), "size": 11}, "projection_size_mismatch"),
        (lambda home: add_bundle(home, b'{"version": 1, "version": 1}', "d"), "fixture_invalid"),
        (lambda home: add_bundle(home, b"not json at all", "junk.json"), "fixture_invalid"),
    ],
)  # fmt: skip
def test_a_refused_fixture_launches_nothing_and_its_code_is_in_the_envelope(
    ran: Ran, make: Any, code: str
) -> None:
    """A missing bundle, a size that is not the bundle's, bytes that are no fixture: the
    session never launches, its envelope's outcome names the code, and the verdict is
    infra_error with that code."""
    fixture = make(ran.home)
    view = ran.home.call("session.create", {"plan": refinement_plan("ev-pass", fixture)})
    final = ran.home.wait_terminal(view["session_id"])
    assert final["outcome"]["kind"] == "setup_error"
    assert code in final["outcome"]["error"]
    assert final["launch_binding"] is None
    assert final["evaluation"]["verdict"] == "infra_error"
    assert final["evaluation"]["reasons"][0]["infra_error"] == code
    (item,) = [r for r in ran.home.all_receipts() if r["session_id"] == view["session_id"]]
    assert item["kind"] == "refinement"
    assert item["receipt"]["evaluation"]["refusal"] == code


@pytest.mark.unpriv
def test_an_unprivileged_owner_gets_the_same_verdicts(
    request: pytest.FixtureRequest, unpriv: Any
) -> None:
    """As the test user, with a library the user owns: the honest agent passes, the split
    forbidden word fails, the cut UTF-8 tail is invalid evidence, fake evidence files fail,
    and a missing bundle is infra_error projection_missing."""
    base = Path(tempfile.mkdtemp(prefix="glove-refine-", dir="/var/tmp"))
    os.chown(base, unpriv.uid, unpriv.gid)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    home = refinement_home(base, creds=unpriv.credentials(), python=unpriv.python)
    fixture = add_fixture(home)
    if os.getuid() == 0:
        stored = base / "state" / "glove" / "library" / ("sha256-" + fixture["digest"][7:])
        assert stored.stat().st_uid == unpriv.uid
    home.start()
    try:

        def create(plan: str) -> str:
            made = home.glove("session", "create", "-", "--json", stdin=plan)
            assert made.returncode == 0, made.stderr
            session_id: str = json.loads(made.stdout)["session_id"]
            return session_id

        def final(session_id: str) -> dict[str, Any]:
            waited = home.glove("session", "wait", session_id, "--json", timeout=180)
            shown: dict[str, Any] = json.loads(waited.stdout)
            assert shown["state"] == "terminal", shown
            return shown

        names = ("ev-pass", "ev-sgr", "ev-cut", "ev-files")
        ids = {name: create(refinement_plan(name, fixture)) for name in names}
        missing = {"digest": "sha256:" + "1" * 64, "size": len(json.dumps(FIXTURE))}
        lost = create(refinement_plan("ev-pass", missing))
        for name, session_id in ids.items():
            evaluation = final(session_id)["evaluation"]
            assert evaluation["verdict"] == EXPECTED[name][0], (name, evaluation)
        refused = final(lost)["evaluation"]
        assert refused["reasons"][0]["infra_error"] == "projection_missing"
    finally:
        assert home.stop() == 0


def test_a_refinement_session_lost_with_its_daemon_keeps_its_kind() -> None:
    """kill -9 of gloved while a refinement session runs: the restarted daemon gives it one
    REFINEMENT envelope (infra_error, daemon_lost), receipts.page and status keep its kind
    and evaluation, and a later restart changes nothing."""
    base = Path(tempfile.mkdtemp(prefix="glove-refine-", dir="/var/tmp"))
    home = refinement_home(base)
    fixture = add_fixture(home)
    home.start()
    try:
        session_id = home.call("session.create", {"plan": refinement_plan("ev-wall", fixture)})[
            "session_id"
        ]
        with home.client() as client:
            for view in client.stream("session.watch", {"session_id": session_id}, timeout=60):
                if view["state"] == "running":
                    break
        home.kill9()
        for _ in range(2):  # recovered once; the second start finds it terminal already
            home.start()
            view = home.call("session.status", {"session_id": session_id})
            assert view["state"] == "terminal"
            assert view["outcome"]["kind"] == "daemon_lost"
            assert view["evaluation"]["verdict"] == "infra_error"
            assert view["evaluation"]["reasons"][0]["infra_error"] == "daemon_lost"
            items = [r for r in home.all_receipts() if r["session_id"] == session_id]
            assert [r["kind"] for r in items] == ["refinement"]
            assert items[0]["receipt"]["receipt"] == "glove-refinement/v1"
            assert home.stop() == 0
    finally:
        home.stop()
        shutil.rmtree(base, ignore_errors=True)
