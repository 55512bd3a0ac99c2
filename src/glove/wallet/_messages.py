"""The wallet status wire messages, strict both ways (sans-IO).

The guest sends one JSON-RPC 2.0 request, and only this one::

    {"jsonrpc": "2.0", "id": 7, "method": "wallet_status", "params": {}}

``params`` is an exact empty object (or absent): the guest names no session, plan, digest
or wallet, so it cannot submit a binding; the bridge derives the binding on the host. Any
unknown field, at any level, refuses the frame.

The bridge answers with the sanitized v1 status, or with one generic error that carries no
reason (the reason stays on the host)::

    {"jsonrpc":"2.0","id":7,"result":{"schema_version":1,"connected":true,
     "chain":"eip155:8453","available_actions":["status"],"mutating_actions":[]}}
    {"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"wallet status unavailable"}}

``mutating_actions`` is typed ``tuple[()]``: it is empty by construction, on encoding and
on decoding, not by convention. Every decode runs :func:`check_structure` first, so a key
repeated inside the raw ``result`` object cannot choose which value msgspec keeps.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

import msgspec

from glove.wallet._structure import check_structure
from glove.wallet.errors import WalletFrameError

JSONRPC_VERSION: Final = "2.0"
STATUS_METHOD: Final = "wallet_status"
SCHEMA_VERSION: Final = 1
STATUS_ACTION: Final = "status"
UNAVAILABLE_CODE: Final = -32001
UNAVAILABLE_MESSAGE: Final = "wallet status unavailable"

MAX_REQUEST_ID: Final = 2**53 - 1
"""Largest integer id, in magnitude: what every JSON peer represents exactly."""
MAX_REQUEST_ID_CHARS: Final = 64
"""Longest string id, in characters."""

CHAIN_ID_PATTERN: Final = r"^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}\Z"
"""A CAIP-2 chain id (``eip155:8453``): the only chain text a response may carry."""
CHAIN_ID_RE: Final = re.compile(CHAIN_ID_PATTERN)

RequestId = (
    Annotated[int, msgspec.Meta(ge=-MAX_REQUEST_ID, le=MAX_REQUEST_ID)]
    | Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_REQUEST_ID_CHARS)]
)


class EmptyParams(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The request's ``params``: an exact empty object."""


class StatusRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The one request the bridge accepts."""

    jsonrpc: Literal["2.0"]
    id: RequestId
    method: str
    params: EmptyParams = msgspec.field(default_factory=EmptyParams)


class StatusResult(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """The sanitized v1 status: every field a response may carry, and nothing else."""

    schema_version: Literal[1] = SCHEMA_VERSION
    connected: bool
    chain: Annotated[str, msgspec.Meta(pattern=CHAIN_ID_PATTERN)]
    available_actions: tuple[Literal["status"]] = (STATUS_ACTION,)
    mutating_actions: tuple[()] = ()


class ErrorObject(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The generic error body: a code and a fixed message, never a reason."""

    code: int
    message: str


class _ResultResponse(msgspec.Struct, frozen=True):
    jsonrpc: str
    id: int | str
    result: StatusResult


class _ErrorResponse(msgspec.Struct, frozen=True):
    jsonrpc: str
    id: int | str
    error: ErrorObject


class _RawResponse(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    jsonrpc: Literal["2.0"]
    id: RequestId
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: ErrorObject | msgspec.UnsetType = msgspec.UNSET


class StatusReply(msgspec.Struct, frozen=True):
    """A decoded response: ``result`` is None when the bridge said "unavailable"."""

    id: int | str
    result: StatusResult | None


_REQUEST_DECODER: Final = msgspec.json.Decoder(StatusRequest)
_RAW_RESPONSE_DECODER: Final = msgspec.json.Decoder(_RawResponse)
_RESULT_DECODER: Final = msgspec.json.Decoder(StatusResult)
_ENCODER: Final = msgspec.json.Encoder()


def decode_request(frame: bytes) -> StatusRequest:
    """Scan then strictly decode one request frame.

    Raises:
        WalletFrameError: the structural scan refused it, it does not match the schema
            (``schema``: unknown or missing field, wrong type) or it names another method
            (``unknown_method``).
    """
    check_structure(frame)
    try:
        request = _REQUEST_DECODER.decode(frame)
    except msgspec.ValidationError as exc:
        raise WalletFrameError("schema", str(exc)) from exc
    except msgspec.DecodeError as exc:
        raise WalletFrameError("malformed", str(exc)) from exc
    if request.method != STATUS_METHOD:
        raise WalletFrameError("unknown_method", f"only {STATUS_METHOD!r} is accepted")
    return request


def encode_request(request_id: int | str) -> bytes:
    """Return the one request frame payload the bridge accepts."""
    return _ENCODER.encode(StatusRequest(JSONRPC_VERSION, request_id, STATUS_METHOD))


def encode_status(request_id: int | str, result: StatusResult) -> bytes:
    """Return a status response payload."""
    return _ENCODER.encode(_ResultResponse(JSONRPC_VERSION, request_id, result))


def encode_unavailable(request_id: int | str) -> bytes:
    """Return the generic "unavailable" response payload (no reason, no cached status)."""
    error = ErrorObject(UNAVAILABLE_CODE, UNAVAILABLE_MESSAGE)
    return _ENCODER.encode(_ErrorResponse(JSONRPC_VERSION, request_id, error))


def decode_reply(frame: bytes) -> StatusReply:
    """Scan then strictly decode one response frame, the raw ``result`` included.

    Raises:
        WalletFrameError: the structural scan refused it (keys inside ``result`` too), it
            does not match the schema, or it holds both or neither of result and error.
    """
    check_structure(frame)
    try:
        raw = _RAW_RESPONSE_DECODER.decode(frame)
        has_result = raw.result is not msgspec.UNSET
        if has_result == (raw.error is not msgspec.UNSET):
            raise WalletFrameError("schema", "a response holds exactly one of result and error")
        if isinstance(raw.result, msgspec.Raw):
            return StatusReply(raw.id, _RESULT_DECODER.decode(raw.result))
    except msgspec.ValidationError as exc:
        raise WalletFrameError("schema", str(exc)) from exc
    except msgspec.DecodeError as exc:
        raise WalletFrameError("malformed", str(exc)) from exc
    error = raw.error
    if not isinstance(error, ErrorObject):  # unreachable: exactly one of the two is set
        raise WalletFrameError("schema", "a response holds exactly one of result and error")
    if error.code != UNAVAILABLE_CODE or error.message != UNAVAILABLE_MESSAGE:
        raise WalletFrameError("schema", "an error other than the generic unavailable error")
    return StatusReply(raw.id, None)
