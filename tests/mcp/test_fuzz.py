"""The MCP fuzz harnesses replay their seeds and a bounded slice of mutations cleanly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
#: Seconds of mutations per target in the suite (the 1,000,000-input runs are manual).
SLICE_S = 2.0


def _load(target: str) -> ModuleType:
    """Import ``fuzz/mcp_<target>.py`` as a module."""
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        spec = importlib.util.spec_from_file_location(
            f"mcp_{target}", FUZZ_DIR / f"mcp_{target}.py"
        )
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(FUZZ_DIR))


@pytest.mark.parametrize(("target", "corpus"), [("request", "request"), ("http_head", "http_head")])
def test_seed_corpus_and_a_slice_of_mutations(target: str, corpus: str) -> None:
    """Every seed and a couple of seconds of mutations satisfy the harness contract."""
    module = _load(target)
    common = sys.modules["mcp_common"]
    assert len(common.seeds(corpus)) >= 6
    runs = common.replay(corpus, module.one_input, SLICE_S, seed=1)
    assert runs > 100


def test_the_harness_catches_a_parser_that_raises_the_wrong_error() -> None:
    """A head parser that leaks a ValueError fails the harness (the harness can fail)."""
    module = _load("http_head")
    original = module.parse_request_head

    def broken(head: bytes) -> object:
        raise ValueError("not an HttpError")

    module.parse_request_head = broken
    try:
        with pytest.raises(ValueError, match="not an HttpError"):
            module.one_input(b"\x05POST /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
    finally:
        module.parse_request_head = original
