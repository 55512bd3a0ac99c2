"""Paired statistics: Newcombe's method 10 against a published example and exact coverage,
McNemar exact, pass^k, the minimum detectable effect."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from glove.evaluate import (
    Z_95,
    StatsError,
    mcnemar_exact_p,
    newcombe_paired_interval,
    paired_mde,
    pass_hat_k,
    required_pairs,
    wilson_interval,
)


def test_newcombe_matches_the_published_cavo_example() -> None:
    """Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables, ch. 8:
    Cavo et al. (2012) [[59, 6], [16, 80]] gives -0.0621 (95% CI -0.1186 to -0.0046) by
    the Newcombe square-and-add interval (also the contingencytables R package's test)."""
    estimate, lower, upper = newcombe_paired_interval(59, 6, 16, 80)
    assert round(estimate, 4) == -0.0621
    assert round(lower, 4) == -0.1186
    assert round(upper, 4) == -0.0046


def test_newcombe_regression_vectors() -> None:
    """Two more tables, to 1e-12, as this implementation computes them (pins the formula)."""
    assert newcombe_paired_interval(14, 5, 0, 22) == pytest.approx(
        (0.12195121951219512, 0.011483241383033263, 0.22649268435121117), abs=1e-12
    )
    assert newcombe_paired_interval(1, 1, 7, 12) == pytest.approx(
        (-0.2857142857142857, -0.5069202266861409, -0.025559124164859837), abs=1e-12
    )


def _coverage(n: int, p11: float, p10: float, p01: float) -> float:
    """The exact coverage of the interval: the sum over every table of n pairs."""
    p00 = 1 - p11 - p10 - p01
    theta = p10 - p01
    total = 0.0
    for a in range(n + 1):
        for b in range(n + 1 - a):
            for c in range(n + 1 - a - b):
                d = n - a - b - c
                ways = math.factorial(n) // (
                    math.factorial(a) * math.factorial(b) * math.factorial(c) * math.factorial(d)
                )
                _, lower, upper = newcombe_paired_interval(a, b, c, d)
                if lower <= theta <= upper:
                    total += ways * p11**a * p10**b * p01**c * p00**d
    return total


@pytest.mark.parametrize(
    "point", [(30, 0.4, 0.1, 0.1), (30, 0.3, 0.2, 0.05), (20, 0.25, 0.25, 0.25)]
)
def test_newcombe_coverage_is_near_95_percent(point: tuple[int, float, float, float]) -> None:
    """Enumerating every table, the interval covers the true difference 95-97% of the time."""
    assert 0.945 <= _coverage(*point) <= 0.975


@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_newcombe_is_within_bounds_and_holds_its_estimate(a: int, b: int, c: int, d: int) -> None:
    """Any table gives -1 <= lower <= estimate <= upper <= 1."""
    if a + b + c + d == 0:
        with pytest.raises(StatsError):
            newcombe_paired_interval(a, b, c, d)
        return
    estimate, lower, upper = newcombe_paired_interval(a, b, c, d)
    assert -1 <= lower <= estimate <= upper <= 1
    assert estimate == (b - c) / (a + b + c + d)


def test_newcombe_is_antisymmetric_in_the_arms() -> None:
    """Swapping the two members of every pair mirrors the interval."""
    estimate, lower, upper = newcombe_paired_interval(10, 7, 2, 5)
    mirrored = newcombe_paired_interval(10, 2, 7, 5)
    assert mirrored == pytest.approx((-estimate, -upper, -lower))


def test_wilson_has_its_closed_form_at_the_edges() -> None:
    """0 of n has upper z^2/(n+z^2); n of n has lower n/(n+z^2); p = 1/2 is symmetric."""
    z2 = Z_95 * Z_95
    assert wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)))
    assert wilson_interval(10, 10) == pytest.approx((10 / (10 + z2), 1.0))
    lower, upper = wilson_interval(50, 100)
    assert lower + upper == pytest.approx(1.0)
    assert pytest.approx(1.959963984540054) == Z_95


def test_mcnemar_exact_values() -> None:
    """b = 10, c = 2 is 2 * 79/4096; no discordant pairs or a tie is 1; it is symmetric."""
    assert mcnemar_exact_p(10, 2) == float(Fraction(2 * 79, 4096))
    assert mcnemar_exact_p(2, 10) == mcnemar_exact_p(10, 2)
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(5, 5) == 1.0
    assert mcnemar_exact_p(0, 20) == float(Fraction(2, 2**20))


def test_pass_hat_k_is_taus_estimator() -> None:
    """pass^1 is the pass rate, pass^n is 1 only if all passed, and C(c,k)/C(n,k) between."""
    assert pass_hat_k(3, 4, 1) == 0.75
    assert pass_hat_k(3, 4, 4) == 0.0
    assert pass_hat_k(4, 4, 4) == 1.0
    assert pass_hat_k(5, 8, 3) == math.comb(5, 3) / math.comb(8, 3)
    with pytest.raises(StatsError):
        pass_hat_k(3, 4, 5)


def test_the_anchor_sample_size_and_its_inverse() -> None:
    """10 points at 20% discordance needs about 154.6 pairs; 155 pairs detect 10 points."""
    assert required_pairs(0.10, 0.20) == pytest.approx(154.6, abs=0.05)
    mde = paired_mde(155, 31)
    assert mde is not None
    assert 0.099 < mde <= 0.1
    smaller = paired_mde(1550, 310)
    assert smaller is not None
    assert smaller < mde


def test_the_mde_with_few_or_no_discordant_pairs() -> None:
    """No discordance still has a defined MDE; three pairs detect nothing."""
    assert paired_mde(3, 0) is None
    assert paired_mde(0, 0) is None
    none_discordant = paired_mde(100, 0)
    some = paired_mde(100, 40)
    assert none_discordant is not None
    assert some is not None
    assert none_discordant < some


@pytest.mark.parametrize(
    "call",
    [
        lambda: wilson_interval(3, 2),
        lambda: wilson_interval(0, 0),
        lambda: newcombe_paired_interval(-1, 0, 0, 1),
        lambda: mcnemar_exact_p(True, 0),
        lambda: paired_mde(3, 4),
        lambda: required_pairs(0.5, 0.2),
    ],
)
def test_impossible_counts_are_refused(call: object) -> None:
    """Negative, boolean or inconsistent counts raise StatsError."""
    with pytest.raises(StatsError):
        call()  # type: ignore[operator]
