"""The structural pre-scan: every rule, at its bound, and against Python's json as a peer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.errors import GloveError
from glove.wallet import MAX_FRAME_BYTES, MAX_NESTING, WalletError, WalletFrameError
from glove.wallet import check_structure as scan
from glove.wallet._structure import MAX_NUMBER_CHARS

STATUS_RESPONSE = (
    b'{"jsonrpc":"2.0","id":7,"result":{"schema_version":1,"connected":true,'
    b'"chain":"eip155:8453","available_actions":["status"],"mutating_actions":[]}}'
)


def reason(frame: bytes) -> str | None:
    """The refusal reason for ``frame``, or None when the scan accepts it."""
    try:
        scan(frame)
    except WalletFrameError as exc:
        return exc.reason
    return None


def nested(depth: int, *, kinds: str = "[{") -> bytes:
    """``depth`` nested containers, alternating through ``kinds``."""
    opening, closing = [], []
    for level in range(depth):
        kind = kinds[level % len(kinds)]
        if kind == "[":
            opening.append("[")
            closing.append("]")
        else:
            opening.append('{"k":')
            closing.append("}")
    inner = "" if kinds[(depth - 1) % len(kinds)] == "[" else "0"
    return ("".join(opening) + inner + "".join(reversed(closing))).encode()


def test_error_is_typed_under_the_package_root() -> None:
    """WalletFrameError derives from the wallet root, itself a GloveError, and has a reason."""
    assert issubclass(WalletFrameError, WalletError)
    assert issubclass(WalletError, GloveError)
    with pytest.raises(WalletFrameError) as caught:
        scan(b"{")
    assert caught.value.reason == "malformed"


def test_accepts_well_formed_values() -> None:
    """One JSON value, any kind, with JSON whitespace around it, is accepted."""
    for frame in (
        STATUS_RESPONSE,
        b"{}",
        b"[]",
        b" \t\r\n{} \n",
        b'"x"',
        b"-0.5e+10",
        b"true",
        b"null",
        b'{"a":[1,{"b":null}],"c":"\\u00e9\\n"}',
        '{"é":"☃"}'.encode(),
        b'"\\ud83d\\ude00"',
    ):
        assert reason(frame) is None, frame


def test_size_is_refused_before_anything_is_decoded() -> None:
    """A frame over 64 KiB is refused as too large even when its first byte is not UTF-8."""
    assert MAX_FRAME_BYTES == 64 * 1024
    assert reason(b"\xff" + b" " * MAX_FRAME_BYTES) == "frame_too_large"
    at_limit = b'"' + b"a" * (MAX_FRAME_BYTES - 2) + b'"'
    assert len(at_limit) == MAX_FRAME_BYTES
    assert reason(at_limit) is None


@pytest.mark.parametrize("kinds", ["[", "{", "[{", "{["])
def test_nesting_is_bounded_at_64_containers(kinds: str) -> None:
    """64 nested containers pass, 65 are refused, whatever mix of objects and arrays."""
    assert MAX_NESTING == 64
    assert reason(nested(64, kinds=kinds)) is None
    assert reason(nested(65, kinds=kinds)) == "too_deep"


def test_deep_nesting_inside_the_raw_result_is_counted() -> None:
    """Containers inside ``result`` count towards the same bound as the envelope's."""
    deep = nested(63).decode()
    assert reason(f'{{"result":{deep}}}'.encode()) is None
    deeper = nested(64).decode()
    assert reason(f'{{"result":{deeper}}}'.encode()) == "too_deep"


def test_huge_nesting_does_not_exhaust_the_stack() -> None:
    """A 64-KiB run of open brackets is refused with a typed error, not a RecursionError."""
    assert reason(b"[" * MAX_FRAME_BYTES) == "too_deep"
    assert reason(b'{"a":' * (MAX_FRAME_BYTES // 5)) == "too_deep"


@pytest.mark.parametrize(
    "frame",
    [
        b'{"a":1,"a":2}',
        b'{"a":1,"\\u0061":2}',
        b'{"\\u0061":1,"a":2}',
        b'{"\\/":1,"/":2}',
        b'{"\\u00e9":1,"\xc3\xa9":2}',
        b'{"\\ud83d\\ude00":1,"\xf0\x9f\x98\x80":2}',
        b'{"x":{"a":1,"b":2,"a":3}}',
        b'[{"a":1},{"b":1,"b":1}]',
        b'{"jsonrpc":"2.0","id":1,"result":{"connected":true,"connected":false}}',
        b'{"result":{"mutating_actions":[],"mutating_\\u0061ctions":["send"]}}',
    ],
)
def test_repeated_keys_are_refused_after_unescaping_at_every_level(frame: bytes) -> None:
    """A key repeated in one object, however it is escaped and however deep, is refused."""
    assert reason(frame) == "duplicate_key"


def test_same_key_in_different_objects_is_fine() -> None:
    """Keys are compared per object: siblings and parents may reuse a name."""
    assert reason(b'{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}') is None


@pytest.mark.parametrize(
    "frame",
    [
        b"\xff",
        b'"\xc0\xaf"',  # overlong '/'
        b'"\xed\xa0\x80"',  # an encoded surrogate
        b'{"a":"\xe2\x82"}',  # truncated sequence
        b'{"\xf5\x80\x80\x80":1}',  # beyond U+10FFFF
    ],
)
def test_invalid_utf8_is_refused(frame: bytes) -> None:
    """Bytes that are not strict UTF-8 are refused before the scan."""
    assert reason(frame) == "invalid_utf8"


@pytest.mark.parametrize("frame", [b'"\\ud800"', b'{"\\udc00":1}', b'"\\ude00\\ud83d"'])
def test_unpaired_surrogate_escapes_are_refused(frame: bytes) -> None:
    """An escape that decodes to an unpaired surrogate is not a Unicode string."""
    assert reason(frame) == "invalid_string"


def test_numbers_are_bounded() -> None:
    """A number of 40 characters passes; 41 are refused (huge integers and exponents)."""
    assert reason(b"1" * MAX_NUMBER_CHARS) is None
    assert reason(b"1" * (MAX_NUMBER_CHARS + 1)) == "number_too_long"
    assert reason(b'{"id":' + b"9" * 60_000 + b"}") == "number_too_long"
    assert reason(b"1e999999") is None  # short: a typed decoder refuses it as out of range


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b" ",
        b"{",
        b"[1,",
        b'{"a"',
        b'{"a":',
        b'"abc',
        b"{}{}",
        b"{} x",
        b"[1,]",
        b"{,}",
        b'{"a":1,}',
        b'{"a" 1}',
        b"{1:2}",
        b"[01]",
        b"[1.]",
        b"[.5]",
        b"[-]",
        b"[+1]",
        b"[1e]",
        b"[NaN]",
        b"[Infinity]",
        b"[tru]",
        b"[True]",
        b"[nul]",
        b"['a']",
        b'["\\x41"]',
        b'["\\u12"]',
        b'["a\x01"]',
        b'["tab\there"]',
        b"\xef\xbb\xbf{}",
        b"\x0b{}",
        "\u00a0{}".encode(),
        b"{}\x00",
    ],
)
def test_malformed_json_is_refused(frame: bytes) -> None:
    """Anything but exactly one RFC 8259 value is refused as malformed (truncation too)."""
    assert reason(frame) == "malformed"


