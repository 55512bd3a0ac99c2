"""Shared runner for the egress fuzz targets: atheris when installed, else a replay fuzzer.

Each target defines ``one_input(data: bytes) -> None`` that raises only on a bug. Run::

    python fuzz/egress_http_head.py -atheris_runs=1000000 fuzz/egress_corpus/http_head
    python fuzz/egress_socks5.py --replay [--seconds S]

The replay mode feeds every seed in ``fuzz/egress_corpus/<target>/`` and then random
byte-level mutations of them for ``--seconds`` (default 10);
``tests/egress/test_fuzz.py`` replays the seeds and a bounded slice of mutations.
"""

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

CORPUS_ROOT = Path(__file__).resolve().parent / "egress_corpus"
DEFAULT_REPLAY_SECONDS = 10.0
MAX_MUTATED_BYTES = 8192
TOKENS = (
    b"\r\n",
    b"\r\n\r\n",
    b" ",
    b":",
    b"HTTP/1.1",
    b"CONNECT ",
    b"http://",
    b"\x05",
    b"\x00",
    b"\xff",
    b"0\r\n",
)


def seeds(target: str) -> list[bytes]:
    """The seed inputs of ``target``, sorted by file name."""
    return [path.read_bytes() for path in sorted((CORPUS_ROOT / target).iterdir())]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random byte-level mutation: flip, insert, delete, duplicate or a protocol token."""
    buffer = bytearray(data)
    choice = rng.randrange(5)
    position = rng.randrange(len(buffer) + 1)
    if choice == 0 and buffer:
        buffer[min(position, len(buffer) - 1)] ^= 1 << rng.randrange(8)
    elif choice == 1:
        buffer[position:position] = bytes([rng.randrange(256)])
    elif choice == 2 and buffer:
        del buffer[position : position + rng.randrange(1, 8)]
    elif choice == 3:
        chunk = buffer[position : position + rng.randrange(1, 32)]
        buffer[position:position] = chunk
    else:
        buffer[position:position] = rng.choice(TOKENS)
    return bytes(buffer[:MAX_MUTATED_BYTES])


def run(target: str, one_input: Callable[[bytes], None]) -> None:
    """Fuzz ``one_input`` with atheris, or replay and mutate the corpus without it."""
    if "--replay" not in sys.argv:
        try:
            import atheris  # type: ignore[import-not-found]
        except ImportError:
            print("atheris is not installed; use --replay", file=sys.stderr)
            raise SystemExit(2) from None
        # Coverage guidance: instrument every function loaded so far (the target has
        # imported glove.egress by now), or libFuzzer mutates blind.
        atheris.instrument_all()
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
        return
    seconds = DEFAULT_REPLAY_SECONDS
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
    corpus = seeds(target)
    for data in corpus:
        one_input(data)
    rng = random.Random(0)  # noqa: S311 - reproducible mutations, not cryptography
    deadline = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < deadline:
        data = rng.choice(corpus)
        for _ in range(rng.randrange(1, 6)):
            data = mutate(data, rng)
        one_input(data)
        runs += 1
    print(f"{target}: {len(corpus)} seeds and {runs} mutations, no failure")
