"""The ``gloved`` control protocol v1: message types, error codes and their sans-IO codec.

Every frame (``glove.protocol._frames``) carries one JSON object. What a client sends::

    {"id": 1, "method": "hello", "params": {"secret": "<hex>", "client": "sage/1.2", "protocol": 1}}
    {"id": 2, "method": "session.status", "params": {"session_id": "..."}, "deadline_ms": 2000}
    {"id": 3, "cancel": true}

What the server sends::

    {"id": 2, "result": {...}}                        the answer (ends the request)
    {"id": 2, "error": {"code": "...", "message": "...", "data": {...}}}   a typed refusal (ends it)
    {"id": 4, "event": {...}}                         one item of a stream (then a result or error)

Decoding is two steps, always in this order: strict JSON first (``loads_strict``: one value,
no repeated key at any depth, also after unescaping, bounded nesting), then typed decoding of
the envelope (``Request``/``Cancel``) and, per method, of ``params`` (a msgspec Struct with
``forbid_unknown_fields``). Envelope errors are protocol errors: the connection ends. A
``params`` error is an :class:`~glove.protocol.errors.InvalidParams` naming the path
(``$.params.limit``) and only that request is refused.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal, TypeVar

import msgspec

from glove.protocol._json import loads_strict

# The limits live in _limits (no msgspec); every name stays importable from here too.
from glove.protocol._limits import (  # noqa: F401 - re-exported
    CONTROL_HELLO_DEADLINE_S,
    CONTROL_IDLE_DEADLINE_S,
    CONTROL_MAX_FRAME_BYTES,
    CONTROL_MAX_REQUEST_BYTES,
    CONTROL_MAX_RESPONSE_BYTES,
    CONTROL_READ_DEADLINE_S,
    ERROR_CODE_PATTERN,
    MAX_CLIENT_NAME_CHARS,
    MAX_DEADLINE_MS,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_ERROR_PATH_CHARS,
    MAX_METHOD_CHARS,
    MAX_REQUEST_ID,
    MAX_SECRET_CHARS,
    PROTOCOL_VERSION,
)
from glove.protocol.errors import DuplicateKey, InvalidParams, MalformedFrame

RequestId = Annotated[int, msgspec.Meta(ge=1, le=MAX_REQUEST_ID)]
MethodName = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_METHOD_CHARS)]
DeadlineMs = Annotated[int, msgspec.Meta(ge=1, le=MAX_DEADLINE_MS)]
ErrorCodeName = Annotated[str, msgspec.Meta(pattern=ERROR_CODE_PATTERN)]


class ErrorCode(msgspec.Struct, frozen=True):
    """One row of the error table: the code, whether the connection closes, what it means."""

    code: str
    closes: bool
    meaning: str


#: Every code the protocol itself sends (handlers add their own through ``MethodError``).
ERROR_CODES: Final[tuple[ErrorCode, ...]] = (
    ErrorCode("peer_rejected", True, "the peer is another uid (SO_PEERCRED); nothing was read"),
    ErrorCode(
        "unauthenticated", True, "no hello first, a wrong or missing secret, or no hello in time"
    ),
    ErrorCode("unsupported_protocol", True, "hello asked for a protocol version this daemon lacks"),
    ErrorCode(
        "busy",
        True,
        "too many connections; with a request id: too many requests in flight (stays open)",
    ),
    ErrorCode("frame_too_large", True, "the frame's declared length exceeds the request cap"),
    ErrorCode(
        "truncated_frame",
        True,
        "the stream ended inside a frame, or a frame did not complete within the read deadline",
    ),
    ErrorCode(
        "malformed_frame", True, "the payload is not strict JSON or not a request/cancel object"
    ),
    ErrorCode("duplicate_key", True, "the payload's JSON repeats a key in one object"),
    ErrorCode(
        "method_not_found",
        False,
        "no such method (or a lifecycle method while the runtime is not operational)",
    ),
    ErrorCode(
        "invalid_params", False, "params do not match the method's type; data.path names the field"
    ),
    ErrorCode(
        "deadline_exceeded", False, "the request's deadline passed before the handler finished"
    ),
    ErrorCode(
        "internal_error", False, "the handler failed; the daemon logged it and keeps serving"
    ),
    ErrorCode("cancelled", False, "the client cancelled the request with a cancel frame"),
    ErrorCode("stream_overflow", False, "the client read a stream too slowly; the stream ended"),
    ErrorCode("shutting_down", True, "the daemon is stopping; the request did not complete"),
)
CODES: Final = frozenset(row.code for row in ERROR_CODES)
#: Codes only the protocol may send: a handler's ``MethodError`` may not use them.
RESERVED_CODES: Final = CODES - {"busy", "invalid_params", "deadline_exceeded", "internal_error"}


class Request(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One control request; ``params`` stays raw until the method's own type decodes it."""

    id: RequestId
    method: MethodName
    params: Any = msgspec.field(default_factory=dict)
    deadline_ms: DeadlineMs | None = None


