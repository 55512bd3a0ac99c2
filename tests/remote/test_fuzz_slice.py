"""A bounded slice of fuzz/remote_frame.py: the seeds and a few thousand mutations replay clean."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
MUTATIONS_PER_SEED = 300


def _load() -> ModuleType:
    """Import fuzz/remote_frame.py as a module (it imports policy_common from fuzz/)."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location("remote_frame", FUZZ_DIR / "remote_frame.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FUZZ_DIR))


def test_seed_corpus_and_mutations_satisfy_the_harness() -> None:
    """Every seed, and deterministic byte mutations of it, meets the frame decoder's contract."""
    module = _load()
    seeds = [path.read_bytes() for path in sorted(module.CORPUS.iterdir())]
    assert len(seeds) >= 10
    rng = random.Random(7)
    for seed in seeds:
        module.one_input(seed)
        for _ in range(MUTATIONS_PER_SEED):
            data = seed
            for _ in range(rng.randrange(1, 4)):
                data = sys.modules["policy_common"].mutate(data, rng)
            module.one_input(data)


def test_harness_catches_a_broken_contract() -> None:
    """The harness is not vacuous: a health seed reaches the response checks."""
    module = _load()
    calls: list[int] = []
    original = getattr(module, "_check_response")  # noqa: B009 - a module loaded by path
    setattr(module, "_check_response", lambda request_id, _m, _p: calls.append(request_id))  # noqa: B010
    try:
        module.one_input((module.CORPUS / "pipelined").read_bytes())
    finally:
        setattr(module, "_check_response", original)  # noqa: B010
    assert calls == [4, 5]  # the third request has a 1 ms TTL, consumed by the 1 ms receipt
