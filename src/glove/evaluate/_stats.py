"""Statistics of paired binary outcomes: intervals, tests, pass^k, detectable effects
(pure; the standard library only).

A paired table counts pairs by the outcome of each member; here the first member is the
candidate and the second the base::

                     base passes   base does not
    candidate passes      a              b
    candidate does not    c              d             n = a + b + c + d

* :func:`wilson_interval`: the score interval of one proportion (Wilson 1927), in
  Newcombe's closed form ``(2np + z^2 +- z sqrt(z^2 + 4np(1-p))) / (2(n + z^2))``.
* :func:`newcombe_paired_interval`: the interval for ``p1 - p2 = (b - c) / n`` of
  Newcombe (1998), *Statistics in Medicine* 17:2635-2650, method 10: the Wilson limits
  ``l1, u1`` of ``p1 = (a + b)/n`` and ``l2, u2`` of ``p2 = (a + c)/n`` combined as
  ``L = D - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)`` and
  ``U = D + sqrt((p2 - l2)^2 - 2 phi (p2 - l2)(u1 - p1) + (u1 - p1)^2)``, with the
  correlation ``phi = C / sqrt((a+b)(c+d)(a+c)(b+d))`` (0 when a margin is 0) and
  ``C = ad - bc - n/2`` when ``ad - bc > n/2``, ``0`` when ``0 <= ad - bc <= n/2``,
  ``ad - bc`` when negative.
* :func:`mcnemar_exact_p`: the exact McNemar test, two-sided: ``min(1, 2 P(X <= min(b,
  c)))`` for ``X ~ Binomial(b + c, 1/2)``, 1 when there are no discordant pairs.
* :func:`pass_hat_k`: the chance that k runs drawn without replacement from n runs with
  c passes all pass, ``C(c, k) / C(n, k)`` (tau-bench's unbiased pass^k estimator).
* :func:`paired_mde`: the smallest difference a run of n pairs detects with the given
  power at two-sided level alpha, from the paired sample-size formula of Connor (1987),
  *Biometrics* 43:207-211: ``n = (z_{1-a/2} sqrt(psi) + z_{1-b} sqrt(psi - D^2))^2 / D^2``
  with ``psi`` the discordant fraction, taken as ``max(observed, D)`` (a difference of
  D needs at least that many discordant pairs).
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist
from typing import Final

from glove.evaluate.errors import StatsError

CONFIDENCE: Final = 0.95
"""The confidence level of every interval reported."""

Z_95: Final = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2)
"""The two-sided 95% normal quantile, 1.959963984540054."""

MDE_ALPHA: Final = 0.05
"""Two-sided significance level the minimum detectable effect assumes."""

MDE_POWER: Final = 0.80
"""Power the minimum detectable effect assumes."""

#: Bisection steps for the minimum detectable effect (resolution 2^-60).
_MDE_STEPS: Final = 60


def _counts(*values: int) -> None:
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise StatsError(f"a count is a non-negative integer, got {value!r}")


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of ``successes / trials``.

    Raises:
        StatsError: a count is negative, or ``successes`` exceeds ``trials``, or there
            are no trials.
    """
    _counts(successes, trials)
    if trials == 0 or successes > trials:
        raise StatsError(f"{successes} successes of {trials} trials")
    p = successes / trials
    centre = 2 * trials * p + z * z
    spread = z * math.sqrt(z * z + 4 * trials * p * (1 - p))
    denominator = 2 * (trials + z * z)
    lower = 0.0 if successes == 0 else (centre - spread) / denominator
    upper = 1.0 if successes == trials else (centre + spread) / denominator
    return max(0.0, lower), min(1.0, upper)


def newcombe_paired_interval(
    a: int, b: int, c: int, d: int, z: float = Z_95
) -> tuple[float, float, float]:
    """``(estimate, lower, upper)`` of ``p1 - p2 = (b - c) / n`` for the paired table
    ``a b / c d`` (module docstring): Newcombe's method 10.

    Raises:
        StatsError: a count is negative, or the table is empty.
    """
    _counts(a, b, c, d)
    n = a + b + c + d
    if n == 0:
        raise StatsError("an empty paired table has no difference")
    p1 = (a + b) / n
    p2 = (a + c) / n
    estimate = (b - c) / n
    l1, u1 = wilson_interval(a + b, n, z)
    l2, u2 = wilson_interval(a + c, n, z)
    phi = 0.0
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins:
        cross = Fraction(a * d - b * c)
        half = Fraction(n, 2)
        if cross > half:
            corrected = cross - half
        elif cross >= 0:
            corrected = Fraction(0)
        else:
            corrected = cross
        phi = float(corrected) / math.sqrt(margins)
    low_sq = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    high_sq = (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2
    lower = estimate - math.sqrt(max(0.0, low_sq))
    upper = estimate + math.sqrt(max(0.0, high_sq))
    return estimate, max(-1.0, lower), min(1.0, upper)


def mcnemar_exact_p(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs.

    Raises:
        StatsError: a count is negative.
    """
    _counts(b, c)
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def pass_hat_k(passes: int, runs: int, k: int) -> float:
    """The chance that ``k`` of ``runs`` runs, ``passes`` of which passed, all pass.

    Raises:
        StatsError: a count is negative, ``passes > runs``, or ``k`` is not in 1..runs.
    """
    _counts(passes, runs, k)
    if passes > runs or not 1 <= k <= runs:
        raise StatsError(f"pass^{k} of {passes} passes in {runs} runs")
    return math.comb(passes, k) / math.comb(runs, k)


def required_pairs(difference: float, discordant: float) -> float:
    """Pairs needed to detect ``difference`` with discordant fraction ``discordant`` at
    :data:`MDE_ALPHA` (two-sided) and :data:`MDE_POWER` (module docstring; not rounded).

    Raises:
        StatsError: ``difference`` is not in (0, 1] or ``discordant`` is below
            ``difference`` or above 1.
    """
    if not 0 < difference <= 1 or not difference <= discordant <= 1:
        raise StatsError(f"difference {difference} with discordant fraction {discordant}")
    z_alpha = NormalDist().inv_cdf(1 - MDE_ALPHA / 2)
    z_beta = NormalDist().inv_cdf(MDE_POWER)
    root = z_alpha * math.sqrt(discordant) + z_beta * math.sqrt(
        max(0.0, discordant - difference**2)
    )
    return root * root / difference**2


def paired_mde(pairs: int, discordant_pairs: int) -> float | None:
    """The minimum detectable effect of ``pairs`` pairs, ``discordant_pairs`` of them
    discordant: the smallest difference ``D`` with ``required_pairs(D, max(psi, D)) <=
    pairs`` (``psi`` the observed discordant fraction), or None when even ``D = 1``
    would need more pairs than the run has.

    Raises:
        StatsError: a count is negative or ``discordant_pairs > pairs``.
    """
    _counts(pairs, discordant_pairs)
    if discordant_pairs > pairs:
        raise StatsError(f"{discordant_pairs} discordant pairs of {pairs}")
    if pairs == 0:
        return None
    observed = discordant_pairs / pairs

    def needed(difference: float) -> float:
        return required_pairs(difference, max(observed, difference))

    if needed(1.0) > pairs:
        return None
    low, high = 0.0, 1.0  # needed(low) > pairs >= needed(high); needed falls as D grows
    for _ in range(_MDE_STEPS):
        middle = (low + high) / 2
        if middle <= 0:
            break
        if needed(middle) <= pairs:
            high = middle
        else:
            low = middle
    return high
