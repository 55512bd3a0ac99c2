"""The decision rule of an A/B run, committed by digest before its first run (pure).

The rule says, before any outcome is known, what is compared, by which method, with
which fixtures, skills, run count and seed, and when the candidate is promoted. Its
canonical bytes are msgspec's compact JSON of :class:`DecisionRule` (members in field
order, every field present, numbers in their shortest round-trip form); its digest is
SHA-256 over them. :func:`decode_decision_rule` reads those bytes back strictly.

:func:`decide` applies a rule to a report: promote when the lower bound of the 95%
interval of (candidate - base) is above ``promote_if_lower_above`` and the arms'
attrition differs by no more than ``max_attrition_difference``; otherwise keep the base,
with the reasons.
"""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Final, Literal

import msgspec

from glove.evaluate._ab import NEWCOMBE_METHOD, ABReport
from glove.evaluate._json import loads_located
from glove.evaluate._order import MAX_SEED, ORDER_ALGORITHM
from glove.evaluate.errors import FixtureError, StatsError

DECISION_RULE_KIND: Final = "refinement-ab-v1"
MAX_RULE_BYTES: Final = 256 * 1024
"""Largest encoded rule read back (1,000 fixture digests fit)."""

_DIGEST = Annotated[str, msgspec.Meta(pattern=r"^sha256:[0-9a-f]{64}$")]


class DecisionRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What an A/B run compares and when it promotes the candidate.

    Attributes:
        version: 1.
        kind: ``refinement-ab-v1``.
        metric: ``pass_rate_difference``: candidate pass rate minus base pass rate over
            all pairs, any verdict but ``pass`` counting as not passing.
        interval: ``newcombe-1998-method-10``: the interval ``promote_if_lower_above``
            is checked against.
        confidence: 0.95.
        promote_if_lower_above: promote when the interval's lower bound is above this.
        max_attrition_difference: promote only when the arms' attrition rates differ by
            at most this much.
        fixtures: the fixtures' digests, in schedule order (fixture ``i`` of the order).
        base: the base skill's digest.
        candidate: the candidate skill's digest.
        runs_per_arm: paired runs per fixture per arm.
        seed: the seed of the interleaving order and of the bootstrap.
        order: the interleaving algorithm (``glove-ab-order-v1``).
    """

    version: Literal[1] = 1
    kind: Literal["refinement-ab-v1"] = DECISION_RULE_KIND
    metric: Literal["pass_rate_difference"] = "pass_rate_difference"
    interval: Literal["newcombe-1998-method-10"] = NEWCOMBE_METHOD
    confidence: Annotated[float, msgspec.Meta(ge=0.95, le=0.95)] = 0.95
    promote_if_lower_above: Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)] = 0.0
    max_attrition_difference: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.05
    fixtures: Annotated[tuple[_DIGEST, ...], msgspec.Meta(min_length=1, max_length=1000)]
    base: _DIGEST
    candidate: _DIGEST
    runs_per_arm: Annotated[int, msgspec.Meta(ge=1, le=10_000)]
    seed: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEED)]
    order: Literal["glove-ab-order-v1"] = ORDER_ALGORITHM


class Decision(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The rule applied: ``promote`` or ``keep``, and why (stable codes)."""

    decision: Literal["promote", "keep"]
    reasons: tuple[str, ...]


def decision_rule_bytes(rule: DecisionRule) -> bytes:
    """The canonical bytes of ``rule`` (module docstring).

    Raises:
        StatsError: a threshold is not a finite number (a hand-built rule).
    """
    for value in (rule.promote_if_lower_above, rule.max_attrition_difference):
        if not math.isfinite(value):
            raise StatsError(f"a rule threshold is a finite number, got {value}")
    return msgspec.json.encode(rule)


def decision_rule_digest(rule: DecisionRule) -> str:
    """``"sha256:<hex>"`` of :func:`decision_rule_bytes`.

    Raises:
        StatsError: as :func:`decision_rule_bytes`.
    """
    return "sha256:" + hashlib.sha256(decision_rule_bytes(rule)).hexdigest()


def decode_decision_rule(data: bytes) -> DecisionRule:
    """Read a rule back from its bytes: strict JSON, every key once, typed.

    Raises:
        StatsError: the bytes are over :data:`MAX_RULE_BYTES`, not strict JSON, or not a
            rule (the message names the path).
    """
    if len(data) > MAX_RULE_BYTES:
        raise StatsError(f"{len(data)} bytes is over the {MAX_RULE_BYTES}-byte rule cap")
    try:
        raw = loads_located(data, max_depth=4)
    except FixtureError as exc:
        first = exc.problems[0]
        raise StatsError(f"not a decision rule: {first.path}: {first.message}") from exc
    try:
        return msgspec.convert(raw, DecisionRule)
    except msgspec.ValidationError as exc:
        raise StatsError(f"not a decision rule: {exc}") from exc


def decide(rule: DecisionRule, report: ABReport) -> Decision:
    """Apply ``rule`` to ``report`` (module docstring).

    Reason codes: ``lower_bound_above_threshold`` (the only one of a promotion),
    ``lower_bound_not_above_threshold``, ``differential_attrition``.

    Raises:
        StatsError: the report names another decision rule, or other fixtures (by
            digest, in order) or another number of runs than the rule.
    """
    digest = decision_rule_digest(rule)
    if report.decision_rule_digest is not None and report.decision_rule_digest != digest:
        raise StatsError("the report was made under another decision rule")
    if [item.fixture for item in report.fixtures] != list(rule.fixtures) or any(
        item.comparison.arms.base.runs != rule.runs_per_arm for item in report.fixtures
    ):
        raise StatsError("the report's fixtures or runs are not the rule's")
    reasons: list[str] = []
    lower = report.difference.ci95[0]
    attrition = abs(report.attrition_difference)
    if lower <= rule.promote_if_lower_above:
        reasons.append("lower_bound_not_above_threshold")
    if attrition > rule.max_attrition_difference:
        reasons.append("differential_attrition")
    if reasons:
        return Decision(decision="keep", reasons=tuple(reasons))
    return Decision(decision="promote", reasons=("lower_bound_above_threshold",))
