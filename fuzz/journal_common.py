"""Shared runner for the journal and receipt fuzz targets (atheris, or a replay fuzzer).

Each target defines ``one_input(data: bytes) -> None`` that raises only on a bug, and
``seed_inputs() -> list[bytes]`` built from the codec (so the seeds follow the format). Run::

    python fuzz/journal_record.py [-atheris_runs=N ...] [fuzz/journal_corpus/record]
    python fuzz/journal_record.py --replay [--seconds S]
    python fuzz/journal_record.py --write-seeds        # refresh fuzz/journal_corpus/<target>/

The replay mode (no atheris needed) feeds every seed, then random mutations of them (the
policy fuzzers' mutator) for ``--seconds``; ``tests/journal/test_journal_fuzz.py`` runs a
bounded slice of it in the test suite.
"""

import hashlib
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from policy_common import mutate

CORPUS_ROOT = Path(__file__).resolve().parent / "journal_corpus"
DEFAULT_REPLAY_SECONDS = 10.0


def corpus(target: str, seed_inputs: Callable[[], list[bytes]]) -> list[bytes]:
    """The committed seeds of ``target`` (or freshly built ones if none are committed)."""
    folder = CORPUS_ROOT / target
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    return [path.read_bytes() for path in files] or seed_inputs()


def write_seeds(target: str, seed_inputs: Callable[[], list[bytes]]) -> None:
    """Write the seeds to ``fuzz/journal_corpus/<target>/``, named by their SHA-256."""
    folder = CORPUS_ROOT / target
    folder.mkdir(parents=True, exist_ok=True)
    for data in seed_inputs():
        (folder / hashlib.sha256(data).hexdigest()[:16]).write_bytes(data)


def run(
    target: str, one_input: Callable[[bytes], None], seed_inputs: Callable[[], list[bytes]]
) -> None:
    """Fuzz ``one_input`` with atheris, or replay and mutate the corpus without it."""
    if "--write-seeds" in sys.argv:
        write_seeds(target, seed_inputs)
        return
    if "--replay" not in sys.argv:
        try:
            import atheris  # type: ignore[import-not-found]
        except ImportError:
            print("atheris is not installed; use --replay", file=sys.stderr)
            raise SystemExit(2) from None
        atheris.instrument_all()  # coverage of every module loaded: glove's codecs included
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
        return
    seconds = DEFAULT_REPLAY_SECONDS
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    seeds = corpus(target, seed_inputs)
    for data in seeds:
        one_input(data)
    rng = random.Random(0)  # noqa: S311 - reproducible mutations, not cryptography
    deadline = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < deadline:
        data = rng.choice(seeds)
        for _ in range(rng.randrange(1, 6)):
            data = mutate(data, rng)
        one_input(data)
        runs += 1
    print(f"{target}: {len(seeds)} seeds and {runs} mutations, no failure")
