"""Sans-IO wire protocols: length-prefixed frames, strict JSON, the control messages."""

from glove.protocol._frames import HEADER_BYTES, FrameDecoder, encode_frame
from glove.protocol._json import MAX_JSON_DEPTH, dumps_compact, dumps_pretty, loads_strict
from glove.protocol.control import (
    CONTROL_MAX_FRAME_BYTES,
    ErrorBody,
    Health,
    Request,
    Response,
    decode_request,
    decode_response,
    encode,
)
from glove.protocol.errors import FrameTooLarge, MalformedFrame, ProtocolError, TruncatedFrame

__all__ = [
    "CONTROL_MAX_FRAME_BYTES",
    "HEADER_BYTES",
    "MAX_JSON_DEPTH",
    "ErrorBody",
    "FrameDecoder",
    "FrameTooLarge",
    "Health",
    "MalformedFrame",
    "ProtocolError",
    "Request",
    "Response",
    "TruncatedFrame",
    "decode_request",
    "decode_response",
    "dumps_compact",
    "dumps_pretty",
    "encode",
    "encode_frame",
    "loads_strict",
]
