"""The seeded interleaving order: reproducible, complete, pairs adjacent, pinned to MT19937."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from glove.evaluate import (
    ORDER_ALGORITHM,
    StatsError,
    interleaved_order,
    order_digest,
)


def test_the_order_for_seed_0_is_pinned() -> None:
    """Golden schedule: the documented Fisher-Yates and coin over random.Random(0).random()."""
    order = interleaved_order(2, 3, 0)
    assert [(item.fixture, item.run, item.arm) for item in order] == [
        (0, 2, "base"),
        (0, 2, "candidate"),
        (1, 1, "candidate"),
        (1, 1, "base"),
        (0, 0, "base"),
        (0, 0, "candidate"),
        (0, 1, "base"),
        (0, 1, "candidate"),
        (1, 0, "candidate"),
        (1, 0, "base"),
        (1, 2, "candidate"),
        (1, 2, "base"),
    ]
    assert order_digest(order) == (
        "sha256:a76cd567ffb5ab3eb923d4313d8847c3e2ad56fa57b4291fc71544a79df27098"
    )
    assert ORDER_ALGORITHM == "glove-ab-order-v1"


def test_the_algorithm_is_the_documented_one() -> None:
    """An independent re-implementation of the docstring's steps gives the same schedule."""
    seed, fixtures, runs = 12345, 5, 7
    rng = random.Random(seed)
    pairs = [(f, r) for f in range(fixtures) for r in range(runs)]
    for i in range(len(pairs) - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        pairs[i], pairs[j] = pairs[j], pairs[i]
    expected = []
    for f, r in pairs:
        arms = ["base", "candidate"] if rng.random() < 0.5 else ["candidate", "base"]
        expected += [(f, r, arms[0]), (f, r, arms[1])]
    got = [(item.fixture, item.run, item.arm) for item in interleaved_order(fixtures, runs, seed)]
    assert got == expected


def test_every_session_appears_once_and_pairs_are_adjacent() -> None:
    """Each (fixture, run, arm) is scheduled exactly once, a pair's two arms back to back."""
    order = interleaved_order(6, 9, 99)
    assert Counter((item.fixture, item.run, item.arm) for item in order) == Counter(
        (f, r, arm) for f in range(6) for r in range(9) for arm in ("base", "candidate")
    )
    for first, second in zip(order[::2], order[1::2], strict=True):
        assert (first.fixture, first.run) == (second.fixture, second.run)
        assert {first.arm, second.arm} == {"base", "candidate"}


def test_both_arms_go_first_about_equally_often() -> None:
    """Over 2,000 pairs neither arm is first much more than half the time."""
    order = interleaved_order(20, 100, 5)
    firsts = Counter(item.arm for item in order[::2])
    assert 900 < firsts["base"] < 1100


def test_the_same_seed_gives_the_same_order_and_another_seed_another() -> None:
    """The schedule is a function of (fixtures, runs, seed)."""
    assert interleaved_order(4, 4, 1) == interleaved_order(4, 4, 1)
    assert interleaved_order(4, 4, 1) != interleaved_order(4, 4, 2)
    assert interleaved_order(1, 1, 2**53 - 1)


@pytest.mark.parametrize(
    ("fixtures", "runs", "seed"),
    [(0, 1, 0), (1, 0, 0), (1, 1, -1), (1, 1, 2**53), (1000, 1001, 0), (True, 1, 0)],
)
def test_out_of_range_arguments_are_refused(fixtures: int, runs: int, seed: int) -> None:
    """Empty schedules, huge ones and seeds past 2**53 - 1 raise StatsError."""
    with pytest.raises(StatsError):
        interleaved_order(fixtures, runs, seed)
