"""The journal-record and receipt-bundle fuzz harnesses: their seeds and a bounded slice."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
TARGETS = {"record": "journal_record", "bundle": "receipt_bundle"}
MUTATIONS_PER_SEED = 150


def _load(module: str) -> ModuleType:
    """Import ``fuzz/<module>.py``."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location(module, FUZZ_DIR / f"{module}.py")
        assert spec is not None
        assert spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return loaded
    finally:
        sys.path.remove(str(FUZZ_DIR))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_committed_seeds_are_the_generated_ones(target: str) -> None:
    """The committed corpus holds every seed the harness builds from the codec."""
    module = _load(TARGETS[target])
    committed = {p.read_bytes() for p in (FUZZ_DIR / "journal_corpus" / target).iterdir()}
    assert set(module.seed_inputs()) <= committed


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_seed_corpus_and_mutations_replay(target: str) -> None:
    """Every seed, and a bounded slice of deterministic mutations, satisfies the contract."""
    module = _load(TARGETS[target])
    common = sys.modules["journal_common"]
    mutate = sys.modules["policy_common"].mutate
    seeds = common.corpus(target, module.seed_inputs)
    assert len(seeds) >= 7
    rng = random.Random(11)
    for data in seeds:
        module.one_input(data)
        for _ in range(MUTATIONS_PER_SEED):
            module.one_input(mutate(data, rng))


def test_valid_bundle_seeds_verify() -> None:
    """The bundle seeds are real bundles: the harness exercises the verifier's success path."""
    module = _load("receipt_bundle")
    verified = 0
    for data in module.seed_inputs():
        if data.startswith(b"{"):
            module.verify_bundle(data, module.VERIFIER)
            verified += 1
    assert verified == 6
