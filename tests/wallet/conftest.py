"""Shared fixtures of the wallet tests: an offline world on a fake clock and its processor."""

from __future__ import annotations

import os

import pytest

from glove.testing.wallet import FakeClock, OfflineWorld
from glove.wallet import StatusProcessor, contracted

DEADLINE_S = 2.0


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock that moves only when a test moves it."""
    return FakeClock()


@pytest.fixture
def world(clock: FakeClock) -> OfflineWorld:
    """One consistent offline host view for the current uid."""
    return OfflineWorld(clock, owner_uid=os.getuid())


@pytest.fixture
def processor(world: OfflineWorld) -> StatusProcessor:
    """A processor over the world's honest authorities, each under its contract."""
    return StatusProcessor(world.binding(), contracted(world.authorities()), clock=world.clock)
