"""The A/B report: paired per-run verdicts of a base and a candidate skill in, per
fixture and overall statistics out (pure).

Run ``r`` of the base and run ``r`` of the candidate on the same fixture are a pair (the
interleaving order schedules them back to back). Every run counts: a verdict other than
``pass`` is a run that did not pass, whatever its reason, and ``invalid_evidence`` and
``infra_error`` runs are also counted per arm as *attrition*, never dropped. When the
arms' attrition rates differ by more than :data:`ATTRITION_WARNING` the report carries a
warning: the comparison may then measure which arm breaks its evidence, not which skill
is better.

Overall figures pool every pair of every fixture (the Newcombe interval and McNemar test
treat pairs as the unit), and, with two fixtures or more, add a fixed-seed paired
bootstrap clustered by fixture (fixtures drawn with replacement, each with all its
pairs: the unit of randomization), whose percentile interval is usually the wider and
the safer one. pass^k overall is the mean over fixtures of each fixture's pass^k
(tau-bench), for k = 1 .. the smallest number of runs per fixture.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction
from typing import Final, Literal

import msgspec

from glove.evaluate._order import MAX_SEED
from glove.evaluate._stats import (
    CONFIDENCE,
    mcnemar_exact_p,
    newcombe_paired_interval,
    paired_mde,
    pass_hat_k,
)
from glove.evaluate._verdict import VERDICTS, Verdict
from glove.evaluate.errors import StatsError

ATTRITION_WARNING: Final = Fraction(5, 100)
"""Differential attrition (a difference of rates) above which the report warns."""

NEWCOMBE_METHOD: Final = "newcombe-1998-method-10"
BOOTSTRAP_METHOD: Final = "paired-cluster-bootstrap-percentile"

BOOTSTRAP_RESAMPLES: Final = 2000
"""Resamples of the clustered bootstrap."""

MAX_RUNS_PER_ARM: Final = 10_000
"""Most runs one arm of one fixture may have."""

MAX_FIXTURES: Final = 1_000
"""Most fixtures one report may have."""

Arm = Literal["base", "candidate"]
_ATTRITION: Final = frozenset({"invalid_evidence", "infra_error"})


class FixtureRuns(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The verdicts of one fixture's runs, in run order, one list per arm.

    Attributes:
        fixture: the fixture's name in the report (its digest, usually).
        base: the base arm's verdicts; ``base[r]`` pairs with ``candidate[r]``.
        candidate: the candidate arm's verdicts.
    """

    fixture: str
    base: tuple[Verdict, ...]
    candidate: tuple[Verdict, ...]


