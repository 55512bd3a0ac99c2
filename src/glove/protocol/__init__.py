"""Sans-IO wire protocols: length-prefixed frames and the control messages."""

from glove.protocol._frames import HEADER_BYTES, FrameDecoder, encode_frame
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
    "encode",
    "encode_frame",
]
