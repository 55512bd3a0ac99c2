"""RFC 8785 canonical bytes: the published vectors, two independent peers, and the plan."""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.plan import (
    CanonicalError,
    Plan,
    PlanLimits,
    canonical_bytes,
    decode_plan,
    ecmascript_number,
    jcs_dumps,
)

from ._helpers import EXAMPLE_CANONICAL, plan_bytes

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "jcs"
VECTOR_NAMES = ("arrays", "french", "structures", "unicode", "values", "weird")
#: Lines of the ES6 number sequence checked in the suite (the 1,000,000-line and longer
#: checksums are checked outside it: about 3 s per million lines).
ES6_LINES_IN_SUITE = 100_000
#: Random doubles compared against Node's Number.prototype.toString.
NODE_SAMPLES = 20_000


# --- the reference repository's vectors --------------------------------------------------------


@pytest.mark.parametrize("name", VECTOR_NAMES)
def test_the_rfc_8785_reference_vectors(name: str) -> None:
    """Each input of the reference repository canonicalizes to its output, byte for byte."""
    value = json.loads((VECTORS / "input" / f"{name}.json").read_bytes())
    assert jcs_dumps(value) == (VECTORS / "output" / f"{name}.json").read_bytes()


def _es6_bits() -> Iterator[int]:
    """The bit patterns of es6testfile100m.txt, in order (testdata/numgen.go)."""
    yield from (int(line, 16) for line in (VECTORS / "es6_static_u64.txt").read_text().split())
    yield from (0x0010000000000000 + i for i in range(2000))
    block = bytes(32)
    while True:
        block = hashlib.sha256(block).digest()
        for (bits,) in struct.iter_unpack("<Q", block):
            value = _double(bits)
            if value != 0 and math.isfinite(value):
                yield bits


def _double(bits: int) -> float:
    value: float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return value


def _published_checksums() -> dict[int, str]:
    out: dict[int, str] = {}
    for line in (VECTORS / "es6_checksums.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            count, digest = line.split()
            out[int(count)] = digest
    return out


def test_the_es6_number_sequence_matches_the_published_checksums() -> None:
    """The first 1,000, 10,000 and 100,000 lines of the ES6 test file hash as published."""
    checksums = _published_checksums()
    digest = hashlib.sha256()
    checked = []
    for count, bits in enumerate(_es6_bits(), start=1):
        digest.update(f"{bits:x},{ecmascript_number(_double(bits))}\n".encode())
        if count in checksums:
            assert digest.hexdigest() == checksums[count], f"first {count} lines"
            checked.append(count)
        if count == ES6_LINES_IN_SUITE:
            break
    assert checked == [1000, 10000, 100000]


@pytest.mark.parametrize(
    ("bits", "text"),
    [
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"),
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7FEFFFFFFFFFFFFF, "1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x444B1AE4D6E2EF50, "1e+21"),
        (0x444B1AE4D6E2EF4F, "999999999999999900000"),
        (0x3EB0C6F7A0B5ED8D, "0.000001"),
        (0x3EB0C6F7A0B5ED8C, "9.999999999999997e-7"),
        (0x41B3DE4355555555, "333333333.3333333"),
    ],
)
def test_number_notation_at_the_edges(bits: int, text: str) -> None:
    """Zero and minus zero, subnormals, the plain/exponent boundaries at 1e21 and 1e-6."""
    assert ecmascript_number(_double(bits)) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_have_no_form(value: float) -> None:
    """NaN and the infinities are refused by the number writer and by the encoder."""
    with pytest.raises(ValueError, match="has no JSON form"):
        ecmascript_number(value)
    with pytest.raises(CanonicalError):
        jcs_dumps([value])


# --- independent implementations ---------------------------------------------------------------


def test_numbers_and_strings_agree_with_node() -> None:
    """Node's JSON.stringify (an ECMAScript engine: the definition JCS cites) writes 20,000
    random doubles and strings exactly as Glove does."""
    rng = random.Random(8785)
    doubles = [_double(rng.getrandbits(64)) for _ in range(NODE_SAMPLES)]
    doubles = [value for value in doubles if math.isfinite(value)]
    doubles += [rng.uniform(-1e6, 1e6) for _ in range(2000)] + [float(i) for i in range(-50, 50)]
    alphabet = [chr(c) for c in range(0x80)] + ["\u2028", "\u00e9", "\U0001f600", "\ufeff"]
    strings = ["".join(rng.choices(alphabet, k=rng.randrange(12))) for _ in range(2000)]
    script = (
        "const lines = require('fs').readFileSync(0, 'utf8').split('\\n').filter(Boolean);"
        "for (const line of lines) {"
        "  const [kind, payload] = [line[0], line.slice(2)];"
        "  if (kind === 'd') { const b = Buffer.from(payload, 'hex');"
        "    console.log(JSON.stringify(b.readDoubleBE(0))); }"
        "  else { console.log(JSON.stringify(JSON.parse(payload))); } }"
    )
    lines = [f"d {struct.pack('>d', value).hex()}" for value in doubles]
    lines += [f"s {json.dumps(text)}" for text in strings]
    node = shutil.which("node")
    assert node is not None, "node is required (scripts/setup installs it for the npm peers)"
    done = subprocess.run(
        [node, "-e", script],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )
    expected = done.stdout.split("\n")[: len(lines)]
    ours = [jcs_dumps(value).decode() for value in [*doubles, *strings]]
    mismatches = [(a, b) for a, b in zip(ours, expected, strict=True) if a != b]
    assert not mismatches, mismatches[:5]


_json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=["Cs"]), max_size=6), children, max_size=5
        )
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(_json_values)
def test_agrees_with_the_rfc8785_package(value: Any) -> None:
    """Trail of Bits' rfc8785 (PyPI) encodes any JSON value to the same bytes."""
    assert jcs_dumps(value) == rfc8785.dumps(value)