class ArmStats(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One arm's counts (``pass`` in JSON is ``passed`` in Python) and rates."""

    runs: int
    passed: int = msgspec.field(name="pass")
    fail: int
    resource_terminated: int
    invalid: int
    infra_error: int
    pass_rate: float
    attrition: float
    pass_hat_k: tuple[float, ...]


class Arms(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Both arms."""

    base: ArmStats
    candidate: ArmStats


class Difference(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Candidate pass rate minus base pass rate over the pairs, with its 95% interval.

    Attributes:
        estimate: ``(candidate_only - base_only) / pairs``.
        ci95: Newcombe's method-10 interval ``[lower, upper]``.
        method: :data:`NEWCOMBE_METHOD`.
        pairs: pairs analysed.
        both: pairs where both arms passed.
        candidate_only: pairs where only the candidate passed.
        base_only: pairs where only the base passed.
        neither: pairs where neither passed.
    """

    estimate: float
    ci95: tuple[float, float]
    method: str
    pairs: int
    both: int
    candidate_only: int
    base_only: int
    neither: int


class Bootstrap(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The clustered bootstrap interval of the overall difference."""

    ci95: tuple[float, float]
    method: str
    resamples: int
    seed: int


class Comparison(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The statistics of one set of pairs (a fixture, or all of them).

    Attributes:
        arms: counts and rates per arm.
        difference: the paired difference and its interval.
        mcnemar_p: the exact two-sided McNemar p-value.
        mde: the smallest difference these pairs detect (two-sided alpha 0.05, power
            0.8, observed discordance), or None when no difference up to 1 is.
        attrition_difference: candidate attrition rate minus base attrition rate.
        attrition_warning: ``|attrition_difference| > 0.05``.
    """

    arms: Arms
    difference: Difference
    mcnemar_p: float
    mde: float | None
    attrition_difference: float
    attrition_warning: bool


class FixtureReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One fixture's name and statistics."""

    fixture: str
    comparison: Comparison


class ABReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The whole A/B report: overall figures at the top level, per fixture below.

    ``arms``, ``difference``, ``mcnemar_p``, ``mde`` and the attrition fields are those
    of all pairs pooled; ``bootstrap`` is the clustered interval (None with one fixture);
    ``decision_rule_digest`` names the decision rule committed before the runs, if any.
    """

    confidence: float
    decision_rule_digest: str | None
    arms: Arms
    difference: Difference
    mcnemar_p: float
    mde: float | None
    attrition_difference: float
    attrition_warning: bool
    bootstrap: Bootstrap | None
    fixtures: tuple[FixtureReport, ...]


def ab_report(
    runs: Sequence[FixtureRuns],
    *,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
    decision_rule_digest: str | None = None,
) -> ABReport:
    """The A/B report of ``runs`` (module docstring); ``seed`` seeds the bootstrap, and
    ``decision_rule_digest`` is copied into the report.

    Raises:
        StatsError: no fixtures or too many, a fixture named twice, a fixture whose
            arms differ in length or have no runs or too many, an unknown verdict, a
            seed or resample count out of range.
    """
    _check(runs, seed, resamples)
    tables = [_table(item) for item in runs]
    reports = tuple(
        FixtureReport(fixture=item.fixture, comparison=_compare([item], [table]))
        for item, table in zip(runs, tables, strict=True)
    )
    overall = _compare(runs, tables)
    bootstrap = None
    if len(runs) >= 2:
        bootstrap = Bootstrap(
            ci95=cluster_bootstrap_interval(tables, seed=seed, resamples=resamples),
            method=BOOTSTRAP_METHOD,
            resamples=resamples,
            seed=seed,
        )
    return ABReport(
        confidence=CONFIDENCE,
        decision_rule_digest=decision_rule_digest,
        arms=overall.arms,
        difference=overall.difference,
        mcnemar_p=overall.mcnemar_p,
        mde=overall.mde,
        attrition_difference=overall.attrition_difference,
        attrition_warning=overall.attrition_warning,
        bootstrap=bootstrap,
        fixtures=reports,
    )


Table = tuple[int, int, int, int]


def _check(runs: Sequence[FixtureRuns], seed: int, resamples: int) -> None:
    if not runs:
        raise StatsError("an A/B report needs at least one fixture")
    if len(runs) > MAX_FIXTURES:
        raise StatsError(f"at most {MAX_FIXTURES} fixtures, got {len(runs)}")
    if not 0 <= seed <= MAX_SEED:
        raise StatsError(f"a seed is in 0..{MAX_SEED}, got {seed}")
    if not 1 <= resamples <= 100_000:
        raise StatsError(f"1..100000 bootstrap resamples, got {resamples}")
    names: set[str] = set()
    for item in runs:
        if item.fixture in names:
            raise StatsError(f"fixture {item.fixture[:80]!r} is named twice")
        names.add(item.fixture)
        if len(item.base) != len(item.candidate):
            raise StatsError(
                f"fixture {item.fixture[:80]!r}: {len(item.base)} base runs and "
                f"{len(item.candidate)} candidate runs are not paired"
            )
        if not 1 <= len(item.base) <= MAX_RUNS_PER_ARM:
            raise StatsError(
                f"fixture {item.fixture[:80]!r}: 1..{MAX_RUNS_PER_ARM} runs per arm, got "
                f"{len(item.base)}"
            )
        for verdict in (*item.base, *item.candidate):
            if verdict not in VERDICTS:
                raise StatsError(f"{verdict!r} is not a verdict")


def _table(item: FixtureRuns) -> Table:
    """``(both, candidate_only, base_only, neither)`` over the fixture's pairs."""
    both = candidate_only = base_only = neither = 0
    for base, candidate in zip(item.base, item.candidate, strict=True):
        if candidate == "pass" and base == "pass":
            both += 1
        elif candidate == "pass":
            candidate_only += 1
        elif base == "pass":
            base_only += 1
        else:
            neither += 1
    return both, candidate_only, base_only, neither


def _arm(verdicts: Sequence[Verdict], per_fixture: Sequence[Sequence[Verdict]]) -> ArmStats:
    runs = len(verdicts)
    passed = verdicts.count("pass")
    invalid = verdicts.count("invalid_evidence")
    infra = verdicts.count("infra_error")
    k_max = min(len(group) for group in per_fixture)
    curve = tuple(
        sum(pass_hat_k(group.count("pass"), len(group), k) for group in per_fixture)
        / len(per_fixture)
        for k in range(1, k_max + 1)
    )
    return ArmStats(
        runs=runs,
        passed=passed,
        fail=verdicts.count("fail"),
        resource_terminated=verdicts.count("resource_terminated"),
        invalid=invalid,
        infra_error=infra,
        pass_rate=passed / runs,
        attrition=(invalid + infra) / runs,
        pass_hat_k=curve,
    )


def _compare(runs: Sequence[FixtureRuns], tables: Sequence[Table]) -> Comparison:
    base = [verdict for item in runs for verdict in item.base]
    candidate = [verdict for item in runs for verdict in item.candidate]
    arms = Arms(
        base=_arm(base, [item.base for item in runs]),
        candidate=_arm(candidate, [item.candidate for item in runs]),
    )
    both = sum(table[0] for table in tables)
    candidate_only = sum(table[1] for table in tables)
    base_only = sum(table[2] for table in tables)
    neither = sum(table[3] for table in tables)
    pairs = both + candidate_only + base_only + neither
    estimate, lower, upper = newcombe_paired_interval(both, candidate_only, base_only, neither)
    attrition_base = Fraction(arms.base.invalid + arms.base.infra_error, len(base))
    attrition_candidate = Fraction(
        arms.candidate.invalid + arms.candidate.infra_error, len(candidate)
    )
    gap = attrition_candidate - attrition_base
    return Comparison(
        arms=arms,
        difference=Difference(
            estimate=estimate,
            ci95=(lower, upper),
            method=NEWCOMBE_METHOD,
            pairs=pairs,
            both=both,
            candidate_only=candidate_only,
            base_only=base_only,
            neither=neither,
        ),
        mcnemar_p=mcnemar_exact_p(candidate_only, base_only),
        mde=paired_mde(pairs, candidate_only + base_only),
        attrition_difference=float(gap),
        attrition_warning=abs(gap) > ATTRITION_WARNING,
    )


def cluster_bootstrap_interval(
    tables: Sequence[Table], *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """The percentile 95% interval of the pooled paired difference, resampling fixtures
    (each a ``(both, candidate_only, base_only, neither)`` table) with replacement.

    The generator is CPython's ``random.Random(seed)`` (MT19937 seeded by
    ``init_by_array``), and only its ``random()`` method is used, the one the Python
    documentation promises will give the same sequence for the same seed in every
    version: a fixture is ``tables[int(random() * len(tables))]``. The bounds are the
    order statistics at ranks ``ceil(0.025 B)`` and ``ceil(0.975 B)`` (1-based) of the
    ``B`` resampled differences.

    Raises:
        StatsError: no tables, a negative count, or a seed out of range.
    """
    if not tables:
        raise StatsError("a bootstrap needs at least one fixture")
    if not 0 <= seed <= MAX_SEED or resamples < 1:
        raise StatsError(f"seed {seed}, {resamples} resamples")
    for table in tables:
        if any(value < 0 for value in table):
            raise StatsError(f"a table of negative counts {table}")
    rng = random.Random(seed)  # noqa: S311 - a reproducible resampling, not a secret
    draw = rng.random
    count = len(tables)
    estimates: list[float] = []
    for _ in range(resamples):
        pairs = gain = 0
        for _ in range(count):
            both, candidate_only, base_only, neither = tables[int(draw() * count)]
            pairs += both + candidate_only + base_only + neither
            gain += candidate_only - base_only
        estimates.append(gain / pairs if pairs else 0.0)
    estimates.sort()
    tail = (1 - CONFIDENCE) / 2
    lower_rank = max(1, _ceil_rank(tail, resamples))
    upper_rank = min(resamples, _ceil_rank(1 - tail, resamples))
    return estimates[lower_rank - 1], estimates[upper_rank - 1]


def _ceil_rank(fraction: float, total: int) -> int:
    """``ceil(fraction * total)`` without float error (0.025 and 0.975 as exact ratios)."""
    exact = Fraction(fraction).limit_denominator(1000) * total
    return -(-exact.numerator // exact.denominator)
