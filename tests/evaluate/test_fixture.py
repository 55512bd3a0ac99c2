"""The fixture DSL: strict decoding, every refusal with its path, the bounds, the digest."""

from __future__ import annotations

import hashlib
import json

import pytest

from glove.evaluate import (
    MAX_FIXTURE_BYTES,
    MAX_LITERAL_BYTES,
    MAX_LITERALS,
    MAX_PROBLEMS,
    Fixture,
    FixtureError,
    decode_fixture,
    encode_fixture,
    fixture_digest,
)

EXAMPLE = b'{"version": 1, "exit_code": 0, "max_wall_ms": 30000, "required": ["tests passed"], "forbidden": ["Traceback", "FAILED"]}'  # noqa: E501


def doc(**changes: object) -> bytes:
    """The example fixture with ``changes`` applied, as JSON bytes."""
    value: dict[str, object] = json.loads(EXAMPLE)
    value.update(changes)
    return json.dumps(value).encode()


def refusal(data: bytes) -> list[tuple[str, str]]:
    """The (path, message) pairs ``decode_fixture`` refuses ``data`` with."""
    with pytest.raises(FixtureError) as info:
        decode_fixture(data)
    return [(problem.path, problem.message) for problem in info.value.problems]


def test_the_example_decodes_to_a_typed_fixture() -> None:
    """The issue's example is a Fixture with the literals in order."""
    fixture = decode_fixture(EXAMPLE)
    assert fixture == Fixture(
        version=1,
        exit_code=0,
        max_wall_ms=30000,
        required=("tests passed",),
        forbidden=("Traceback", "FAILED"),
    )


def test_encode_decodes_back_to_the_same_fixture() -> None:
    """encode_fixture's bytes decode to an equal fixture (and differ from the input's)."""
    fixture = decode_fixture(EXAMPLE)
    encoded = encode_fixture(fixture)
    assert decode_fixture(encoded) == fixture
    assert encoded != EXAMPLE


def test_the_digest_is_sha256_of_the_exact_bytes() -> None:
    """Two encodings of one fixture have two digests: the digest names bytes, not values."""
    assert fixture_digest(EXAMPLE) == "sha256:" + hashlib.sha256(EXAMPLE).hexdigest()
    spaced = EXAMPLE.replace(b", ", b",  ")
    assert decode_fixture(spaced) == decode_fixture(EXAMPLE)
    assert fixture_digest(spaced) != fixture_digest(EXAMPLE)
    assert fixture_digest(bytearray(EXAMPLE)) == fixture_digest(memoryview(EXAMPLE))


@pytest.mark.parametrize(
    ("data", "path", "needle"),
    [
        (b'{"version": 1, "version": 1}', "$.version", "duplicate key"),
        (
            doc().replace(b'"exit_code"', b'"\\u0065xit_code": 0, "exit_code"'),
            "$.exit_code",
            "duplicate key",
        ),
        (doc(required=[{"a": 1, "b": 2}]).replace(b'"b"', b'"a"'), "$.required[0].a", "duplicate"),
        (b'{"version": 1, "required": ["\\ud800"]}', "$.required[0]", "lone surrogate"),
        (b'{"version": NaN}', "$.version", "NaN is not JSON"),
        (b'{"version": 1e999}', "$.version", "out of range"),
        (b'{"version": 1,}', "$", "not JSON"),
        (b'\xff{"version": 1}', "$", "not UTF-8"),
        (b"[" * 17 + b"]" * 17, "$" + "[0]" * 16, "nested deeper than 16"),
        (doc(version=2), "$.version", "unsupported fixture version 2"),
        (doc(exit_code=256), "$.exit_code", "<= 255"),
        (doc(exit_code=-1), "$.exit_code", ">= 0"),
        (doc(exit_code=True), "$.exit_code", "Expected `int`, got `bool`"),
        (doc(exit_code=0.0), "$.exit_code", "Expected `int`, got `float`"),
        (doc(max_wall_ms=0), "$.max_wall_ms", ">= 1"),
        (doc(max_wall_ms="30000"), "$.max_wall_ms", "Expected `int`, got `str`"),
        (doc(required="tests passed"), "$.required", "Expected `array`, got `str`"),
        (doc(forbidden=[1]), "$.forbidden[0]", "Expected `str`, got `int`"),
        (doc(extra=1), "$.extra", "unknown field `extra`"),
        (doc(**{"a b": 1}), '$["a b"]', "unknown field"),
        (b"[]", "$", "Expected `object`, got `array`"),
        (
            b'{"version": 1, "exit_code": 0, "max_wall_ms": 1, "required": []}',
            "$.forbidden",
            "missing",
        ),
    ],
)
def test_each_refusal_names_its_path(data: bytes, path: str, needle: str) -> None:
    """Every kind of bad fixture is refused with the JSON path of its fault."""
    problems = refusal(data)
    assert problems[0][0] == path, problems
    assert needle in problems[0][1], problems


def test_duplicate_keys_are_refused_inside_nested_values() -> None:
    """A repeated key deep inside a wrongly typed value is still a duplicate, not a type."""
    data = doc().replace(b'"forbidden": [', b'"forbidden": [[{"k": {"z": 1, "z": 2}}], ')
    assert refusal(data)[0] == (
        "$.forbidden[0][0].k.z",
        "duplicate key 'z' (keys are compared after unescaping)",
    )


