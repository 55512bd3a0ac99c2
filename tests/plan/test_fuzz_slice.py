"""A bounded slice of fuzz/plan_decode.py: the seeds and deterministic mutations replay clean."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from glove.plan import PlanError

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
MUTATIONS_PER_SEED = 150


def _load() -> ModuleType:
    """Import fuzz/plan_decode.py as a module (it imports policy_common from fuzz/)."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location("plan_decode", FUZZ_DIR / "plan_decode.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FUZZ_DIR))


def test_the_corpus_covers_valid_plans_and_every_kind_of_refusal() -> None:
    """The seeds hold valid plans, named refusals, strict-JSON faults and the size cap."""
    module = _load()
    names = {path.stem for path in module.CORPUS.glob("*.json")}
    assert len(names) >= 80
    for needle in (
        "valid",
        "rejected-prompt_ref",
        "deep-65",
        "duplicate-escaped",
        "huge-float",
        "invalid-utf8",
        "truncated",
        "over-cap",
        "lone-surrogate",
        "network-proxy",
    ):
        assert any(needle in name for name in names), needle


def test_seed_corpus_and_mutations_satisfy_the_harness() -> None:
    """Every seed, and a few thousand byte mutations of them, meets the plan contract."""
    module = _load()
    mutate = sys.modules["policy_common"].mutate
    rng = random.Random(9)
    decoded = validated = 0
    for seed in module.seeds():
        module.one_input(seed)
        for _ in range(MUTATIONS_PER_SEED):
            data = seed
            for _ in range(rng.randrange(1, 4)):
                data = mutate(data, rng)
            module.one_input(data)
    for seed in module.seeds():
        try:
            plan = module.decode_plan(seed)
        except PlanError:
            continue
        decoded += 1
        for local in module.LOCALS:
            try:
                module.validate_plan(plan, local)
                validated += 1
            except PlanError:
                pass
    assert decoded >= 8
    assert validated >= 5


def test_the_harness_catches_a_broken_contract() -> None:
    """The harness is not vacuous: an error that is not a PlanError escapes it."""
    module = _load()
    original = getattr(module, "canonical_bytes")  # noqa: B009 - a module loaded by path

    def broken(plan: object) -> bytes:
        raise RuntimeError("canonical_bytes broke")

    setattr(module, "canonical_bytes", broken)  # noqa: B010 - a module loaded by path
    try:
        with pytest.raises(RuntimeError):
            module.one_input((module.CORPUS / "00-valid.json").read_bytes())
    finally:
        setattr(module, "canonical_bytes", original)  # noqa: B010
