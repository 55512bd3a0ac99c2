"""Evaluator benchmark: MiB/s of PTY output through ``StreamEvaluator``, as ratios to peers.

Three kinds of output, made here from a fixed seed (about 8 MiB each, 2 MiB with
``--quick``), fed in 64 KiB chunks (what the PTY drain reads at most) and in 4 KiB ones:

* ``plain``: log lines ending in CR LF, no escape sequence (``cat``, an uncoloured build);
* ``colored``: the same with an SGR-coloured word on about a third of the lines;
* ``tui``: a full-screen program's redraws: cursor motion, SGR on most words, a window
  title now and then (about one ESC per 20 bytes).

Against two fixtures: a realistic one of 16 literals (4 required, 12 forbidden) and one at
the DSL's bound of 256 (56 required, 200 forbidden). In the passing case the required
literals appear early; the forbidden ones never do, so every forbidden literal is looked
for in every byte, twice (raw and text) where the chunk holds escapes.

Each case runs twice, side by side: with the C scanner (``glove.evaluate._cscan``, the
default where it is built) and with the pure-Python one (``native=False``, the reference
and the fallback); ``C/pure`` is the speed-up. Peers, on the same bytes in the same
process, measured in the same rounds (best of several, interleaved): ``hashlib.sha256``
alone (a floor: the evaluator hashes every byte too), and one ``bytes.find`` of one
literal. A ratio to sha256 above 1 means the evaluator is slower by that factor.

    .venv/bin/python benchmarks/evaluate/bench.py [--quick] [--rounds N] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import random
import time
from collections.abc import Callable

from glove.evaluate import NATIVE_SCANNER, Fixture, StreamEvaluator

WORDS = (
    b"the of and to in is that for it as was with be by on not this are or from at which "
    b"but have an they you were all there would their we been has when who will more no if "
    b"out so said what up its about into than them can only other new some could time these "
    b"may then do first any my now such like our over even most made after also did many"
).split()
MIB = 1024 * 1024

REALISTIC = Fixture(
    version=1,
    exit_code=0,
    max_wall_ms=30000,
    required=["all tests passed", "wrote 3 files", "done.", "exit status 0"],
    forbidden=[
        "Traceback (most recent call last)",
        "FAILED",
        "error:",
        "panic:",
        "Segmentation fault",
        "AssertionError",
        "CANARY-7f3a9c",
        "rm -rf /",
        "Permission denied",
        "Killed",
        "fatal:",
        "Exception",
    ],
)
BOUND = Fixture(
    version=1,
    exit_code=0,
    max_wall_ms=30000,
    required=[f"required marker {i:03d}" for i in range(56)],
    forbidden=[f"forbidden marker number {i:03d}" for i in range(200)],
)


def _line(rng: random.Random, kind: str) -> bytes:
    words = [rng.choice(WORDS) for _ in range(rng.randrange(5, 15))]
    if kind == "colored" and rng.random() < 0.33:
        words[0] = b"\x1b[32m" + words[0] + b"\x1b[0m"
    if kind == "tui":
        words = [
            b"\x1b[%d;%dm" % (rng.choice((0, 1, 2)), rng.choice((31, 32, 33, 90))) + w + b"\x1b[m"
            if rng.random() < 0.6
            else w
            for w in words
        ]
        prefix = b"\x1b[%d;1H\x1b[2K" % rng.randrange(1, 50)
        if rng.random() < 0.02:
            prefix = b"\x1b]0;agent: working\x07" + prefix
        return prefix + b" ".join(words)
    return b" ".join(words) + b"\r\n"


def output(kind: str, size: int, fixture: Fixture) -> bytes:
    """About ``size`` bytes of ``kind`` output, with the fixture's required literals early."""
    rng = random.Random(kind)
    parts = [literal.encode() + b"\r\n" for literal in fixture.required]
    total = sum(map(len, parts))
    while total < size:
        line = _line(rng, kind)
        parts.append(line)
        total += len(line)
    return b"".join(parts)


def _best(fn: Callable[[], object], rounds: int, clock: Callable[[], float]) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def _evaluate(fixture: Fixture, chunks: list[bytes], native: bool) -> None:
    evaluator = StreamEvaluator(fixture, native=native)
    for chunk in chunks:
        evaluator.feed(chunk)
    evidence = evaluator.finish()
    assert all(offset is not None for offset in evidence.required_text)
    assert not any(offset is not None for offset in evidence.forbidden_raw)


def main() -> None:
    """Print MiB/s per kind of output, chunk size and fixture, C and pure, and the ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2 MiB per case, 3 rounds")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time (perf_counter), or this process's CPU time (process_time: what a "
        "loaded, shared machine stretches less)",
    )
    args = parser.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    size = 2 * MIB if args.quick else 8 * MIB
    rounds = args.rounds or (3 if args.quick else 7)
    scanners = ("c", "pure") if NATIVE_SCANNER else ("pure",)
    if not NATIVE_SCANNER:
        print("the C scanner (glove.evaluate._cscan) is not built: pure Python only")
    print(
        f"{'output':8} {'chunk':>6} {'literals':>8} {'C':>10} {'pure':>10} {'C/pure':>7} "
        f"{'sha256':>9} {'find x1':>9} {'C vs sha256':>11} {'pure vs sha256':>14}"
    )
    for fixture in (REALISTIC, BOUND):
        literals = len(fixture.required) + len(fixture.forbidden)
        for kind in ("plain", "colored", "tui"):
            data = output(kind, size, fixture)
            for chunk_size in (64 * 1024, 4 * 1024):
                chunks = [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]
                needle = fixture.forbidden[0].encode()

                def sha(chunks: list[bytes] = chunks) -> None:
                    digest = hashlib.sha256()
                    for chunk in chunks:
                        digest.update(chunk)

                def find(chunks: list[bytes] = chunks, needle: bytes = needle) -> None:
                    for chunk in chunks:
                        chunk.find(needle)

                cases: dict[str, Callable[[], object]] = {"sha": sha, "find": find}
                for name in scanners:
                    cases[name] = functools.partial(_evaluate, fixture, chunks, name == "c")
                times = dict.fromkeys(cases, float("inf"))
                for _ in range(rounds):  # interleaved, so a busy machine slows all alike
                    for name, fn in cases.items():
                        times[name] = min(times[name], _best(fn, 1, clock))
                mib = len(data) / MIB
                rate = {name: mib / seconds for name, seconds in times.items()}
                c_rate = f"{rate['c']:>5.0f}MiB/s" if "c" in rate else f"{'-':>10}"
                speedup = f"{rate['c'] / rate['pure']:>6.1f}x" if "c" in rate else f"{'-':>7}"
                c_sha = f"{rate['sha'] / rate['c']:>10.1f}x" if "c" in rate else f"{'-':>11}"
                print(
                    f"{kind:8} {chunk_size // 1024:>4}Ki {literals:>8} {c_rate} "
                    f"{rate['pure']:>5.0f}MiB/s {speedup} {rate['sha']:>4.0f}MiB/s "
                    f"{rate['find']:>4.0f}MiB/s {c_sha} {rate['sha'] / rate['pure']:>13.1f}x"
                )


if __name__ == "__main__":
    main()
