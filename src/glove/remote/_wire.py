"""The forced executor's wire protocol and its deadline arithmetic (sans-IO).

Framing is :mod:`glove.protocol`'s: a 4-byte big-endian payload length, then the payload,
capped at :data:`EXECUTOR_MAX_FRAME_BYTES` before anything is allocated. A request payload is
one JSON object::

    {"id": 7, "method": "remote_health", "ttl_ms": 2000, "params": {}}

``ttl_ms`` is how long the sender will wait, counted from when it wrote the frame. The
executor cannot see that moment, so it charges the request with everything it can see: the
receive start is taken when the frame's first byte is available, and the request's deadline
is ``receive start + ttl``. A frame whose receipt took the whole TTL (a slow or dribbling
sender) is rejected unrun; otherwise the response must be written by that deadline and no
other. A response is ``{"id": 7, "result": {...}}`` or ``{"id": 7, "error": {"code": ...,
"message": ...}}``, exactly the control protocol's :class:`~glove.protocol.Response`.

Only ``remote_health`` exists. It answers ``{"status": "not_operational"}``, always: the
executor is construction evidence, not a remote launcher. Any other method name, lifecycle
or not, is ``method_not_found``.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from glove.protocol import encode_frame
from glove.protocol.control import ErrorBody, Response, encode
from glove.protocol.errors import MalformedFrame
from glove.remote.errors import TtlExhausted

#: Largest request or response frame payload.
EXECUTOR_MAX_FRAME_BYTES: Final = 64 * 1024
#: Bounds of a request's TTL: at least a millisecond, at most a minute.
MIN_TTL_MS: Final = 1
MAX_TTL_MS: Final = 60_000
#: Largest request id (a JSON number every peer represents exactly).
MAX_REQUEST_ID: Final = 2**53 - 1
#: Longest method name accepted (longer is malformed, not merely unknown).
MAX_METHOD_CHARS: Final = 128
#: The one method, and what it answers.
HEALTH_METHOD: Final = "remote_health"
HEALTH_STATUS: Final = "not_operational"


class ExecutorRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One request to the executor.

    Attributes:
        id: echoed in the response (0..2**53-1).
        method: the method name.
        ttl_ms: how long the sender waits for the response, in milliseconds.
        params: method parameters, each left undecoded (no method reads any today).
    """

    id: int
    method: str
    ttl_ms: int
    params: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)


class HealthResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``remote_health`` result: the executor is not operational, and says so."""

    status: Literal["not_operational"] = HEALTH_STATUS


_decoder: Final = msgspec.json.Decoder(ExecutorRequest)


def decode_executor_request(payload: bytes) -> ExecutorRequest:
    """Decode and bound-check one request payload.

    Raises:
        MalformedFrame: not a request object, or a field out of range (the field is named).
    """
    try:
        request = _decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise MalformedFrame(f"malformed request: {exc}") from exc
    if not 0 <= request.id <= MAX_REQUEST_ID:
        raise MalformedFrame(f"malformed request: `$.id` must be within 0..{MAX_REQUEST_ID}")
    if not MIN_TTL_MS <= request.ttl_ms <= MAX_TTL_MS:
        raise MalformedFrame(
            f"malformed request: `$.ttl_ms` must be within {MIN_TTL_MS}..{MAX_TTL_MS}"
        )
    if not request.method or len(request.method) > MAX_METHOD_CHARS:
        raise MalformedFrame(
            f"malformed request: `$.method` must be 1..{MAX_METHOD_CHARS} characters"
        )
    return request


def request_deadline(request: ExecutorRequest, receive_start: float, received: float) -> float:
    """Convert the request's TTL into an absolute deadline on the executor's monotonic clock.

    ``receive_start`` is when the frame's first byte was available and ``received`` when its
    last byte was; all of that time is subtracted from the TTL.

    Raises:
        TtlExhausted: receiving the frame took the whole TTL (or more).
    """
    ttl_s = request.ttl_ms / 1000
    receive_s = received - receive_start
    if receive_s >= ttl_s:
        raise TtlExhausted(request.id, ttl_s, receive_s)
    return receive_start + ttl_s


def respond(request: ExecutorRequest) -> Response:
    """Answer one request: ``remote_health`` is ``not_operational``, anything else unknown."""
    if request.method == HEALTH_METHOD:
        return Response(id=request.id, result=msgspec.to_builtins(HealthResult()))
    return Response(
        id=request.id,
        error=ErrorBody(
            "method_not_found",
            f"unknown method {request.method!r}: only {HEALTH_METHOD} exists, and it reports "
            f"{HEALTH_STATUS}",
        ),
    )


def encode_response(response: Response) -> bytes:
    """Return the framed response bytes."""
    return encode_frame(encode(response), max_frame_bytes=EXECUTOR_MAX_FRAME_BYTES)


def encode_request(request: ExecutorRequest) -> bytes:
    """Return a framed request (for clients and tests)."""
    return encode_frame(msgspec.json.encode(request), max_frame_bytes=EXECUTOR_MAX_FRAME_BYTES)