def test_every_unknown_member_is_listed() -> None:
    """All unknown members are named, not only the first."""
    problems = refusal(doc(a=1, b=2, regex="x"))
    assert [path for path, _ in problems] == ["$.a", "$.b", "$.regex"]


def test_the_size_cap_is_checked_first_and_is_exact() -> None:
    """A fixture of exactly 64 KiB decodes; one byte more is refused by its size alone."""
    base = doc(required=["r"], forbidden=["f"])
    padded = base[:-1] + b" " * (MAX_FIXTURE_BYTES - len(base)) + b"}"
    assert len(padded) == MAX_FIXTURE_BYTES
    decode_fixture(padded)
    over = b"{" + b" " * MAX_FIXTURE_BYTES + b"}"
    assert refusal(over) == [("$", f"{len(over)} bytes is over the 65536-byte fixture cap")]


def test_256_literals_decode_and_257_are_refused() -> None:
    """The literal count bound covers required and forbidden together."""
    decode_fixture(
        doc(required=[f"r{i}" for i in range(128)], forbidden=[f"f{i}" for i in range(128)])
    )
    problems = refusal(
        doc(required=[f"r{i}" for i in range(129)], forbidden=[f"f{i}" for i in range(128)])
    )
    assert problems == [
        ("$", f"at most {MAX_LITERALS} literals (required and forbidden together), got 257")
    ]


def test_a_literal_is_at_most_4_kib_of_utf8() -> None:
    """The bound is in UTF-8 bytes: 1,365 three-byte characters and one byte fit, one more does not."""  # noqa: E501
    fits = "\u20ac" * 1365 + "x"
    assert len(fits.encode()) == MAX_LITERAL_BYTES
    decode_fixture(doc(forbidden=[fits]))
    over = "\u20ac" * 1366
    assert refusal(doc(forbidden=[over])) == [
        ("$.forbidden[0]", "a literal is at most 4096 UTF-8 bytes, got 4098")
    ]


@pytest.mark.parametrize(
    ("changes", "path", "needle"),
    [
        ({"required": [""]}, "$.required[0]", "not empty"),
        ({"forbidden": [""]}, "$.forbidden[0]", "not empty"),
        ({"forbidden": ["a\u0000b"]}, "$.forbidden[0]", "NUL"),
        ({"required": ["a", "b", "a"]}, "$.required[2]", "repeats $.required[0]"),
        ({"forbidden": ["x", "x"]}, "$.forbidden[1]", "repeats $.forbidden[0]"),
        ({"required": ["same"], "forbidden": ["same"]}, "$.forbidden[0]", "also required"),
        ({"required": ["done\r\n"]}, "$.required[0]", "could never match"),
        ({"required": ["\u001b[0m"]}, "$.required[0]", "could never match"),
        ({"required": ["a\u009bb"]}, "$.required[0]", "could never match"),
        ({"required": ["a\u007fb"]}, "$.required[0]", "could never match"),
    ],
)
def test_literal_rules(changes: dict[str, object], path: str, needle: str) -> None:
    """Empty, NUL, repeated, contradictory and never-matchable literals are refused."""
    problems = refusal(doc(**changes))
    assert problems[0][0] == path, problems
    assert needle in problems[0][1], problems


def test_forbidden_literals_may_hold_controls_and_required_ones_newline_and_tab() -> None:
    """A forbidden escape sequence is looked for in the raw bytes; newline and tab stay in text."""
    fixture = decode_fixture(doc(required=["a\n\tb"], forbidden=["\u001b]52;", "\r"]))
    assert fixture.forbidden == ("\x1b]52;", "\r")


def test_every_literal_problem_is_collected_and_the_list_is_capped() -> None:
    """A fixture with hundreds of bad literals gets a bounded list that says how many more."""
    problems = refusal(doc(required=[""] * 100, forbidden=[""] * 100))
    assert len(problems) == MAX_PROBLEMS
    assert problems[-1] == ("$", f"{200 - (MAX_PROBLEMS - 1)} more problems not listed")


def test_a_refusal_is_one_printable_line_and_a_value_error() -> None:
    """The error reads as one line and is catchable as ValueError."""
    with pytest.raises(ValueError, match=r"^fixture refused at \$\.required\[0\]: ") as info:
        decode_fixture(doc(required=["\r"], forbidden=["\u0000"]))
    assert str(info.value).isprintable()
    assert str(info.value).endswith("(and 1 more problem)")


def test_a_hostile_key_is_bounded_and_printable_in_the_error() -> None:
    """A 10,000-character key with controls becomes a short, escaped path."""
    problems = refusal(doc(**{"\u0007" * 10_000: 1}))
    path = problems[0][0]
    assert path.isprintable()
    assert len(path) < 300


def test_bytes_like_inputs_are_accepted() -> None:
    """bytearray and memoryview decode like bytes."""
    assert decode_fixture(bytearray(EXAMPLE)) == decode_fixture(memoryview(EXAMPLE))
