"""The decision rule: canonical bytes and digest, strict read-back, applying it."""

from __future__ import annotations

import msgspec
import pytest

from glove.evaluate import (
    ABReport,
    DecisionRule,
    FixtureRuns,
    StatsError,
    ab_report,
    decide,
    decision_rule_bytes,
    decision_rule_digest,
    decode_decision_rule,
)

RULE = DecisionRule(
    fixtures=("sha256:" + "a" * 64,),
    base="sha256:" + "b" * 64,
    candidate="sha256:" + "c" * 64,
    runs_per_arm=10,
    seed=42,
)


def test_the_canonical_bytes_and_digest_are_pinned() -> None:
    """Every field, in order, compact: the digest commits to all of them."""
    assert decision_rule_bytes(RULE) == (
        b'{"version":1,"kind":"refinement-ab-v1","metric":"pass_rate_difference",'
        b'"interval":"newcombe-1998-method-10","confidence":0.95,"promote_if_lower_above":0.0,'
        b'"max_attrition_difference":0.05,"fixtures":["sha256:' + b"a" * 64 + b'"],'
        b'"base":"sha256:' + b"b" * 64 + b'","candidate":"sha256:' + b"c" * 64 + b'",'
        b'"runs_per_arm":10,"seed":42,"order":"glove-ab-order-v1"}'
    )
    assert decision_rule_digest(RULE) == (
        "sha256:d9177464612334f93dfb00573684930608bcc88fefcd1540f7e3215da51633ed"
    )


def test_any_change_changes_the_digest() -> None:
    """The seed, a threshold or a fixture each give another digest."""
    digests = {
        decision_rule_digest(RULE),
        decision_rule_digest(msgspec.structs.replace(RULE, seed=43)),
        decision_rule_digest(msgspec.structs.replace(RULE, promote_if_lower_above=0.01)),
        decision_rule_digest(msgspec.structs.replace(RULE, fixtures=("sha256:" + "d" * 64,))),
    }
    assert len(digests) == 4


def test_the_bytes_read_back_strictly() -> None:
    """The canonical bytes decode to the rule; repeated keys and unknown fields are refused."""
    data = decision_rule_bytes(RULE)
    assert decode_decision_rule(data) == RULE
    with pytest.raises(StatsError, match="duplicate key"):
        decode_decision_rule(data.replace(b'"seed":42', b'"seed":42,"seed":0'))
    with pytest.raises(StatsError, match="unknown field"):
        decode_decision_rule(data[:-1] + b',"extra":1}')
    with pytest.raises(StatsError):
        decode_decision_rule(data.replace(b'"base":"sha256:b', b'"base":"md5:b'))
    with pytest.raises(StatsError):
        decode_decision_rule(b" " * (256 * 1024 + 1))


def _report(base: str, candidate: str) -> ABReport:
    verdicts = {"p": "pass", "f": "fail", "i": "invalid_evidence"}
    item = FixtureRuns(
        fixture=RULE.fixtures[0],
        base=tuple(verdicts[c] for c in base),  # type: ignore[misc]
        candidate=tuple(verdicts[c] for c in candidate),  # type: ignore[misc]
    )
    return ab_report([item], seed=RULE.seed, decision_rule_digest=decision_rule_digest(RULE))


def test_a_clear_gain_is_promoted() -> None:
    """Ten candidate passes against ten base failures promote the candidate."""
    decision = decide(RULE, _report("f" * 10, "p" * 10))
    assert (decision.decision, decision.reasons) == ("promote", ("lower_bound_above_threshold",))


def test_no_clear_gain_keeps_the_base() -> None:
    """An interval that reaches zero keeps the base."""
    decision = decide(RULE, _report("pfpfpfpfpf", "ppfpfpfpfp"))
    assert decision.decision == "keep"
    assert decision.reasons == ("lower_bound_not_above_threshold",)


def test_differential_attrition_blocks_a_promotion() -> None:
    """A gain that comes with the base breaking its evidence is not promoted."""
    decision = decide(RULE, _report("iiiiffffff", "pppppppppp"))
    assert decision.decision == "keep"
    assert decision.reasons == ("differential_attrition",)


def test_a_report_of_another_rule_is_refused() -> None:
    """A report that names another rule's digest, or other runs, cannot be decided."""
    other = msgspec.structs.replace(RULE, seed=1)
    with pytest.raises(StatsError):
        decide(other, _report("f" * 10, "p" * 10))
    with pytest.raises(StatsError):
        decide(RULE, _report("f" * 9, "p" * 9))
    renamed = msgspec.structs.replace(RULE, fixtures=("sha256:" + "e" * 64,))
    report = _report("f" * 10, "p" * 10)
    with pytest.raises(StatsError):
        decide(renamed, msgspec.structs.replace(report, decision_rule_digest=None))
