"""The seeded interleaving order of an A/B run (pure).

An A/B run of F fixtures, K paired runs each, runs ``2 F K`` sessions. Their order is
fixed from a seed before the first one starts, and recorded, so drift (a warming cache,
a busier machine, an upstream model changing) falls on both arms alike:

1. the pairs ``(fixture, run)`` for ``fixture`` in ``0..F-1`` and ``run`` in
   ``0..K-1``, in that order, are shuffled by Fisher-Yates from the last down: for ``i``
   from ``F K - 1`` down to 1, swap item ``i`` with item ``int(random() * (i + 1))``;
2. then, pair by pair in the shuffled order, one more ``random() < 0.5`` says whether
   the base (true) or the candidate runs first, and the other arm runs right after it.

``random`` is CPython's ``random.Random(seed).random`` (MT19937, seeded by
``init_by_array`` from the integer seed): the one method whose sequence for a given seed
the Python documentation promises not to change. The order (:data:`ORDER_ALGORITHM`)
is part of the decision rule, and the schedule itself has a digest.
"""

from __future__ import annotations

import hashlib
import random
from typing import Final, Literal

import msgspec

from glove.evaluate.errors import StatsError

ORDER_ALGORITHM: Final = "glove-ab-order-v1"
"""The name of the algorithm above."""

MAX_SCHEDULED_PAIRS: Final = 1_000_000
"""Most ``(fixture, run)`` pairs one schedule may hold."""

MAX_SEED: Final = 2**53 - 1
"""Largest seed: every JSON reader holds integers up to 2**53 - 1 exactly."""


Arm = Literal["base", "candidate"]


class ScheduledRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One session of the schedule: which fixture, which run number, which arm."""

    fixture: int
    run: int
    arm: Arm


def interleaved_order(fixtures: int, runs: int, seed: int) -> tuple[ScheduledRun, ...]:
    """The schedule of ``fixtures`` fixtures with ``runs`` paired runs each (module
    docstring). The two runs of a pair are adjacent.

    Raises:
        StatsError: a count below 1 or too large, or a seed out of 0..MAX_SEED.
    """
    for name, value in (("fixtures", fixtures), ("runs", runs), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise StatsError(f"{name} is an integer, got {value!r}")
    if fixtures < 1 or runs < 1 or fixtures * runs > MAX_SCHEDULED_PAIRS:
        raise StatsError(
            f"{fixtures} fixtures of {runs} runs: 1..{MAX_SCHEDULED_PAIRS} pairs allowed"
        )
    if not 0 <= seed <= MAX_SEED:
        raise StatsError(f"a seed is in 0..{MAX_SEED}, got {seed}")
    rng = random.Random(seed)  # noqa: S311 - a reproducible order, not a secret
    draw = rng.random
    pairs = [(fixture, run) for fixture in range(fixtures) for run in range(runs)]
    for i in range(len(pairs) - 1, 0, -1):
        j = int(draw() * (i + 1))
        pairs[i], pairs[j] = pairs[j], pairs[i]
    order: list[ScheduledRun] = []
    for fixture, run in pairs:
        first: Arm = "base"
        second: Arm = "candidate"
        if draw() >= 0.5:
            first, second = second, first
        order.append(ScheduledRun(fixture=fixture, run=run, arm=first))
        order.append(ScheduledRun(fixture=fixture, run=run, arm=second))
    return tuple(order)


def order_digest(order: tuple[ScheduledRun, ...]) -> str:
    """``"sha256:<hex>"`` of the schedule's compact JSON (a list of objects in order)."""
    return "sha256:" + hashlib.sha256(msgspec.json.encode(order)).hexdigest()
