"""The fuzz harnesses' seed corpora replay cleanly (the harness contracts hold on them)."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
TARGETS = ("parse", "regex", "call")


def _load(target: str) -> ModuleType:
    """Import ``fuzz/policy_<target>.py`` as a module."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location(
            f"policy_{target}", FUZZ_DIR / f"policy_{target}.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FUZZ_DIR))


@pytest.mark.parametrize("target", TARGETS)
def test_seed_corpus_replays(target: str) -> None:
    """Every seed, and a few hundred deterministic mutations of it, satisfies the harness."""
    module = _load(target)
    common = sys.modules["policy_common"]
    corpus = common.seeds(target)
    assert len(corpus) >= 4
    rng = common.random.Random(1)
    for data in corpus:
        module.one_input(data)
        for _ in range(100):
            module.one_input(common.mutate(data, rng))
