"""A bounded slice of the wallet fuzz target runs in CI, without atheris."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
SLICE_INPUTS = 10_000


def _target() -> ModuleType:
    """Import ``fuzz/wallet_status_json.py`` as a module (atheris not needed)."""
    spec = importlib.util.spec_from_file_location(
        "wallet_status_json", FUZZ_DIR / "wallet_status_json.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["wallet_status_json"] = module
    spec.loader.exec_module(module)
    return module


def test_seed_corpus_is_adversarial() -> None:
    """The corpus holds deep, duplicate-key, huge-number, invalid-UTF-8 and truncated seeds."""
    names = {path.stem for path in (FUZZ_DIR / "wallet_corpus").glob("*.bin")}
    for kind in ("deep-65", "dup-in-result", "huge-int-id", "invalid-utf8", "truncated"):
        assert any(kind in name for name in names), kind
    assert len(names) >= 100


def test_bounded_slice_raises_only_typed_errors() -> None:
    """Every seed and a few thousand seeded mutations satisfy the target's contract."""
    runs = _target().replay(inputs=SLICE_INPUTS, seed=1)
    assert runs >= SLICE_INPUTS


def test_fuzz_clock_reaches_the_ladder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzz input drives the clock: seeds reach the deadline and the revalidation rungs."""
    target = _target()
    from glove.wallet import StatusProcessor

    seen: set[str] = set()
    original = StatusProcessor.process

    def spy(self: StatusProcessor, frame: bytes, deadline: float) -> object:
        try:
            outcome = original(self, frame, deadline)
        except Exception as exc:
            seen.add(type(exc).__name__)
            raise
        seen.add(outcome.reason)
        return outcome

    monkeypatch.setattr(StatusProcessor, "process", spy)
    for data in target.seeds():
        target.one_input(data)
    expected = {
        "available",
        "stale",
        "clock_regressed",
        "revised",
        "cross_boundary",
        "missing",
        "RequestExpired",
        "AuthorityDeadline",
        "AuthorityFailed",
        "GenerationReuse",
        "GenerationRollback",
        "WalletFrameError",
    }
    assert expected <= seen, expected - seen