class Cancel(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Cancel the request (a stream, usually) with this id."""

    id: RequestId
    cancel: Literal[True]


class ErrorBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A typed error: a stable machine code, a message for people, optional structured data."""

    code: str
    message: str
    data: Any = None


class Response(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The reply to one request (``id`` 0 for errors about a frame with no usable id)."""

    id: int
    result: Any = None
    error: ErrorBody | None = None


class Event(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One item of a streamed reply."""

    id: RequestId
    event: Any


class NoParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The params of a method that takes none (``{}`` or absent)."""


class HelloParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``hello``: the bootstrap secret (hex), who the client is, the protocol it speaks."""

    secret: Annotated[str, msgspec.Meta(max_length=MAX_SECRET_CHARS)]
    client: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CLIENT_NAME_CHARS)]
    protocol: int


class HelloResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``hello`` result: who answers, and the methods available on this connection."""

    server: str
    version: str
    protocol: int
    pid: int
    methods: list[str]


class Health(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``health`` result."""

    status: str
    version: str
    pid: int
    uptime_s: float


#: The six limits of a plan, in the order ``capabilities`` reports their mechanisms.
LIMIT_NAMES: Final = (
    "wall_time_s",
    "cpu_time_s",
    "memory_bytes",
    "pids",
    "disk_bytes",
    "output_bytes",
)
#: The mechanism of a limit this host cannot enforce.
UNAVAILABLE: Final = "unavailable"


