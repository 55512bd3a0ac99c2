"""Sans-IO wire protocols: length-prefixed frames, strict JSON, the control messages.

The frames, the strict JSON, the errors and the limits are light; the codec's Structs load
msgspec. Every name is imported from its module on first use (PEP 562), so a client that
needs only the light parts (``glove capabilities``'s one-shot call) never loads msgspec.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from glove.protocol._frames import HEADER_BYTES, FrameDecoder, encode_frame
    from glove.protocol._json import MAX_JSON_DEPTH, dumps_compact, dumps_pretty, loads_strict
    from glove.protocol._limits import (
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
    from glove.protocol._reply import Reply, ReplyError, decode_reply
    from glove.protocol.control import (
        ERROR_CODES,
        LIMIT_NAMES,
        UNAVAILABLE,
        Cancel,
        Capabilities,
        ErrorBody,
        ErrorCode,
        Event,
        Health,
        HelloParams,
        HelloResult,
        NoParams,
        Request,
        Response,
        StreamEnd,
        decode_client_frame,
        decode_params,
        decode_request,
        decode_response,
        decode_server_frame,
        encode,
        error_response,
        unavailable_capabilities,
    )
    from glove.protocol.errors import (
        DuplicateKey,
        FrameTooLarge,
        InvalidParams,
        MalformedFrame,
        ProtocolError,
        RequestError,
        TruncatedFrame,
    )

#: name -> module of every lazily imported name.
_LAZY: dict[str, str] = {
    "CONTROL_HELLO_DEADLINE_S": "glove.protocol._limits",
    "CONTROL_IDLE_DEADLINE_S": "glove.protocol._limits",
    "CONTROL_MAX_FRAME_BYTES": "glove.protocol._limits",
    "CONTROL_MAX_REQUEST_BYTES": "glove.protocol._limits",
    "CONTROL_MAX_RESPONSE_BYTES": "glove.protocol._limits",
    "CONTROL_READ_DEADLINE_S": "glove.protocol._limits",
    "ERROR_CODE_PATTERN": "glove.protocol._limits",
    "MAX_CLIENT_NAME_CHARS": "glove.protocol._limits",
    "MAX_DEADLINE_MS": "glove.protocol._limits",
    "MAX_ERROR_MESSAGE_CHARS": "glove.protocol._limits",
    "MAX_ERROR_PATH_CHARS": "glove.protocol._limits",
    "MAX_METHOD_CHARS": "glove.protocol._limits",
    "MAX_REQUEST_ID": "glove.protocol._limits",
    "MAX_SECRET_CHARS": "glove.protocol._limits",
    "PROTOCOL_VERSION": "glove.protocol._limits",
    "Reply": "glove.protocol._reply",
    "ReplyError": "glove.protocol._reply",
    "decode_reply": "glove.protocol._reply",
    "ERROR_CODES": "glove.protocol.control",
    "LIMIT_NAMES": "glove.protocol.control",
    "UNAVAILABLE": "glove.protocol.control",
    "Cancel": "glove.protocol.control",
    "Capabilities": "glove.protocol.control",
    "ErrorBody": "glove.protocol.control",
    "ErrorCode": "glove.protocol.control",
    "Event": "glove.protocol.control",
    "Health": "glove.protocol.control",
    "HelloParams": "glove.protocol.control",
    "HelloResult": "glove.protocol.control",
    "NoParams": "glove.protocol.control",
    "Request": "glove.protocol.control",
    "Response": "glove.protocol.control",
    "StreamEnd": "glove.protocol.control",
    "decode_client_frame": "glove.protocol.control",
    "decode_params": "glove.protocol.control",
    "decode_request": "glove.protocol.control",
    "decode_response": "glove.protocol.control",
    "decode_server_frame": "glove.protocol.control",
    "encode": "glove.protocol.control",
    "error_response": "glove.protocol.control",
    "unavailable_capabilities": "glove.protocol.control",
    "DuplicateKey": "glove.protocol.errors",
    "FrameTooLarge": "glove.protocol.errors",
    "InvalidParams": "glove.protocol.errors",
    "MalformedFrame": "glove.protocol.errors",
    "ProtocolError": "glove.protocol.errors",
    "RequestError": "glove.protocol.errors",
    "TruncatedFrame": "glove.protocol.errors",
    "HEADER_BYTES": "glove.protocol._frames",
    "FrameDecoder": "glove.protocol._frames",
    "encode_frame": "glove.protocol._frames",
    "MAX_JSON_DEPTH": "glove.protocol._json",
    "dumps_compact": "glove.protocol._json",
    "dumps_pretty": "glove.protocol._json",
    "loads_strict": "glove.protocol._json",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'glove.protocol' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CONTROL_HELLO_DEADLINE_S",
    "CONTROL_IDLE_DEADLINE_S",
    "CONTROL_MAX_FRAME_BYTES",
    "CONTROL_MAX_REQUEST_BYTES",
    "CONTROL_MAX_RESPONSE_BYTES",
    "CONTROL_READ_DEADLINE_S",
    "ERROR_CODES",
    "ERROR_CODE_PATTERN",
    "HEADER_BYTES",
    "LIMIT_NAMES",
    "MAX_CLIENT_NAME_CHARS",
    "MAX_DEADLINE_MS",
    "MAX_ERROR_MESSAGE_CHARS",
    "MAX_ERROR_PATH_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_METHOD_CHARS",
    "MAX_REQUEST_ID",
    "MAX_SECRET_CHARS",
    "PROTOCOL_VERSION",
    "UNAVAILABLE",
    "Cancel",
    "Capabilities",
    "DuplicateKey",
    "ErrorBody",
    "ErrorCode",
    "Event",
    "FrameDecoder",
    "FrameTooLarge",
    "Health",
    "HelloParams",
    "HelloResult",
    "InvalidParams",
    "MalformedFrame",
    "NoParams",
    "ProtocolError",
    "Reply",
    "ReplyError",
    "Request",
    "RequestError",
    "Response",
    "StreamEnd",
    "TruncatedFrame",
    "decode_client_frame",
    "decode_params",
    "decode_reply",
    "decode_request",
    "decode_response",
    "decode_server_frame",
    "dumps_compact",
    "dumps_pretty",
    "encode",
    "encode_frame",
    "error_response",
    "loads_strict",
    "unavailable_capabilities",
]
