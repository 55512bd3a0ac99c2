"""A bounded slice of fuzz/terminal_filter.py: the seeds and some mutations replay clean."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
REPLAY_SECONDS = 2.0


def _load() -> ModuleType:
    """Import fuzz/terminal_filter.py as a module (it imports policy_common from fuzz/)."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location(
            "terminal_filter", FUZZ_DIR / "terminal_filter.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FUZZ_DIR))


def test_the_corpus_covers_every_kind_of_hostile_sequence() -> None:
    """The seeds hold OSC 52, titles, DCS, queries, C1, invalid UTF-8 and floods."""
    module = _load()
    names = {path.stem for path in module.CORPUS.iterdir()}
    for needle in ("osc52", "title", "dcs", "queries", "c1", "invalid-utf8", "unterminated"):
        assert any(needle in name for name in names), needle


def test_seed_corpus_and_mutations_satisfy_the_contract() -> None:
    """Every seed at three chunkings, then two seconds of mutations, meet the contract."""
    module = _load()
    assert module._replay(REPLAY_SECONDS) > 0


def test_the_harness_catches_a_filter_that_lets_a_query_through() -> None:
    """The harness is not vacuous: a filter that passes CSI 6 n through fails it."""
    module = _load()
    from glove.session import _escape

    original = _escape.ALLOWED_CSI_FINALS
    _escape.ALLOWED_CSI_FINALS = original | {"n"}  # type: ignore[misc]
    try:
        with pytest.raises(AssertionError):
            module.one_input(b"\x00" + b"\x1b[6n")
    finally:
        _escape.ALLOWED_CSI_FINALS = original  # type: ignore[misc]


@pytest.mark.parametrize(
    ("rule", "hostile"),
    [("pty_csi_allowed", b"\x1b[6n"), ("pty_osc_allowed", b"\x1b]52;c;eA==\x07")],
)
def test_the_harness_catches_a_pty_filter_that_lets_a_query_through(
    rule: str, hostile: bytes
) -> None:
    """The pty-mode checks are not vacuous either: a filter whose CSI or OSC rule lets
    everything through fails them on a cursor position query or a clipboard write."""
    module = _load()
    from glove.session import _escape

    original = getattr(_escape, rule)
    setattr(_escape, rule, lambda *_args: True)
    try:
        with pytest.raises(AssertionError):
            module.one_input(b"\x00" + hostile)
    finally:
        setattr(_escape, rule, original)
