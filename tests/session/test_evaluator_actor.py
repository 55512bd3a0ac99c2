"""The evaluator actor (bounded mailbox, backpressure, gaps), the termination Glove reports
to the judge, and the envelope check the registry runs before every terminal append."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from glove.actors import running
from glove.container import Durations, LimitReport, SandboxResult
from glove.evaluate import Fixture, StreamEvaluator, judge
from glove.journal import RecordKind
from glove.records import EvaluationEntry, OutcomeKind, Receipt, ReceiptOutcome
from glove.session._evaluation import (
    EVALUATOR_MAILBOX,
    INFRA_KINDS,
    EvaluatorActor,
    Feed,
    evaluation_entry,
    infra_outcome,
    termination_of,
)
from glove.session._receipt import check_envelope, outcome_of, terminal_receipt
from glove.session.errors import EnvelopeMismatch

FIXTURE = Fixture(version=1, exit_code=0, max_wall_ms=60_000, required=["done"], forbidden=["BAD"])
STREAM = [b"one ", b"B", b"AD two ", b"do", b"ne\r\n"] * 40


async def test_every_chunk_reaches_the_evaluator_in_order_under_backpressure() -> None:
    """Offered faster than the mailbox drains, chunks wait in order (the drain is told to
    pause); the evidence equals the pure evaluator's over the same bytes, complete."""
    actor = EvaluatorActor(FIXTURE)
    async with running(actor):
        paused = 0
        for chunk in STREAM:
            pending = actor.observe(chunk)
            if pending is not None:
                paused += 1
                await pending
        finished = await actor.finish(evicted=7)
    reference = StreamEvaluator(FIXTURE)
    reference.feed(b"".join(STREAM))
    reference.note_evicted(7)
    assert paused > 0  # the mailbox (of EVALUATOR_MAILBOX chunks) did fill up
    assert len(STREAM) > EVALUATOR_MAILBOX
    assert finished.complete
    assert finished.evidence == reference.finish()


async def test_chunks_offered_without_waiting_are_kept_in_the_backlog() -> None:
    """The sandbox's last drain hands chunks over without awaiting: none is lost or
    reordered."""
    actor = EvaluatorActor(FIXTURE)
    async with running(actor):
        for chunk in STREAM:
            actor.observe(chunk)  # never awaited
        finished = await actor.finish(evicted=0)
    assert finished.complete
    assert finished.evidence.bytes_total == sum(map(len, STREAM))
    assert finished.evidence.required_text[0] is not None


async def test_a_chunk_that_never_arrived_makes_the_evidence_incomplete() -> None:
    """A Feed lost on the way (dropped past its deadline) is a gap: the evidence is not
    complete, so the verdict can never be a pass."""
    actor = EvaluatorActor(FIXTURE)
    async with running(actor):
        actor.observe(b"done\n")
        actor.tell(Feed(100, b"more"))  # offset 100 is not where the stream is
        finished = await actor.finish(evicted=0)
    assert not finished.complete
    termination = termination_of(_outcome("exited"), _result(), complete=finished.complete)
    assert judge(termination, finished.evidence, FIXTURE).verdict == "invalid_evidence"


async def test_a_tail_never_fed_makes_the_evidence_incomplete() -> None:
    """Bytes offered but never handled (the mailbox's Feed lost) leave it incomplete."""
    actor = EvaluatorActor(FIXTURE)
    async with running(actor):
        actor.observe(b"done\n")
        actor._offered += 3  # the drain handed over three bytes the actor never got
        finished = await actor.finish(evicted=0)
    assert not finished.complete


async def test_a_dead_evaluator_refuses_chunks() -> None:
    """Once the evaluator has stopped, observe raises (the drain crashes, the session ends)."""
    actor = EvaluatorActor(FIXTURE)
    async with running(actor):
        pass
    with pytest.raises(Exception, match="evaluator"):
        actor.observe(b"x")


def _result(
    *, exit_code: int = 0, hit: str | None = None, total_s: float = 1.5, setup_s: float = 0.5
) -> SandboxResult:
    limits = {"wall_time": LimitReport(60, "watchdog", hit == "wall_time")}
    limits["memory"] = LimitReport(2**28, "cgroup-v1-memory", hit == "memory")
    return SandboxResult(
        outcome="limit" if hit else "exited",
        exit_code=exit_code,
        durations=Durations(setup_s=setup_s, total_s=total_s),
        limits=limits,
    )


