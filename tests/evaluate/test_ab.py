"""The A/B report: the JSON keys, attrition never dropped, the warning, pooled figures."""

from __future__ import annotations

import random

import msgspec
import pytest

from glove.evaluate import (
    ABReport,
    FixtureRuns,
    StatsError,
    ab_report,
    cluster_bootstrap_interval,
    mcnemar_exact_p,
    newcombe_paired_interval,
)


def runs(name: str, base: str, candidate: str) -> FixtureRuns:
    """A fixture's runs from one letter per verdict: p f r i x (pass, fail, resource,
    invalid, infra)."""
    letters = {
        "p": "pass",
        "f": "fail",
        "r": "resource_terminated",
        "i": "invalid_evidence",
        "x": "infra_error",
    }
    return FixtureRuns(
        fixture=name,
        base=tuple(letters[c] for c in base),  # type: ignore[misc]
        candidate=tuple(letters[c] for c in candidate),  # type: ignore[misc]
    )


def test_the_json_keys_of_the_issue() -> None:
    """The issue's keys: arms.base/candidate counts, difference.estimate and ci95, mcnemar_p."""
    report = ab_report([runs("f1", "ppff", "pppf")], decision_rule_digest="sha256:" + "1" * 64)
    doc = msgspec.json.decode(msgspec.json.encode(report))
    for arm in ("base", "candidate"):
        assert {"runs", "pass", "invalid", "infra_error"} <= set(doc["arms"][arm])
    assert doc["arms"]["base"]["pass"] == 2
    assert doc["arms"]["candidate"]["pass"] == 3
    assert doc["difference"]["estimate"] == 0.25
    assert len(doc["difference"]["ci95"]) == 2
    assert doc["difference"]["method"] == "newcombe-1998-method-10"
    assert doc["mcnemar_p"] == 1.0
    assert doc["decision_rule_digest"] == "sha256:" + "1" * 64
    assert msgspec.json.decode(msgspec.json.encode(report), type=ABReport) == report


def test_the_difference_is_newcombe_over_the_pairs() -> None:
    """The pooled table is counted pair by pair and handed to the interval and the test."""
    report = ab_report([runs("a", "ppffpf", "pfpppf"), runs("b", "fff", "ppf")])
    difference = report.difference
    # a: pairs pp pf fp fp pp ff -> both 2, candidate_only 2, base_only 1, neither 1
    # b: fp fp ff                -> candidate_only 2, neither 1
    assert (
        difference.both,
        difference.candidate_only,
        difference.base_only,
        difference.neither,
    ) == (
        2,
        4,
        1,
        2,
    )
    estimate, lower, upper = newcombe_paired_interval(2, 4, 1, 2)
    assert difference.estimate == estimate
    assert difference.ci95 == (lower, upper)
    assert report.mcnemar_p == mcnemar_exact_p(4, 1)
    assert [item.fixture for item in report.fixtures] == ["a", "b"]
    assert report.fixtures[1].comparison.difference.estimate == pytest.approx(2 / 3)


def test_invalid_and_infra_runs_are_counted_never_dropped() -> None:
    """Every run is in the denominators; invalid and infra ones are attrition and not passes."""
    report = ab_report([runs("f", "pppppppppi", "ppppppppxx")])
    base, candidate = report.arms.base, report.arms.candidate
    assert (base.runs, base.passed, base.invalid, base.infra_error) == (10, 9, 1, 0)
    assert (candidate.runs, candidate.passed, candidate.infra_error) == (10, 8, 2)
    assert base.attrition == 0.1
    assert candidate.attrition == 0.2
    assert report.difference.pairs == 10
    assert report.difference.estimate == pytest.approx(-0.1)


def test_arm_biased_failures_raise_the_attrition_warning() -> None:
    """Synthetic runs where only the candidate breaks its evidence are flagged (> 5 points)."""
    rng = random.Random(4)
    base = "".join(rng.choice("pf") for _ in range(100))
    candidate = "".join("i" if i % 10 == 0 else rng.choice("pf") for i in range(100))
    report = ab_report([runs("f", base, candidate)])
    assert report.attrition_difference == pytest.approx(0.10)
    assert report.attrition_warning
    assert report.fixtures[0].comparison.attrition_warning


