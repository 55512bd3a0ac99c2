"""The sans-IO newline-delimited JSON-RPC codec."""

from __future__ import annotations

import contextlib
import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from glove.mcp._framing import (
    OVERSIZED,
    LineSplitter,
    decode_message,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)
from glove.mcp._messages import ErrorResponse, Notification, Request, Response
from glove.mcp.errors import INVALID_REQUEST, PARSE_ERROR, MalformedMessage

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


def test_splitter_cuts_lines_and_skips_blank_ones() -> None:
    """Frames come out in order, without their newline or carriage return."""
    splitter = LineSplitter(100)
    assert splitter.feed(b'{"a":1}\r\n\n  \n{"b"') == [b'{"a":1}']
    assert splitter.feed(b":2}\n") == [b'{"b":2}']
    assert splitter.pending_bytes == 0


def test_splitter_reports_an_oversized_line_once_and_recovers() -> None:
    """A line over the bound is one OVERSIZED event; the next line is read normally."""
    splitter = LineSplitter(8)
    assert splitter.feed(b"0123456789") == [OVERSIZED]
    assert splitter.pending_bytes == 0
    assert splitter.feed(b"more bytes of the same line") == []
    assert splitter.feed(b"\nok\n") == [b"ok"]


def test_splitter_bound_is_exact() -> None:
    """A line of exactly the bound passes; one byte more does not."""
    assert LineSplitter(4).feed(b"abcd\n") == [b"abcd"]
    assert LineSplitter(4).feed(b"abcde\n") == [OVERSIZED]


@given(st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=8))
def test_splitter_whole_equals_byte_at_a_time(lines: list[bytes]) -> None:
    """Feeding the stream whole or one byte at a time yields the same frames."""
    stream = b"".join(line + b"\n" for line in lines)
    whole = LineSplitter(16).feed(stream)
    one_by_one: list[object] = []
    splitter = LineSplitter(16)
    for index in range(len(stream)):
        one_by_one.extend(splitter.feed(stream[index : index + 1]))
    assert whole == one_by_one


def test_decode_kinds() -> None:
    """Requests, notifications, results and errors decode to their own types."""
    assert decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1}}') == Request(
        1, "m", {"x": 1}
    )
    assert decode_message(b'{"jsonrpc":"2.0","method":"n"}') == Notification("n", None)
    response = decode_message(b'{"jsonrpc":"2.0","id":"a","result":{"k":[1]}}')
    assert isinstance(response, Response)
    assert json.loads(bytes(response.result)) == {"k": [1]}
    error = decode_message(b'{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}')
    assert isinstance(error, ErrorResponse)
    assert error.id is None


@pytest.mark.parametrize(
    ("frame", "code", "request_id"),
    [
        (b"{not json", PARSE_ERROR, None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"m"}]', INVALID_REQUEST, None),
        (b'{"jsonrpc":"1.0","id":7,"method":"m"}', INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":3,"method":"m","params":[1]}', INVALID_REQUEST, 3),
        (b'{"jsonrpc":"2.0","id":4}', INVALID_REQUEST, 4),
        (b'{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":""}}', -32600, None),
        (b'"just a string"', INVALID_REQUEST, None),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":'
            + b"[" * 5000
            + b"]" * 5000
            + b"}}",
            INVALID_REQUEST,
            None,
        ),
    ],
)
def test_decode_refuses_with_the_right_code(
    frame: bytes, code: int, request_id: int | None
) -> None:
    """Each malformed frame raises MalformedMessage with its JSON-RPC code and readable id."""
    with pytest.raises(MalformedMessage) as info:
        decode_message(frame)
    assert info.value.code == code
    assert info.value.request_id == request_id


@given(json_values)
def test_result_round_trip(value: object) -> None:
    """An encoded result decodes to the same value, on one line."""
    frame = encode_result(9, value)
    assert frame.count(b"\n") == 1
    assert frame.endswith(b"\n")
    response = decode_message(frame[:-1])
    assert isinstance(response, Response)
    assert msgspec.json.decode(response.result) == value


def test_encoders_write_wire_shapes() -> None:
    """Requests, notifications and errors have exactly the JSON-RPC members they need."""
    assert json.loads(encode_request(1, "ping", None)) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "ping",
    }
    assert json.loads(encode_notification("n", {"a": 1})) == {
        "jsonrpc": "2.0",
        "method": "n",
        "params": {"a": 1},
    }
    assert json.loads(encode_error(None, -32700, "bad")) == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "bad"},
    }
    assert json.loads(encode_error("x", 1, "m", {"d": 2}))["error"]["data"] == {"d": 2}


@given(st.binary(max_size=200))
def test_decode_never_raises_anything_else(data: bytes) -> None:
    """Arbitrary bytes either decode or raise MalformedMessage."""
    with contextlib.suppress(MalformedMessage):
        decode_message(data)
