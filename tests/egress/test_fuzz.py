"""The egress fuzz harnesses: seeds and a bounded slice of mutations satisfy their contracts."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
TARGETS = ("http_head", "socks5", "tls_hello", "dns")
#: Mutations per seed in the test suite (the 1,000,000-input runs are in docs/egress.md).
MUTATIONS_PER_SEED = 300


def _load(target: str) -> ModuleType:
    """Import ``fuzz/egress_<target>.py`` as a module."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location(
            f"egress_{target}", FUZZ_DIR / f"egress_{target}.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FUZZ_DIR))


@pytest.mark.parametrize("target", TARGETS)
def test_seed_corpus_and_mutations_replay(target: str) -> None:
    """Every seed, and a few hundred deterministic mutations of each, satisfies the harness."""
    module = _load(target)
    common = sys.modules["egress_common"]
    corpus = common.seeds(target)
    assert len(corpus) >= 3
    rng = random.Random(12)
    for data in corpus:
        module.one_input(data)
        mutated = data
        for _ in range(MUTATIONS_PER_SEED):
            mutated = common.mutate(mutated if rng.random() < 0.7 else data, rng)
            module.one_input(mutated)
