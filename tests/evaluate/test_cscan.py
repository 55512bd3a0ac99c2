"""The C scanner (glove.evaluate._cscan) against the pure-Python one: the same text, the
same offsets, the same UTF-8 verdict and so the same evidence, on random streams, cuts and
fixtures; its memory bounds; and the fallback when it is not built."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import glove.evaluate
from glove.evaluate import (
    MAX_LITERAL_BYTES,
    MAX_LITERALS,
    NATIVE_SCANNER,
    NORMALIZER_VERSION,
    Fixture,
    StreamEvaluator,
    _cscan,
    evaluate_stream,
    literal_problems,
    normalize,
)
from glove.evaluate._match import LiteralScan
from glove.evaluate._utf8 import Utf8Check
from tests.evaluate.reference import (
    reference_first_offsets,
    reference_normalize,
    reference_utf8,
)

PACKAGE_DIR = Path(glove.evaluate.__file__).parent
#: Pieces that split into every kind of sequence, control and UTF-8 form when cut.
PIECES = [
    b"\x1b[0m",
    b"\x1b[38;5;196m",
    b"\x1b[?2004h",
    b"\x1b]0;title\x07",
    b"\x1b]52;c;Zm9v\x1b\\",
    b"\x1bP1$r0m\x1b\\",
    b"\x1b(B",
    b"\x1bOA",
    b"\x1b",
    b"[",
    b"\x07",
    b"\x18",
    b"\x1a",
    b"\xc2\x9b1m",
    b"\xc2\x9d0;t\xc2\x9c",
    b"\xc2",
    b"\x9b",
    b"\xc2\xa9",
    b"\xe2\x82\xac",
    b"\xe2\x82",
    b"\xf0\x9f\x98\x80",
    b"\xed\xa0\x80",
    b"\xe0\x9f",
    b"\xf4\x90",
    b"\xff",
    b"\x80",
    b"\r\n",
    b"\t",
    b"\x00",
    b"\x7f",
    b"FOR",
    b"BID",
    b"DEN",
    b"aaaa",
    b"ab",
    b"the quick brown fox ",
]
streams = st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join) | st.binary(max_size=300)
cut_lists = st.lists(st.integers(0, 400), max_size=12)
#: Literals over a small alphabet, so they overlap, nest and are prefixes of each other.
small_literals = st.lists(
    st.binary(min_size=1, max_size=6).map(lambda b: bytes(b"ab\x1b[m\xc2"[x % 6] for x in b)),
    min_size=1,
    max_size=12,
)


def pieces_of(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (positions, any order, clamped)."""
    points = sorted({min(max(cut, 0), len(data)) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def c_normalize(chunks: list[bytes]) -> bytes:
    """The C normalizer's text of the chunks, then the end."""
    normalizer = _cscan.Normalizer()
    return b"".join(normalizer.feed(chunk) for chunk in chunks) + normalizer.finish()


def test_the_extension_is_built_current_and_used_by_default() -> None:
    """This venv has the C scanner, of the interface _scan.py speaks, and the evaluator uses it."""
    assert NATIVE_SCANNER
    assert _cscan.ABI_VERSION == 1
    assert _cscan.NORMALIZER_VERSION == NORMALIZER_VERSION == "glove-text-v1"
    fixture = Fixture(version=1, exit_code=0, max_wall_ms=1, required=[], forbidden=["x"])
    assert StreamEvaluator(fixture).native
    assert not StreamEvaluator(fixture, native=False).native
    # An editable install builds it in place; one older than its source is stale.
    source = PACKAGE_DIR / "_cscan.c"
    built = Path(_cscan.__file__)
    if built.parent == PACKAGE_DIR:
        assert built.stat().st_mtime >= source.stat().st_mtime, "rebuild: pip install -e ."


@settings(max_examples=600, deadline=None)
@given(streams, cut_lists)
def test_the_c_normalizer_gives_the_python_text(data: bytes, cuts: list[int]) -> None:
    """The C state machine's text equals _normalize.py's and the reference's, however cut."""
    assert c_normalize(pieces_of(data, cuts)) == normalize(data) == reference_normalize(data)


def test_every_sequence_split_at_every_byte_gives_the_python_text() -> None:
    """Each piece between two others, cut at every pair of points, normalizes alike."""
    for piece in PIECES:
        data = b"a" + piece + b"b\xc2" + piece + b"\xc2\x9cz"
        want = normalize(data)
        for first in range(len(data) + 1):
            for second in range(first, len(data) + 1):
                got = c_normalize([data[:first], data[first:second], data[second:]])
                assert got == want, (data, first, second)


def test_a_c2_at_a_slice_edge_of_one_big_chunk_is_held_across() -> None:
    """In one chunk over the scanner's 64 KiB slice, a C1 control on the edge still counts."""
    fixture = Fixture(version=1, exit_code=0, max_wall_ms=1, required=["red"], forbidden=["xr"])
    for pad in (65534, 65535, 65536):
        data = b"x" * pad + b"\xc2\x9b31mred\xc2\x9d0;xr\x07" + b"y" * 70000 + b"\xc2"
        native = evaluate_stream(fixture, [data], native=True)
        assert native == evaluate_stream(fixture, [data], native=False)
        assert native.text_bytes == len(reference_normalize(data))


@settings(max_examples=600, deadline=None)
@given(small_literals, streams, cut_lists)
def test_the_c_matcher_gives_the_python_offsets(
    literals: list[bytes], data: bytes, cuts: list[int]
) -> None:
    """First offsets from the automaton equal LiteralScan's and whole-stream find's."""
    automaton = _cscan.Automaton(literals)
    matcher = _cscan.Matcher(automaton, range(len(literals)))
    scan = LiteralScan(literals)
    for piece in pieces_of(data, cuts):
        matcher.feed(piece)
        scan.feed(piece)
    assert matcher.offsets == scan.offsets == tuple(reference_first_offsets(data, literals))
    assert matcher.pending == scan.pending


@settings(max_examples=300, deadline=None)
@given(small_literals, st.data(), streams, cut_lists)
def test_only_the_wanted_literals_are_reported(
    literals: list[bytes], draw: st.DataObject, data: bytes, cuts: list[int]
) -> None:
    """A matcher reports the literals it was asked for, whatever the others sharing its nodes do."""
    wanted = draw.draw(st.sets(st.integers(0, len(literals) - 1)))
    matcher = _cscan.Matcher(_cscan.Automaton(literals), sorted(wanted))
    for piece in pieces_of(data, cuts):
        matcher.feed(piece)
    whole = reference_first_offsets(data, literals)
    assert matcher.offsets == tuple(
        offset if index in wanted else None for index, offset in enumerate(whole)
    )


def test_nested_suffix_literals_are_all_found_and_then_cost_nothing() -> None:
    """a, aa, ..., a*256 (each a suffix of the next) are all found, and found ones stay found."""
    literals = [b"a" * n for n in range(1, MAX_LITERALS + 1)]
    automaton = _cscan.Automaton(literals)
    matcher = _cscan.Matcher(automaton, range(0, len(literals), 2))
    for _ in range(4):
        matcher.feed(b"b" + b"a" * 100)
    matcher.feed(b"a" * 300 + b"b" * 10)
    offsets = matcher.offsets
    # a*n first ends where 100 a's in a row first allow it: in the first run for n <= 100,
    # else in the run of 400 that starts at 4 * 101 - 100.
    for n, offset in enumerate(offsets, start=1):
        if n % 2 == 0:
            assert offset is None
        elif n <= 100:
            assert offset == 1
        else:
            assert offset == 4 * 101 - 100
    assert not matcher.pending


@settings(max_examples=400, deadline=None)
@given(streams, cut_lists)
def test_the_c_utf8_check_gives_the_python_verdict(data: bytes, cuts: list[int]) -> None:
    """valid / invalid@n / truncated@n equal the incremental decoder's and one-shot decode's."""
    scanner = _cscan.Scanner(_cscan.Automaton([b"x"]), [], [])
    check = Utf8Check()
    for piece in pieces_of(data, cuts):
        scanner.feed(piece)
        check.feed(piece)
    assert scanner.utf8 == check.result() == reference_utf8(data)


# Literal text for random fixtures: escapes, controls, UTF-8 and words that overlap.
_ATOMS = ["a", "b", "ab", "FOR", "BID", "DEN", "\x1b", "[0m", "\r", "\n", "\t", "\u00e9", "\u20ac"]
literal_text = st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=5).map("".join)


@st.composite
def fixtures(draw: st.DrawFn) -> Fixture:
    """A valid fixture of up to 12 literals drawn from overlapping pieces."""
    required = draw(st.lists(literal_text, max_size=6, unique=True))
    required = [literal for literal in required if "\x1b" not in literal and "\r" not in literal]
    forbidden = draw(st.lists(literal_text, max_size=6, unique=True))
    forbidden = [literal for literal in forbidden if literal not in required]
    fixture = Fixture(version=1, exit_code=0, max_wall_ms=1, required=required, forbidden=forbidden)
    assert not literal_problems(fixture)
    return fixture


@settings(max_examples=600, deadline=None)
@given(fixtures(), streams, cut_lists)
def test_the_evidence_is_the_same_on_both_scanners(
    fixture: Fixture, data: bytes, cuts: list[int]
) -> None:
    """Random fixtures, streams and cuts: the C scanner's evidence is the Python one's."""
    pieces = pieces_of(data, cuts)
    native = evaluate_stream(fixture, pieces, native=True)
    assert native == evaluate_stream(fixture, pieces, native=False)
    assert native == evaluate_stream(fixture, [data], native=False)


FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
#: The stream fuzz target's seeds and fixtures, loaded once.
STREAM_SEEDS = sorted((FUZZ_DIR / "evaluate_corpus" / "stream").glob("*.bin"))
CORPUS_FIXTURES = [
    Fixture(
        version=1,
        exit_code=0,
        max_wall_ms=1000,
        required=["tests passed", "\u00a9", "a\n"],
        forbidden=["FORBIDDEN", "Traceback", "\x1b]52;", "\r\n\r", "[0m", "\u00e9t\u00e9"],
    ),
    Fixture(version=1, exit_code=0, max_wall_ms=1, required=["x"], forbidden=["x" * 300, "\x1b"]),
]


@pytest.mark.parametrize("seed", STREAM_SEEDS, ids=[path.stem for path in STREAM_SEEDS])
def test_every_corpus_seed_cut_at_every_point_gives_the_same_evidence(seed: Path) -> None:
    """Each fuzz seed, whole, byte by byte and cut in two at every point (so every escape
    and UTF-8 sequence it holds is split): the C scanner's evidence is the pure one's."""
    data = seed.read_bytes()
    for fixture in CORPUS_FIXTURES:
        want = evaluate_stream(fixture, [data], native=False)
        assert evaluate_stream(fixture, [data], native=True) == want
        bytewise = [data[i : i + 1] for i in range(len(data))]
        assert evaluate_stream(fixture, bytewise, native=True) == want
        for cut in range(1, len(data)):
            pieces = [data[:cut], data[cut:]]
            assert evaluate_stream(fixture, pieces, native=True) == want, (seed.name, cut)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(STREAM_SEEDS), st.data(), cut_lists)
