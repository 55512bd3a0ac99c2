"""Shared runner for the MCP fuzz targets: atheris when installed, else a replay fuzzer.

Each target defines ``one_input(data: bytes) -> None`` that raises only on a bug. Run::

    python fuzz/mcp_request.py -atheris_runs=1000000      # with atheris (libFuzzer flags)
    python fuzz/mcp_request.py --replay [--seconds S]     # without: corpus + mutations

Seeds live in ``fuzz/mcp_corpus/<target>/``; ``tests/mcp/test_fuzz.py`` replays them and a
bounded slice of mutations.
"""

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import mutate

CORPUS_ROOT = Path(__file__).resolve().parent / "mcp_corpus"
DEFAULT_REPLAY_SECONDS = 10.0


def seeds(target: str) -> list[bytes]:
    """The seed inputs of ``target``, sorted by file name."""
    return [path.read_bytes() for path in sorted((CORPUS_ROOT / target).iterdir())]


def replay(target: str, one_input: Callable[[bytes], None], seconds: float, seed: int = 0) -> int:
    """Feed every seed, then random mutations of them for ``seconds``; return the count."""
    corpus = seeds(target)
    for data in corpus:
        one_input(data)
    rng = random.Random(seed)  # noqa: S311 - reproducible mutations, not cryptography
    deadline = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < deadline:
        data = rng.choice(corpus)
        for _ in range(rng.randrange(1, 6)):
            data = mutate(data, rng)
        one_input(data)
        runs += 1
    return runs


def run(target: str, one_input: Callable[[bytes], None]) -> None:
    """Fuzz ``one_input`` with atheris, or replay and mutate the corpus without it."""
    if "--replay" in sys.argv:
        seconds = DEFAULT_REPLAY_SECONDS
        if "--seconds" in sys.argv:
            seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
        runs = replay(target, one_input, seconds)
        print(f"{target}: {len(seeds(target))} seeds and {runs} mutations, no failure")
        return
    try:
        import atheris  # type: ignore[import-not-found]
    except ImportError:
        print("atheris is not installed; use --replay", file=sys.stderr)
        raise SystemExit(2) from None
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
