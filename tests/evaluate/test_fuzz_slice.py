"""A bounded slice of fuzz/evaluate_fixture.py and fuzz/evaluate_stream.py: the seeds and
deterministic mutations replay clean, and the harnesses can fail."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
FIXTURE_MUTATIONS_PER_SEED = 120
STREAM_MUTATIONS_PER_SEED = 8


def _load(name: str) -> ModuleType:
    """Import fuzz/<name>.py as a module (it imports policy_common from fuzz/)."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location(name, FUZZ_DIR / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FUZZ_DIR))


def _replay(module: ModuleType, per_seed: int, seed: int) -> None:
    mutate = sys.modules["policy_common"].mutate
    rng = random.Random(seed)
    for data in module.seeds():
        module.one_input(data)
        for _ in range(per_seed):
            mutated = data
            for _ in range(rng.randrange(1, 4)):
                mutated = mutate(mutated, rng)
            module.one_input(mutated)


def test_the_fixture_corpus_covers_valid_fixtures_and_every_refusal() -> None:
    """The seeds hold valid fixtures at the bounds and one seed per kind of refusal."""
    module = _load("evaluate_fixture")
    names = {path.stem for path in module.CORPUS.glob("*.json")}
    for needle in (
        "valid-example",
        "valid-256-literals",
        "valid-4k-literal",
        "duplicate-escaped",
        "duplicate-nested",
        "unknown-members",
        "257-literals",
        "4k-plus-literal",
        "required-control",
        "lone-surrogate",
        "over-cap",
        "truncated",
    ):
        assert any(needle in name for name in names), needle


def test_fixture_seeds_and_mutations_satisfy_the_harness() -> None:
    """Every fixture seed, and a few thousand mutations of them, meet the decoder's contract."""
    module = _load("evaluate_fixture")
    _replay(module, FIXTURE_MUTATIONS_PER_SEED, 9)
    decoded = sum(1 for data in module.seeds() if _decodes(module, data))
    assert decoded >= 7


def _decodes(module: ModuleType, data: bytes) -> bool:
    try:
        module.decode_fixture(data)
    except module.FixtureError:
        return False
    return True


def test_stream_seeds_and_mutations_satisfy_the_harness() -> None:
    """Every stream seed and mutations of it give chunking-independent, reference-equal evidence."""
    module = _load("evaluate_stream")
    assert len(module.seeds()) >= 15
    _replay(module, STREAM_MUTATIONS_PER_SEED, 10)


def test_the_harnesses_catch_a_broken_contract() -> None:
    """The harnesses are not vacuous: a wrong decoder or a wrong evaluator is caught."""
    fixture_module = _load("evaluate_fixture")
    original = fixture_module.encode_fixture

    def broken(fixture: object) -> bytes:
        return b'{"version": 1}'

    fixture_module.encode_fixture = broken
    try:
        with pytest.raises(fixture_module.FixtureError):
            fixture_module.one_input((fixture_module.CORPUS / "00-valid-example.json").read_bytes())
    finally:
        fixture_module.encode_fixture = original

    stream_module = _load("evaluate_stream")
    real = stream_module.reference_normalize
    stream_module.reference_normalize = lambda data: real(data).replace(b"FOR", b"")
    try:
        with pytest.raises(AssertionError):
            stream_module.one_input(b"FOR\x1b[0mBIDDEN")
    finally:
        stream_module.reference_normalize = real


def test_the_stream_harness_holds_the_pure_scanner_to_the_c_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the C scanner built, a pure-Python scanner that loses a text match is caught."""
    from glove.evaluate import NATIVE_SCANNER, _scan

    assert NATIVE_SCANNER
    stream_module = _load("evaluate_stream")
    stream_module.one_input(b"FOR\x1b[0mBIDDEN")
    finish = _scan.PythonScan.finish

    def blind(self: _scan.PythonScan) -> _scan.Scanned:
        found = finish(self)
        return found._replace(forbidden_text=(None,) * len(found.forbidden_text))

    monkeypatch.setattr(_scan.PythonScan, "finish", blind)
    with pytest.raises(AssertionError):
        stream_module.one_input(b"FOR\x1b[0mBIDDEN")