def test_mutated_corpus_seeds_give_the_same_evidence(
    seed: Path, draw: st.DataObject, cuts: list[int]
) -> None:
    """Seeds with hypothesis's insertions of escapes, invalid UTF-8 and literal pieces, cut
    anywhere: the C scanner's evidence is the pure one's and the references'."""
    data = bytearray(seed.read_bytes())
    for _ in range(draw.draw(st.integers(1, 6))):
        at = draw.draw(st.integers(0, len(data)))
        data[at:at] = draw.draw(st.sampled_from(PIECES))
    stream = bytes(data)
    pieces = pieces_of(stream, cuts)
    for fixture in CORPUS_FIXTURES:
        native = evaluate_stream(fixture, pieces, native=True)
        assert native == evaluate_stream(fixture, pieces, native=False)
        text = reference_normalize(stream)
        forbidden = [literal.encode() for literal in fixture.forbidden]
        assert native.forbidden_raw == tuple(reference_first_offsets(stream, forbidden))
        assert native.forbidden_text == tuple(reference_first_offsets(text, forbidden))
        assert (native.utf8, native.utf8_offset) == reference_utf8(stream)


def _big_literals(rng: random.Random, alphabet: bytes) -> list[str]:
    """256 distinct literals of 4 KiB that share prefixes, suffixes and middles."""
    stems = [bytes(rng.choice(alphabet) for _ in range(MAX_LITERAL_BYTES)) for _ in range(8)]
    literals: set[bytes] = set()
    while len(literals) < MAX_LITERALS:
        stem = bytearray(rng.choice(stems))
        for _ in range(rng.randrange(1, 4)):
            stem[rng.randrange(len(stem))] = rng.choice(alphabet)
        literals.add(bytes(stem))
    return sorted(literal.decode("latin-1") for literal in literals)


