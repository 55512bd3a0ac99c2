"""A bounded slice of fuzz/control_frame.py: its seeds and a few thousand mutations replay
clean, and the harness would notice a broken contract."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
MUTATIONS_PER_SEED = 150


def _load() -> ModuleType:
    """Import fuzz/control_frame.py as a module (it imports policy_common from fuzz/)."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location(
            "control_frame", FUZZ_DIR / "control_frame.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FUZZ_DIR))


def test_seed_corpus_and_mutations_meet_the_decoding_contract() -> None:
    """Every seed, and deterministic byte mutations of it, decodes to typed values or one of
    the typed protocol errors."""
    module = _load()
    seeds = [path.read_bytes() for path in sorted(module.CORPUS.iterdir())]
    assert len(seeds) >= 20
    rng = random.Random(9)
    for seed in seeds:
        module.one_input(seed)
        for _ in range(MUTATIONS_PER_SEED):
            data = seed
            for _ in range(rng.randrange(1, 4)):
                data = sys.modules["policy_common"].mutate(data, rng)
            module.one_input(data)


def test_the_harness_reaches_typed_params_and_catches_a_broken_contract(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pipelined seed reaches typed params decoding; a decoder that raised anything but
    the typed errors would fail the harness."""
    module = _load()
    seen: list[str] = []
    original = module._request
    monkeypatch.setattr(module, "_request", lambda r: (seen.append(r.method), original(r)))
    module.one_input((module.CORPUS / "pipelined").read_bytes())
    assert seen == ["hello", "health", "session.list"]

    def broken(_raw: object, _kind: object) -> object:
        raise KeyError("a decoder bug")

    monkeypatch.setattr(module, "decode_params", broken)
    with pytest.raises(KeyError):
        module.one_input((module.CORPUS / "health").read_bytes())
