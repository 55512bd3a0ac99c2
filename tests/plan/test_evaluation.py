"""Plan v1's ``evaluation`` member: strictly decoded, only with a pty, in both digests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from glove.plan import (
    EVALUATION_KIND,
    FixtureRef,
    PlanError,
    PlanEvaluation,
    canonical_bytes,
    decode_plan,
    plan_digests,
    validate_plan,
)

from ._helpers import EXAMPLE_CANONICAL, plan_bytes, plan_doc

DIGEST = "sha256:" + "ab" * 32


def evaluation(**fixture: Any) -> dict[str, Any]:
    """An evaluation member whose fixture has ``fixture``'s members replaced."""
    return {"kind": EVALUATION_KIND, "fixture": {"digest": DIGEST, "size": 120, **fixture}}


def refused_with(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, message) of every problem ``doc`` is refused with (it must be refused)."""
    with pytest.raises(PlanError) as caught:
        decode_plan(json.dumps(doc).encode())
    return [(problem.path, problem.message) for problem in caught.value.problems]


def test_a_refinement_plan_decodes_with_its_fixture() -> None:
    """A pty plan with an evaluation decodes to typed structs holding the digest and size."""
    plan = decode_plan(plan_bytes(terminal="pty", evaluation=evaluation()))
    assert plan.evaluation == PlanEvaluation(
        kind="refinement-eval-v1", fixture=FixtureRef(digest=DIGEST, size=120)
    )


def test_the_evaluation_needs_a_pty() -> None:
    """An evaluation in a pipes plan is refused at $.evaluation, saying why."""
    problems = refused_with(plan_doc(evaluation=evaluation()))
    assert [path for path, _ in problems] == ["$.evaluation"]
    assert '"pty"' in problems[0][1]


@pytest.mark.parametrize(
    ("member", "path"),
    [
        ({**evaluation(), "kind": "refinement-eval-v2"}, "$.evaluation.kind"),
        (evaluation(digest="sha256:" + "AB" * 32), "$.evaluation.fixture.digest"),
        (evaluation(digest="/etc/passwd"), "$.evaluation.fixture.digest"),
        (evaluation(digest="sha256-" + "ab" * 32), "$.evaluation.fixture.digest"),
        (evaluation(size=0), "$.evaluation.fixture.size"),
        (evaluation(size=64 * 1024 + 1), "$.evaluation.fixture.size"),
        (evaluation(size=True), "$.evaluation.fixture.size"),
        (evaluation(path="/tmp/fixture.json"), "$.evaluation.fixture"),
        ({**evaluation(), "mount": True}, "$.evaluation"),
        ({"kind": EVALUATION_KIND}, "$.evaluation.fixture"),
        ("refinement-eval-v1", "$.evaluation"),
    ],
)  # fmt: skip
def test_a_malformed_evaluation_is_refused_with_its_path(member: Any, path: str) -> None:
    """Another kind, a digest not sha256:<64 lower hex>, a size outside 1..64 KiB, an
    unknown member, a missing fixture: each refused at the path of the fault."""
    problems = refused_with(plan_doc(terminal="pty", evaluation=member))
    assert [found for found, _ in problems] == [path], problems


def test_the_evaluation_is_in_both_digests_and_absent_leaves_them_unchanged() -> None:
    """Adding an evaluation, or changing its digest or size, changes both plan digests; a
    plan without one canonicalizes exactly as before."""
    assert canonical_bytes(decode_plan(plan_bytes())) == EXAMPLE_CANONICAL
    pty = plan_digests(canonical_bytes(decode_plan(plan_bytes(terminal="pty"))))
    seen = {pty.sha256}, {pty.blake3}
    for member in (evaluation(), evaluation(size=121), evaluation(digest="sha256:" + "cd" * 32)):
        digests = plan_digests(
            canonical_bytes(decode_plan(plan_bytes(terminal="pty", evaluation=member)))
        )
        assert digests.sha256 not in seen[0]
        assert digests.blake3 not in seen[1]
        seen[0].add(digests.sha256)
        seen[1].add(digests.blake3)


def test_a_validated_refinement_plan_carries_its_evaluation() -> None:
    """validate_plan keeps the evaluation (None for a resource plan)."""
    from ._helpers import local_policy

    local = local_policy(terminals=frozenset({"pipes", "pty"}))
    plain = validate_plan(decode_plan(plan_bytes(terminal="pty")), local)
    assert plain.evaluation is None
    refined = validate_plan(decode_plan(plan_bytes(terminal="pty", evaluation=evaluation())), local)
    assert refined.evaluation is not None
    assert refined.evaluation.fixture.digest == DIGEST