def test_five_points_exactly_is_not_a_warning() -> None:
    """The warning is for a difference above five points; 1 in 20 is on the line."""
    report = ab_report([runs("f", "p" * 20, "p" * 19 + "x")])
    assert report.attrition_difference == pytest.approx(0.05)
    assert not report.attrition_warning
    assert ab_report([runs("f", "p" * 19, "p" * 18 + "x")]).attrition_warning


def test_pass_hat_k_per_arm_is_the_mean_over_fixtures() -> None:
    """pass^k overall averages fixtures (tau-bench), up to the fewest runs of a fixture."""
    report = ab_report([runs("a", "pppp", "pppf"), runs("b", "pf", "pp")])
    assert report.arms.base.pass_hat_k == pytest.approx(((1 + 0.5) / 2, (1 + 0) / 2))
    assert report.fixtures[0].comparison.arms.candidate.pass_hat_k == pytest.approx(
        (0.75, 0.5, 0.25, 0.0)
    )


def test_the_bootstrap_is_reproducible_and_only_with_two_fixtures() -> None:
    """The clustered interval depends on the seed only; one fixture has none."""
    items = [runs("a", "ppffpf", "pfpppf"), runs("b", "fff", "ppf"), runs("c", "pp", "pf")]
    one = ab_report(items, seed=7)
    assert one.bootstrap is not None
    assert one.bootstrap == ab_report(items, seed=7).bootstrap
    lower, upper = one.bootstrap.ci95
    assert lower <= one.difference.estimate <= upper
    assert ab_report(items[:1]).bootstrap is None


#: Twelve fixtures' tables (both, candidate_only, base_only, neither).
TABLES = [
    (1, 4, 0, 2),
    (0, 3, 3, 3),
    (5, 3, 1, 0),
    (3, 0, 3, 3),
    (4, 0, 5, 3),
    (2, 5, 1, 4),
    (0, 2, 0, 0),
    (0, 5, 4, 0),
    (3, 5, 1, 3),
    (5, 0, 4, 1),
    (3, 3, 4, 1),
    (2, 1, 5, 1),
]


def test_the_bootstrap_is_pinned_to_cpython_random_for_a_seed() -> None:
    """Golden values: the documented resampling over random.Random(seed).random()."""
    assert cluster_bootstrap_interval(TABLES, seed=7) == (-0.2, 0.20388349514563106)
    assert cluster_bootstrap_interval(TABLES, seed=7, resamples=200) == (
        -0.16666666666666666,
        0.1958762886597938,
    )
    assert cluster_bootstrap_interval(TABLES, seed=8, resamples=200) == (
        -0.20833333333333334,
        0.1717171717171717,
    )


def test_the_bootstrap_of_identical_fixtures_is_a_point() -> None:
    """Resampling fixtures that are all alike always gives their difference."""
    assert cluster_bootstrap_interval([(1, 2, 1, 0)] * 5, seed=0) == (0.25, 0.25)


@pytest.mark.parametrize(
    "items",
    [
        [],
        [runs("a", "pp", "p")],
        [runs("a", "", "")],
        [runs("a", "p", "p"), runs("a", "p", "p")],
        [FixtureRuns(fixture="a", base=("passed",), candidate=("pass",))],  # type: ignore[arg-type]
    ],
)
def test_unanalysable_inputs_are_refused(items: list[FixtureRuns]) -> None:
    """No fixtures, unpaired arms, no runs, a repeated fixture or an unknown verdict raise."""
    with pytest.raises(StatsError):
        ab_report(items)


def test_a_seed_out_of_range_is_refused() -> None:
    """The bootstrap seed is a 64-bit unsigned integer."""
    with pytest.raises(StatsError):
        ab_report([runs("a", "p", "p")], seed=-1)
