"""The wire messages: one strict request in, the sanitized v1 status or a generic error out."""

from __future__ import annotations

import json

import msgspec
import pytest

from glove.wallet import (
    WalletFrameError,
    decode_reply,
    decode_request,
    encode_request,
)
from glove.wallet._messages import (
    MAX_REQUEST_ID,
    StatusResult,
    encode_status,
    encode_unavailable,
)


def refusal(frame: bytes) -> str:
    """The reason ``decode_request`` refuses ``frame`` with (fails if it accepts)."""
    with pytest.raises(WalletFrameError) as caught:
        decode_request(frame)
    return caught.value.reason


def test_the_one_request_decodes() -> None:
    """The canonical request, with params or without, decodes to its id."""
    assert decode_request(encode_request(7)).id == 7
    assert decode_request(b'{"jsonrpc":"2.0","id":"a-1","method":"wallet_status"}').id == "a-1"
    request = json.loads(encode_request(9))
    assert request == {"jsonrpc": "2.0", "id": 9, "method": "wallet_status", "params": {}}


@pytest.mark.parametrize(
    "params",
    [
        {"session_digest": "blake3:" + "1" * 64},
        {"plan_digest": "blake3:" + "2" * 64},
        {"session_id": "session-1"},
        {"plan_generation": 5},
        {"wallet": "0x00"},
    ],
)
def test_the_guest_cannot_submit_a_binding(params: dict[str, object]) -> None:
    """Session or plan digests (any params at all) are unknown fields: refused."""
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "wallet_status", "params": params})
    assert refusal(frame.encode()) == "schema"


@pytest.mark.parametrize(
    "frame",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"wallet_status","params":{},"extra":1}',
        b'{"jsonrpc":"2.0","id":1,"method":"wallet_status","session":"s"}',
        b'{"jsonrpc":"1.0","id":1,"method":"wallet_status"}',
        b'{"id":1,"method":"wallet_status"}',
        b'{"jsonrpc":"2.0","method":"wallet_status"}',
        b'{"jsonrpc":"2.0","id":null,"method":"wallet_status"}',
        b'{"jsonrpc":"2.0","id":true,"method":"wallet_status"}',
        b'{"jsonrpc":"2.0","id":1.5,"method":"wallet_status"}',
        b'{"jsonrpc":"2.0","id":"","method":"wallet_status"}',
        b'{"jsonrpc":"2.0","id":1,"method":"wallet_status","params":[]}',
        b'{"jsonrpc":"2.0","id":1,"method":"wallet_status","params":null}',
        b'[{"jsonrpc":"2.0","id":1,"method":"wallet_status"}]',
        b'{"jsonrpc":"2.0","id":1e999,"method":"wallet_status"}',
    ],
)
def test_unknown_missing_or_mistyped_fields_are_refused(frame: bytes) -> None:
    """Strict decoding: unknown fields, missing ones, wrong types and batches are refused."""
    assert refusal(frame) == "schema"


def test_id_bounds() -> None:
    """Integer ids are bounded to what every JSON peer holds exactly; string ids to 64."""
    ok = b'{"jsonrpc":"2.0","id":%d,"method":"wallet_status"}'
    assert decode_request(ok % MAX_REQUEST_ID).id == MAX_REQUEST_ID
    assert refusal(ok % (MAX_REQUEST_ID + 1)) == "schema"
    long_id = json.dumps({"jsonrpc": "2.0", "id": "x" * 65, "method": "wallet_status"})
    assert refusal(long_id.encode()) == "schema"


@pytest.mark.parametrize("method", ["wallet_send", "wallet_sign", "tools/list", "WALLET_STATUS"])
def test_only_wallet_status_is_accepted(method: str) -> None:
    """Every other method, mutating or not, is refused."""
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method})
    assert refusal(frame.encode()) == "unknown_method"


def test_requests_pass_the_structural_scan_first() -> None:
    """A repeated key that strict decoding alone would settle (last wins) is refused."""
    frame = b'{"jsonrpc":"2.0","id":1,"method":"wallet_send","method":"wallet_status"}'
    assert refusal(frame) == "duplicate_key"
    assert msgspec.json.decode(frame)["method"] == "wallet_status"  # what msgspec would do


def test_status_response_has_exactly_the_v1_fields() -> None:
    """The result holds the five v1 fields: one action, ``status``, and no mutating one."""
    body = json.loads(encode_status(3, StatusResult(connected=False, chain="eip155:1")))
    assert body == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {
            "schema_version": 1,
            "connected": False,
            "chain": "eip155:1",
            "available_actions": ["status"],
            "mutating_actions": [],
        },
    }


def test_mutating_actions_are_structurally_empty() -> None:
    """``mutating_actions`` is typed empty: a non-empty list cannot be decoded at all."""
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            b'{"connected":true,"chain":"eip155:1","mutating_actions":["send"]}',
            type=StatusResult,
        )
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            b'{"connected":true,"chain":"eip155:1","available_actions":["status","send"]}',
            type=StatusResult,
        )


def test_unavailable_response_carries_no_reason_and_no_status() -> None:
    """The generic error is fixed text: no reason, no result, no cached status."""
    body = json.loads(encode_unavailable("r"))
    assert body == {
        "jsonrpc": "2.0",
        "id": "r",
        "error": {"code": -32001, "message": "wallet status unavailable"},
    }


def test_replies_round_trip() -> None:
    """A status and an unavailable error decode back strictly."""
    reply = decode_reply(encode_status(4, StatusResult(connected=True, chain="eip155:8453")))
    assert reply.id == 4
    assert reply.result is not None
    assert reply.result.connected is True
    assert decode_reply(encode_unavailable(4)).result is None


@pytest.mark.parametrize(
    "frame",
    [
        # a repeated key inside the raw result: msgspec alone would keep "false"
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":1,"connected":true,'
            b'"connected":false,"chain":"eip155:1","available_actions":["status"],'
            b'"mutating_actions":[]}}'
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":1,"connected":true,'
            b'"chain":"eip155:1","available_actions":["status"],"mutating_actions":[],'
            b'"wallet_address":"0x00"}}'
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":2,"connected":true,'
            b'"chain":"eip155:1","available_actions":["status"],"mutating_actions":[]}}'
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":1,"connected":true,'
            b'"chain":"https://rpc","available_actions":["status"],"mutating_actions":[]}}'
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":1,"connected":true,'
            b'"chain":"eip155:1\\n","available_actions":["status"],"mutating_actions":[]}}'
        ),
        b'{"jsonrpc":"2.0","id":1}',
        (
            b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":-32001,'
            b'"message":"wallet status unavailable"}}'
        ),
        b'{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"provider said 503"}}',
        (
            b'{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"wallet status unavailable",'
            b'"data":{"reason":"stale"}}}'
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"result":{"schema_version":1,"connected":1,'
            b'"chain":"eip155:1","available_actions":["status"],"mutating_actions":[]}}'
        ),
    ],
)
def test_malformed_or_unsanitized_replies_are_refused(frame: bytes) -> None:
    """Replies with repeated, extra, wrong or leaky fields do not decode."""
    with pytest.raises(WalletFrameError):
        decode_reply(frame)