@pytest.mark.parametrize("alphabet", [b"ab", bytes(range(0x20, 0x7F))], ids=["ab", "ascii"])
def test_256_literals_of_4k_give_the_same_evidence(alphabet: bytes) -> None:
    """At the DSL's bound, deep nodes without dense rows included, both scanners agree."""
    rng = random.Random(len(alphabet))
    literals = _big_literals(rng, alphabet)
    fixture = Fixture(
        version=1, exit_code=0, max_wall_ms=1, required=literals[:56], forbidden=literals[56:]
    )
    encoded = [literal.encode() for literal in literals]
    parts = []
    for _ in range(40):
        literal = rng.choice(encoded)
        cut = rng.randrange(len(literal))
        parts += [literal[:cut], b"\x1b[0m" if rng.random() < 0.3 else b"", literal[cut:]]
        parts.append(bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 300))))
    data = b"".join(parts)
    cuts = [rng.randrange(len(data)) for _ in range(50)]
    native = evaluate_stream(fixture, pieces_of(data, cuts), native=True)
    assert native == evaluate_stream(fixture, [data], native=False)
    text = reference_normalize(data)
    assert native.forbidden_raw == tuple(reference_first_offsets(data, encoded[56:]))
    assert native.required_text == tuple(reference_first_offsets(text, encoded[:56]))
    assert any(offset is not None for offset in native.forbidden_text)


