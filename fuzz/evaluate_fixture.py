"""Fuzz target: bytes -> decode_fixture -> encode_fixture -> decode -> StreamEvaluator.

Contract under test: ``decode_fixture`` returns a Fixture or raises ``FixtureError``; every
FixtureError lists 1..MAX_PROBLEMS problems, each with a ``$``-rooted, printable path and a
printable message, and the whole error is one printable line that msgspec encodes. A
decoded fixture is within every bound of the DSL, re-encodes to bytes that decode to an
equal fixture, has a ``sha256:`` digest, and builds an evaluator that evaluates a short
stream without raising. Nothing else is ever raised. Run::

    python fuzz/evaluate_fixture.py -atheris_runs=100000 -max_len=65600 fuzz/evaluate_corpus/fixture
    python fuzz/evaluate_fixture.py --replay [--seconds S]     # without atheris
    python fuzz/make_evaluate_corpus.py                        # rewrite the seed corpora
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_common import mutate

try:
    import atheris  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # the replay mode and the CI slice run without it
    atheris = None

_FUZZING = atheris is not None and __name__ == "__main__" and "--replay" not in sys.argv
with atheris.instrument_imports(include=["glove"]) if _FUZZING else contextlib.nullcontext():
    import msgspec

    from glove.evaluate import (
        MAX_LITERAL_BYTES,
        MAX_LITERALS,
        MAX_PROBLEMS,
        FixtureError,
        StreamEvaluator,
        decode_fixture,
        encode_fixture,
        fixture_digest,
    )
    from glove.evaluate.errors import MAX_PROBLEM_TEXT_CHARS

CORPUS = Path(__file__).resolve().parent / "evaluate_corpus" / "fixture"
DEFAULT_REPLAY_SECONDS = 10.0
_STREAM = b"tests passed\r\nFOR\x1b[0mBIDDEN \x1b]0;Traceback\x07 caf\xc3\xa9 \xe2\x82"


def _check_error(error: FixtureError) -> None:
    """A refusal is well formed: bounded, located, one printable line, encodable."""
    assert 1 <= len(error.problems) <= MAX_PROBLEMS, len(error.problems)
    line = str(error)
    assert line.isprintable(), line
    assert line.startswith("fixture refused at $"), line
    for problem in error.problems:
        assert problem.path.startswith("$"), problem
        assert problem.path.isprintable(), problem
        assert problem.message.isprintable(), problem
        assert len(problem.path) <= MAX_PROBLEM_TEXT_CHARS + 3, problem
        assert len(problem.message) <= MAX_PROBLEM_TEXT_CHARS + 3, problem
    msgspec.json.encode(error.problems)


def one_input(data: bytes) -> None:
    """Decode ``data`` as a fixture and check every contract of the module docstring."""
    try:
        fixture = decode_fixture(data)
    except FixtureError as error:
        _check_error(error)
        return
    assert len(fixture.required) + len(fixture.forbidden) <= MAX_LITERALS
    for literal in (*fixture.required, *fixture.forbidden):
        assert 0 < len(literal.encode("utf-8")) <= MAX_LITERAL_BYTES
        assert "\x00" not in literal
    again = decode_fixture(encode_fixture(fixture))
    assert again == fixture, (again, fixture)
    digest = fixture_digest(data)
    assert digest.startswith("sha256:"), digest
    assert len(digest) == 71, digest
    evaluator = StreamEvaluator(fixture)
    evaluator.feed(_STREAM)
    evidence = evaluator.finish()
    assert len(evidence.required_text) == len(fixture.required)
    assert len(evidence.forbidden_raw) == len(fixture.forbidden)


def seeds() -> list[bytes]:
    """The seed inputs, sorted by file name."""
    return [path.read_bytes() for path in sorted(CORPUS.iterdir()) if path.suffix == ".json"]


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
        print(f"evaluate_fixture: {replay(seconds)} inputs, no failure")
    elif atheris is None:
        print("atheris is not installed; use --replay", file=sys.stderr)
        raise SystemExit(2)
    else:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()