class Capabilities(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``capabilities`` result: what this daemon can run, and how it enforces limits.

    ``schema_version`` is 1 once both the Linux runtime and the library store are
    constructed, else 0; ``limits`` maps each of
    :data:`LIMIT_NAMES` to its mechanism on this host (``"cgroup2:memory.max"``) or
    ``"unavailable"``; ``protocol`` and ``lifecycle_operational`` are filled by the server
    (from the registry's predicate), so they cannot disagree with ``hello``'s method list.
    """

    schema_version: int
    protocol: int
    lifecycle_operational: bool
    runtimes: list[str]
    limits: dict[str, str]
    networks: list[str]
    terminals: list[str]
    #: Why the lifecycle is not operational (null when it is).
    reason: str | None = None
    #: The backend the daemon composed: ``linux``, ``macos`` or ``remote_linux_container``.
    backend: str = "linux"


def unavailable_capabilities() -> Capabilities:
    """Capabilities of a daemon with no runtime constructed: nothing can run."""
    return Capabilities(
        schema_version=0,
        protocol=PROTOCOL_VERSION,
        lifecycle_operational=False,
        runtimes=[],
        limits=dict.fromkeys(LIMIT_NAMES, UNAVAILABLE),
        networks=[],
        terminals=[],
    )


class StreamEnd(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The final frame of a stream that ended normally: how many events it carried."""

    events: int


_server_frame_keys: Final = frozenset({"result", "error", "event"})
_encoder: Final = msgspec.json.Encoder()
_response_decoder: Final = msgspec.json.Decoder(Response)
_AT_PATH: Final = re.compile(r" - at `(\$[^`]*)`$")
_FIELD: Final = re.compile(r"^Object (?:contains unknown|missing required) field `(.*)`$", re.S)
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

T = TypeVar("T")


# The strict decoder reads the raw object to refuse it precisely, before a type applies.
def _strict_object(payload: bytes, what: str) -> dict[str, Any]:
    value = loads_strict(payload, MalformedFrame, duplicate_error=DuplicateKey)
    if not isinstance(value, dict):
        raise MalformedFrame(f"malformed {what}: expected a JSON object, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _convert(obj: dict[str, Any], kind: type[T], what: str) -> T:
    try:
        return msgspec.convert(obj, kind)
    except msgspec.ValidationError as exc:
        raise MalformedFrame(f"malformed {what}: {exc}") from exc


def decode_client_frame(payload: bytes) -> Request | Cancel:
    """Decode what a client sent: a request or a cancel.

    Raises:
        DuplicateKey: a key repeated in one object, at any depth (``params`` included).
        MalformedFrame: not strict JSON, not an object, or not of the request/cancel shape.
    """
    obj = _strict_object(payload, "request")
    if "cancel" in obj:
        return _convert(obj, Cancel, "cancel")
    return _convert(obj, Request, "request")


def decode_request(payload: bytes) -> Request:
    """Decode a request (a cancel is refused).

    Raises:
        DuplicateKey: a key repeated in one object.
        MalformedFrame: not strict JSON or not of the request shape.
    """
    return _convert(_strict_object(payload, "request"), Request, "request")


def decode_params(raw: Any, params_type: type[T]) -> T:
    """Decode a request's raw ``params`` into the method's Struct (no coercion).

    Raises:
        InvalidParams: a wrong type, a missing or unknown field, a bound not kept; ``path``
            names the field as ``$.params.<field>``.
    """
    try:
        return msgspec.convert(raw, params_type)
    except msgspec.ValidationError as exc:
        message, path = params_error(str(exc))
        raise InvalidParams(message, path) from exc


def params_error(detail: str) -> tuple[str, str]:
    """Turn a msgspec validation message into ``(message, $.params path)``."""
    at = _AT_PATH.search(detail)
    path = "$" if at is None else at.group(1)
    message = detail if at is None else detail[: at.start()]
    field = _FIELD.match(message)
    if field is not None:
        name = field.group(1)
        path += f".{name}" if _IDENTIFIER.match(name) else f"[{msgspec.json.encode(name).decode()}]"
    path = "$.params" + path[1:]
    if len(path) > MAX_ERROR_PATH_CHARS:
        path = path[: MAX_ERROR_PATH_CHARS - 3] + "..."
    return clip(f"{message} at {path}"), path


def decode_server_frame(payload: bytes) -> Response | Event:
    """Decode what a server sent: a response (result or error) or a stream event.

    Raises:
        DuplicateKey: a key repeated in one object.
        MalformedFrame: not strict JSON, or not exactly one of ``result``/``error``/``event``.
    """
    obj = _strict_object(payload, "reply")
    present = _server_frame_keys & obj.keys()
    if len(present) != 1:
        raise MalformedFrame(
            "malformed reply: exactly one of result, error and event must be present, "
            f"found {sorted(present) or 'none'}"
        )
    if "event" in present:
        return _convert(obj, Event, "event")
    response = _convert(obj, Response, "reply")
    if response.error is not None and re.match(ERROR_CODE_PATTERN, response.error.code) is None:
        raise MalformedFrame(f"malformed reply: error code {clip(response.error.code)!r}")
    return response


def decode_response(payload: bytes) -> Response:
    """Decode a response payload (the plain typed decoder; see ``decode_server_frame``).

    Raises:
        MalformedFrame: not a JSON object of the response shape.
    """
    try:
        return _response_decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise MalformedFrame(f"malformed response: {exc}") from exc


def error_response(request_id: int, code: str, message: str, data: Any = None) -> Response:
    """A response carrying the typed error ``code`` (the message clipped to its bound)."""
    return Response(id=request_id, error=ErrorBody(code, clip(message), data))


def clip(text: str, limit: int = MAX_ERROR_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis marks a cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def encode(message: msgspec.Struct) -> bytes:
    """Encode a message to its JSON payload (Structs nested in ``Any`` fields included)."""
    return _encoder.encode(message)