def _outcome(kind: str, result: SandboxResult | None = None) -> ReceiptOutcome:
    return outcome_of(result, kind=msgspec.convert(kind, OutcomeKind))


@pytest.mark.parametrize("kind", sorted(INFRA_KINDS))
def test_an_infrastructure_outcome_is_an_infra_error_of_its_kind(kind: str) -> None:
    """setup, exec, internal, mediation failures, a cancelled run and a lost daemon: the
    agent's run says nothing, the termination names the kind."""
    termination = termination_of(_outcome(kind), None, complete=False)
    assert termination.infra_error == kind
    assert judge(termination, None, FIXTURE).verdict == "infra_error"


def test_the_termination_is_what_the_supervisor_saw() -> None:
    """Exit code only for an exit, limits by their plan names, wall time exec to reap in
    ms, drained only with complete evidence and a result; an evaluator failure wins."""
    exited = termination_of(
        _outcome("exited", _result(exit_code=3)), _result(exit_code=3), complete=True
    )
    assert (exited.exit_code, exited.limits_hit, exited.wall_ms, exited.drained) == (
        3,
        (),
        1000,
        True,
    )
    hit = _result(exit_code=137, hit="wall_time")
    limited = termination_of(_outcome("limit", hit), hit, complete=True)
    assert (limited.exit_code, limited.limits_hit) == (None, ("wall_time_s",))
    assert termination_of(_outcome("exited"), _result(), complete=False).drained is False
    failed = termination_of(
        _outcome("exited"), _result(), complete=True, infra_error="evaluator_failed"
    )
    assert failed.infra_error == "evaluator_failed"
    assert termination_of(_outcome("exited"), None, complete=True).drained is False


def _payload(evaluation: EvaluationEntry | None) -> Receipt:
    return terminal_receipt(
        session_id="s",
        plan_sha256="sha256:x",
        plan_blake3="blake3:x",
        launch_binding=None,
        result=None,
        outcome=outcome_of(None),
        output={},
        created_ns=0,
        launched_ns=None,
        ended_ns=0,
        evaluation=evaluation,
    )


ENTRY = evaluation_entry(
    fixture_digest="sha256:x",
    fixture_size=1,
    refusal=None,
    termination=None,
    evidence=None,
    outcome=infra_outcome("fixture_missing"),
)
REFINEMENT_PLAN = {"terminal": "pty", "evaluation": {"kind": "refinement-eval-v1"}}
RESOURCE_PLAN = {"terminal": "pty"}


@pytest.mark.parametrize(
    ("plan", "evaluation", "kind", "fits"),
    [
        (REFINEMENT_PLAN, ENTRY, RecordKind.REFINEMENT, True),
        (RESOURCE_PLAN, None, RecordKind.RECEIPT, True),
        (REFINEMENT_PLAN, None, RecordKind.RECEIPT, False),  # a resource receipt, refined plan
        (REFINEMENT_PLAN, None, RecordKind.REFINEMENT, False),  # REFINEMENT kind, wrong domain
        (REFINEMENT_PLAN, ENTRY, RecordKind.RECEIPT, False),
        (RESOURCE_PLAN, ENTRY, RecordKind.REFINEMENT, False),  # the reverse
        (RESOURCE_PLAN, ENTRY, RecordKind.RECEIPT, False),
        (RESOURCE_PLAN, None, RecordKind.REFINEMENT, False),
    ],
)  # fmt: skip
def test_the_registry_refuses_an_envelope_of_the_wrong_kind(
    plan: dict[str, Any], evaluation: EvaluationEntry | None, kind: RecordKind, fits: bool
) -> None:
    """A resource envelope for a refinement plan, a refinement envelope for a resource plan,
    or a record kind that is not its payload's domain: refused before any append."""
    payload = _payload(evaluation)
    if fits:
        check_envelope(plan, payload, kind)
    else:
        with pytest.raises(EnvelopeMismatch):
            check_envelope(plan, payload, kind)