def test_the_automaton_of_256_literals_of_4k_stays_within_its_bound() -> None:
    """1 MiB of literals without a shared prefix: tables of at most 13 bytes per byte + 1 MiB."""
    rng = random.Random(7)
    # Every byte value but NUL, so there are 256 byte classes and the fewest dense rows.
    literals = [bytes(rng.randrange(1, 256) for _ in range(MAX_LITERAL_BYTES)) for _ in range(256)]
    total = sum(map(len, literals))
    tracemalloc.start()
    try:
        automaton = _cscan.Automaton(literals)
        _, peak = tracemalloc.get_traced_memory()
        held, _ = tracemalloc.get_traced_memory()
        matcher = _cscan.Matcher(automaton, range(len(literals)))
    finally:
        tracemalloc.stop()
    bound = 13 * (total + 1) + 12 * len(literals) + 8 * len(literals) + _cscan.DENSE_MAX_BYTES
    assert automaton.nodes <= total + 1
    assert automaton.dense_nodes == _cscan.DENSE_MAX_BYTES // (256 * 8)
    assert automaton.nbytes <= bound + 4096
    assert held <= bound + 4096
    # Building takes about as much again for the trie before it is renumbered.
    assert peak <= 2 * bound + 64 * 1024
    assert matcher.nbytes <= 1024 + 17 * len(literals)
    # It still works from the deepest node of every literal.
    for literal in literals[:8]:
        matcher.feed(literal)
    assert matcher.offsets[:8] == tuple(MAX_LITERAL_BYTES * k for k in range(8))


