"""The ``gloved`` control protocol: message types and their sans-IO codec.

Every frame payload is a JSON object. A request is ``{"id": int, "method": str,
"params": {...}}``; a response is ``{"id": int, "result": ...}`` or ``{"id": int,
"error": {"code": str, "message": str}}``. Methods a daemon does not know get a
``method_not_found`` error and the connection stays open; a frame that is not a valid
request is a protocol error: the peer gets a typed error and the connection closes.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from glove.protocol.errors import MalformedFrame

CONTROL_MAX_FRAME_BYTES: Final = 1024 * 1024
CONTROL_READ_DEADLINE_S: Final = 5.0
CONTROL_IDLE_DEADLINE_S: Final = 300.0


class Request(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One control request."""

    id: int
    method: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)


class ErrorBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A typed error: a stable machine code and a message for people."""

    code: str
    message: str


class Response(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The reply to one request (``id`` 0 for errors about a frame with no usable id)."""

    id: int
    result: Any = None
    error: ErrorBody | None = None


class Health(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``health`` result."""

    status: str
    version: str
    pid: int
    uptime_s: float


_request_decoder: Final = msgspec.json.Decoder(Request)
_response_decoder: Final = msgspec.json.Decoder(Response)
_encoder: Final = msgspec.json.Encoder()


def decode_request(payload: bytes) -> Request:
    """Decode a request payload.

    Raises:
        MalformedFrame: not a JSON object of the request shape (names the bad field).
    """
    try:
        return _request_decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise MalformedFrame(f"malformed request: {exc}") from exc


def decode_response(payload: bytes) -> Response:
    """Decode a response payload.

    Raises:
        MalformedFrame: not a JSON object of the response shape.
    """
    try:
        return _response_decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise MalformedFrame(f"malformed response: {exc}") from exc


def encode(message: msgspec.Struct) -> bytes:
    """Encode a request or response to its JSON payload."""
    return _encoder.encode(message)