#: Values with ASCII keys and integral floats (a launch binding, a receipt): msgspec's path.
_plain_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.integers(min_value=-(2**53) - 4, max_value=2**53 + 4).map(float)
    | st.sampled_from([0.0, -0.0, 1e21, 2.0**60, 900.0])
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(st.text(st.characters(max_codepoint=127), max_size=6), children)
    ),
    max_leaves=40,
)


@settings(max_examples=600, deadline=None)
@given(_plain_values)
def test_values_with_ascii_keys_and_integral_floats_agree_with_the_rfc8785_package(
    value: Any,
) -> None:
    """The fast path (msgspec, for ASCII keys, integral floats as integers) writes the
    bytes rfc8785 writes: every escape, every non-ASCII character, the key order, 900.0
    as 900 and 2**60 as ECMAScript's digits."""
    assert jcs_dumps(value) == rfc8785.dumps(value)


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    """U+1F600 (surrogates D83D DE00) sorts before U+E000 and U+FB33, as RFC 8785 requires."""
    value = {"\ufb33": 1, "\U0001f600": 2, "\ue000": 3, "a": 4, "\u00f6": 5}
    assert jcs_dumps(value) == '{"a":4,"\u00f6":5,"\U0001f600":2,"\ue000":3,"\ufb33":1}'.encode()
    assert jcs_dumps(value) == rfc8785.dumps(value)


def test_only_the_required_characters_are_escaped() -> None:
    """Quote, backslash, the short escapes and other controls; DEL, U+2028 and / are literal."""
    text = '"\\\b\t\n\f\r\x00\x1f\x7f\u2028/\u00e9'
    assert jcs_dumps(text) == b'"\\"\\\\\\b\\t\\n\\f\\r\\u0000\\u001f\x7f\xe2\x80\xa8/\xc3\xa9"'


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": ["\ud800"]}, "$.a[0]"),
        ({"\udc00": 1}, '$["\\udc00"]'),
        ({"a": 2**53}, "$.a"),
        ([-(2**53)], "$[0]"),
        ({1: 2}, "$"),
        ({"s": {1, 2}}, "$.s"),
        ({"b": b"x"}, "$.b"),
    ],
)
def test_values_without_a_canonical_form_are_refused_with_their_path(
    value: object, path: str
) -> None:
    """Lone surrogates, unsafe integers, non-string keys and non-JSON types are refused."""
    with pytest.raises(CanonicalError) as caught:
        jcs_dumps(value)
    assert caught.value.problems[0].path == path


def test_the_encoder_is_bounded_in_depth() -> None:
    """64 nested containers encode; 65 are refused (no RecursionError)."""
    deep: Any = []
    for _ in range(63):
        deep = [deep]
    assert jcs_dumps(deep) == b"[" * 64 + b"]" * 64
    with pytest.raises(CanonicalError, match="nested deeper than 64"):
        jcs_dumps([deep])


# --- the plan ----------------------------------------------------------------------------------


def test_the_example_plan_has_these_canonical_bytes() -> None:
    """The issue's example, pinned: sorted keys, no whitespace, 30 (not 30.0) seconds."""
    assert canonical_bytes(decode_plan(plan_bytes())) == EXAMPLE_CANONICAL


def test_canonical_bytes_are_those_of_the_plan_as_sent() -> None:
    """Whitespace, member order, escapes and number spelling do not change the bytes; absent
    optional members stay absent."""
    variants = [
        plan_bytes(),
        json.dumps(dict(reversed(json.loads(plan_bytes()).items())), indent=4).encode(),
        plan_bytes().replace(b'"demo"', b'"d\\u0065mo"').replace(b"30,", b"3.0e1,"),
    ]
    assert {canonical_bytes(decode_plan(data)) for data in variants} == {EXAMPLE_CANONICAL}


def test_canonical_bytes_include_optional_members_that_were_sent() -> None:
    """A pty size and labels are part of the canonical form, and of rfc8785's."""
    data = plan_bytes(terminal="pty", rows=40, cols=120, labels={"z": "1", "A": "\u00e9"})
    canonical = canonical_bytes(decode_plan(data))
    assert b'"cols":120' in canonical
    assert b'"labels":{"A":"\xc3\xa9","z":"1"}' in canonical
    assert canonical == rfc8785.dumps(json.loads(data))


def test_canonical_bytes_decode_back_to_the_same_plan() -> None:
    """The canonical bytes are a plan, the same one, and their own canonical form."""
    plan = decode_plan(plan_bytes(labels={"a": "b"}, exposures=["work", "ref"]))
    again = decode_plan(canonical_bytes(plan))
    assert again == plan
    assert canonical_bytes(again) == canonical_bytes(plan)


def test_a_hand_built_plan_with_a_non_json_value_is_refused() -> None:
    """canonical_bytes of a Plan built with a value JSON cannot carry raises CanonicalError."""
    plan = Plan(
        version=1,
        harness="demo",
        exposures=("work",),
        limits=PlanLimits(wall_time_s=math.inf),
        network="none",
        terminal="pipes",
    )
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes(plan)
    assert caught.value.problems[0].path == "$.limits.wall_time_s"