def test_bad_literals_and_indices_are_refused() -> None:
    """Empty or non-bytes literals and out-of-range literal indices raise clear errors."""
    with pytest.raises(ValueError, match="at least one byte"):
        _cscan.Automaton([b"a", b""])
    with pytest.raises(TypeError, match="not bytes"):
        _cscan.Automaton(["a"])  # type: ignore[list-item]
    automaton = _cscan.Automaton([b"a", b"b"])
    with pytest.raises(IndexError):
        _cscan.Matcher(automaton, [2])
    with pytest.raises(IndexError):
        _cscan.Scanner(automaton, [-1], [])
    assert len(automaton) == 2
    assert _cscan.Matcher(_cscan.Automaton([]), []).offsets == ()


def test_bytes_like_chunks_feed_the_c_objects() -> None:
    """bytearray and memoryview chunks are read in place, like bytes."""
    normalizer = _cscan.Normalizer()
    assert normalizer.feed(bytearray(b"a\x1b[1mb")) + normalizer.feed(memoryview(b"c")) == b"abc"
    matcher = _cscan.Matcher(_cscan.Automaton([b"bc"]), [0])
    matcher.feed(bytearray(b"ab"))
    matcher.feed(memoryview(b"cd"))
    assert matcher.offsets == (1,)


def _run(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter (this venv's), return the JSON it prints."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


FALLBACK = """
import json, sys, types
import msgspec
{setup}
import glove.evaluate as e
fixture = e.Fixture(version=1, exit_code=0, max_wall_ms=1, required=["ok"], forbidden=["FORBIDDEN"])
evaluator = e.StreamEvaluator(fixture)
evaluator.feed(b"ok FOR\\x1b[0mBIDDEN \\xe2\\x82")
evidence = evaluator.finish()
try:
    e.StreamEvaluator(fixture, native=True)
    refused = None
except e.EvidenceError as error:
    refused = str(error)
print(json.dumps({{"native": e.NATIVE_SCANNER, "used": evaluator.native, "refused": refused,
                  "evidence": msgspec.to_builtins(evidence)}}))
"""
MISSING = 'sys.modules["glove.evaluate._cscan"] = None  # the import fails'
STALE = """
stale = types.ModuleType("glove.evaluate._cscan")
stale.ABI_VERSION = 0
stale.NORMALIZER_VERSION = "glove-text-v1"
sys.modules["glove.evaluate._cscan"] = stale
"""


@pytest.mark.parametrize("setup", [MISSING, STALE], ids=["missing", "stale"])
def test_without_the_extension_the_python_scanner_gives_the_same_evidence(setup: str) -> None:
    """Missing or stale, the C scanner is not used, native=True is refused, and the evidence is
    byte for byte what the C scanner gives."""
    result = _run(FALLBACK.format(setup=setup))
    assert result["native"] is False
    assert result["used"] is False
    assert "not built" in str(result["refused"])
    fixture = Fixture(
        version=1, exit_code=0, max_wall_ms=1, required=["ok"], forbidden=["FORBIDDEN"]
    )
    evidence = evaluate_stream(fixture, [b"ok FOR\x1b[0mBIDDEN \xe2\x82"], native=True)
    assert result["evidence"] == json.loads(msgspec.json.encode(evidence))
    assert evidence.forbidden_text == (3,)
    assert evidence.utf8 == "truncated"