def test_every_truncation_of_a_valid_frame_is_refused() -> None:
    """Cut anywhere, a status response is refused: no prefix of it is itself a value."""
    for cut in range(len(STATUS_RESPONSE)):
        assert reason(STATUS_RESPONSE[:cut]) is not None, cut


# -- differential: Python's json module as the peer --------------------------------------------


def reference_accepts(frame: bytes) -> bool:
    """What the scan should accept, computed independently with Python's json module."""
    if len(frame) > MAX_FRAME_BYTES:
        return False
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError:
        return False
    duplicate = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicate
        if len({key for key, _ in items}) != len(items):
            duplicate = True
        return dict(items)

    def number(token: str) -> float:
        if len(token) > MAX_NUMBER_CHARS:
            raise ValueError("long")
        return float(token)

    def constant(token: str) -> None:
        raise ValueError(token)  # NaN, Infinity: not JSON

    try:
        value = json.loads(
            text,
            object_pairs_hook=pairs,
            parse_int=number,
            parse_float=number,
            parse_constant=constant,
        )
    except (ValueError, RecursionError):
        return False
    # Python's json accepts leading/trailing JSON whitespace only, like the scan.
    return not duplicate and depth(value) <= MAX_NESTING and strings_ok(value)


def depth(value: object) -> int:
    """The nesting depth of a decoded value."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def strings_ok(value: object) -> bool:
    """True when every string (keys too) is valid Unicode (no unpaired surrogate)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(strings_ok(k) and strings_ok(v) for k, v in value.items())
    if isinstance(value, list):
        return all(strings_ok(v) for v in value)
    return True


KEYS = st.sampled_from(["a", "\u0061", "b", "é", "id", "result", "k\u0000", "\ud83d\ude00"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**45), max_value=10**45),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(st.tuples(KEYS, inner), max_size=4),  # pairs: may repeat a key
    ),
    max_leaves=40,
)


def render(value: object, ascii_only: bool) -> str:
    """Serialize, keeping repeated keys (a list of pairs is an object)."""
    if isinstance(value, list) and value and all(isinstance(p, tuple) for p in value):
        body = ",".join(
            f"{json.dumps(k, ensure_ascii=ascii_only)}:{render(v, ascii_only)}" for k, v in value
        )
        return "{" + body + "}"
    if isinstance(value, list):
        return "[" + ",".join(render(v, ascii_only) for v in value) + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


@settings(max_examples=400, deadline=None)
@given(value=VALUES, ascii_only=st.booleans(), wrap=st.integers(min_value=0, max_value=70))
def test_agrees_with_pythons_json_on_generated_documents(
    value: object, ascii_only: bool, wrap: int
) -> None:
    """On generated JSON (repeated keys, escapes, deep wrapping), scan and peer agree."""
    text = "[" * wrap + render(value, ascii_only) + "]" * wrap
    frame = text.encode("utf-8", "surrogatepass")
    assert (reason(frame) is None) == reference_accepts(frame), frame[:200]


@settings(max_examples=600, deadline=None)
@given(frame=st.binary(max_size=64))
def test_agrees_with_pythons_json_on_random_bytes(frame: bytes) -> None:
    """On random short byte strings, scan and peer agree (almost all are refused)."""
    assert (reason(frame) is None) == reference_accepts(frame)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_agrees_with_pythons_json_on_mutated_responses(data: st.DataObject) -> None:
    """One-byte edits of a real status response are judged the same by scan and peer."""
    frame = bytearray(STATUS_RESPONSE)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        pos = data.draw(st.integers(min_value=0, max_value=len(frame) - 1))
        frame[pos] = data.draw(st.sampled_from(b'{}[]":,\\ 0e-.atn"\x80'))
    assert (reason(bytes(frame)) is None) == reference_accepts(bytes(frame))
