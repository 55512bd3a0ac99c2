"""Fuzz target: raw PTY bytes -> StreamEvaluator (cut several ways) -> judge.

Contract under test: for each of a few fixtures, the evidence of the input fed as one
chunk, byte by byte, and cut at points drawn from the input's own digest is the same;
where the C scanner is built (the default then), the pure-Python one's evidence of those
cuts is the same too; it equals the naive references (``tests/evaluate/reference.py``: a
byte-at-a-time normalizer, whole-stream ``bytes.find``, one-shot ``bytes.decode``,
``hashlib``); and ``judge`` turns it, with each of a few termination records, into an
outcome whose verdict is one of the five and whose reasons are listed in precedence
order. Nothing is ever raised. Run::

    python fuzz/evaluate_stream.py -atheris_runs=100000 -max_len=4096 fuzz/evaluate_corpus/stream
    python fuzz/evaluate_stream.py --replay [--seconds S]     # without atheris
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.evaluate.reference

from policy_common import mutate

try:
    import atheris  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # the replay mode and the CI slice run without it
    atheris = None

_FUZZING = atheris is not None and __name__ == "__main__" and "--replay" not in sys.argv
with atheris.instrument_imports(include=["glove"]) if _FUZZING else contextlib.nullcontext():
    from tests.evaluate.reference import (
        reference_first_offsets,
        reference_normalize,
        reference_sha256,
        reference_utf8,
    )

    from glove.evaluate import (
        NATIVE_SCANNER,
        REASON_VERDICTS,
        VERDICTS,
        Evidence,
        Fixture,
        StreamEvaluator,
        Termination,
        encode_outcome,
        judge,
    )

CORPUS = Path(__file__).resolve().parent / "evaluate_corpus" / "stream"
DEFAULT_REPLAY_SECONDS = 10.0
FIXTURES = (
    Fixture(
        version=1,
        exit_code=0,
        max_wall_ms=1000,
        required=["tests passed", "\u00a9", "a\n"],
        forbidden=["FORBIDDEN", "Traceback", "\x1b]52;", "\r\n\r", "[0m", "\u00e9t\u00e9"],
    ),
    Fixture(version=1, exit_code=0, max_wall_ms=1, required=[], forbidden=["x" * 300]),
    Fixture(version=1, exit_code=3, max_wall_ms=1, required=["p"], forbidden=[]),
)
TERMINATIONS = (
    Termination(drained=True, exit_code=0, wall_ms=10),
    Termination(drained=False, exit_code=None, wall_ms=5000, limits_hit=("wall_time_s",)),
    Termination(drained=True, exit_code=0, wall_ms=1, infra_error="journal_failed"),
)


def _feed(fixture: Fixture, chunks: list[bytes], *, native: bool | None = None) -> Evidence:
    evaluator = StreamEvaluator(fixture, native=native)
    for chunk in chunks:
        evaluator.feed(chunk)
    return evaluator.finish()


def _reference(fixture: Fixture, data: bytes) -> Evidence:
    text = reference_normalize(data)
    required = [literal.encode() for literal in fixture.required]
    forbidden = [literal.encode() for literal in fixture.forbidden]
    utf8, offset = reference_utf8(data)
    return Evidence(
        bytes_total=len(data),
        bytes_evicted=0,
        text_bytes=len(text),
        sha256=reference_sha256(data),
        utf8=utf8,  # type: ignore[arg-type]
        utf8_offset=offset,
        required_text=tuple(reference_first_offsets(text, required)),
        forbidden_raw=tuple(reference_first_offsets(data, forbidden)),
        forbidden_text=tuple(reference_first_offsets(text, forbidden)),
    )


def one_input(data: bytes) -> None:
    """Evaluate ``data`` several ways against each fixture; check the module's contract."""
    rng = random.Random(hashlib.sha256(data).digest())  # noqa: S311 - cut points, not secrets
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 9)))
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    for fixture in FIXTURES:
        whole = _feed(fixture, [data])
        assert _feed(fixture, pieces) == whole, (data, cuts)
        assert _feed(fixture, [data[i : i + 1] for i in range(len(data))]) == whole, data
        assert whole == _reference(fixture, data), (data, whole)
        if NATIVE_SCANNER:  # the C scanner evaluated these: the pure one must agree
            assert _feed(fixture, pieces, native=False) == whole, (data, cuts)
        for termination in TERMINATIONS:
            outcome = judge(termination, whole, fixture)
            assert outcome.verdict in VERDICTS
            ranks = [VERDICTS.index(REASON_VERDICTS[reason.code]) for reason in outcome.reasons]
            assert ranks == sorted(ranks), outcome
            assert outcome.verdict == (VERDICTS[ranks[0]] if ranks else "pass")
            encode_outcome(outcome)


def seeds() -> list[bytes]:
    """The seed inputs, sorted by file name."""
    return [path.read_bytes() for path in sorted(CORPUS.iterdir()) if path.suffix == ".bin"]


def replay(seconds: float) -> int:
    """Feed every seed, then random mutations of them, for ``seconds``; return the count."""
    corpus = seeds()
    for data in corpus:
        one_input(data)
    rng = random.Random(0)  # noqa: S311 - reproducible mutations, not cryptography
    deadline = time.monotonic() + seconds
    runs = len(corpus)
    while time.monotonic() < deadline:
        data = rng.choice(corpus)
        for _ in range(rng.randrange(1, 6)):
            data = mutate(data, rng)
        one_input(data)
        runs += 1
    return runs


if __name__ == "__main__":
    if "--replay" in sys.argv:
        seconds = DEFAULT_REPLAY_SECONDS
        if "--seconds" in sys.argv:
            seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
        print(f"evaluate_stream: {replay(seconds)} inputs, no failure")
    elif atheris is None:
        print("atheris is not installed; use --replay", file=sys.stderr)
        raise SystemExit(2)
    else:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
