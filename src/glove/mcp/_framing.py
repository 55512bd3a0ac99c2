"""Sans-IO codec for newline-delimited JSON-RPC 2.0, the MCP stdio framing.

Bytes go in, frames and messages come out; nothing here touches a file descriptor.
Two layers, both bounded:

* :class:`LineSplitter` cuts a byte stream into lines no longer than its bound. A longer
  line is reported once as :data:`OVERSIZED` and then discarded up to its newline, so a
  peer that keeps talking after a bad frame can still be answered.
* :func:`decode_message` turns one line into a typed message or raises
  :class:`~glove.mcp.errors.MalformedMessage` carrying the JSON-RPC code to answer with
  (-32700 for bytes that are not JSON, -32600 for JSON that is not a JSON-RPC 2.0 message,
  batches included: MCP removed them in 2025-06-18) and the request id when readable.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from glove.mcp._messages import (
    JSONRPC_VERSION,
    ErrorObject,
    ErrorResponse,
    McpObject,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from glove.mcp.errors import PARSE_ERROR, MalformedMessage

NEWLINE: Final = b"\n"


class _Oversized:
    """Marker for a line that exceeded the bound (a singleton, see :data:`OVERSIZED`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OVERSIZED"


OVERSIZED: Final = _Oversized()

Frame = bytes | _Oversized


class LineSplitter:
    """Split a byte stream into newline-terminated frames of at most ``max_frame_bytes``.

    The bound is checked before the buffer grows past it, so a peer that never sends a
    newline costs at most ``max_frame_bytes`` of memory. Blank lines are skipped and a
    trailing carriage return is removed.
    """

    __slots__ = ("_buffer", "_discarding", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._discarding = False

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished line held in the buffer."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        """Consume ``data`` and return the frames it completed, in order."""
        frames: list[Frame] = []
        start = 0
        end = len(data)
        while start < end:
            newline = data.find(NEWLINE, start)
            if newline < 0:
                self._hold(data, start, end, frames)
                break
            self._hold(data, start, newline, frames)
            if self._discarding:
                self._discarding = False
            else:
                line = bytes(self._buffer).rstrip(b"\r")
                if line.strip():
                    frames.append(line)
            self._buffer.clear()
            start = newline + 1
        return frames

    def _hold(self, data: bytes, start: int, end: int, frames: list[Frame]) -> None:
        if self._discarding:
            return
        if len(self._buffer) + (end - start) > self.max_frame_bytes:
            self._buffer.clear()
            self._discarding = True
            frames.append(OVERSIZED)
            return
        self._buffer += data[start:end]


class _Wire(msgspec.Struct, frozen=True):
    """Every member a JSON-RPC 2.0 message may carry; which ones are set decides its kind."""

    jsonrpc: str | msgspec.UnsetType = msgspec.UNSET
    id: RequestId | msgspec.UnsetType | None = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    params: McpObject | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: ErrorObject | msgspec.UnsetType = msgspec.UNSET


class _IdOnly(msgspec.Struct):
    id: RequestId | None = None


_WIRE_DECODER: Final = msgspec.json.Decoder(_Wire)
_ID_DECODER: Final = msgspec.json.Decoder(_IdOnly)


def _readable_id(line: bytes) -> RequestId | None:
    try:
        return _ID_DECODER.decode(line).id
    except msgspec.DecodeError:
        return None


def decode_message(line: bytes) -> Message:
    """Decode one frame into a typed JSON-RPC message.

    Raises:
        MalformedMessage: the frame is not JSON (code -32700), or it is a batch, nested too
            deeply, or otherwise not a JSON-RPC 2.0 request, notification or response
            (code -32600).
    """
    try:
        wire = _WIRE_DECODER.decode(line)
    except msgspec.ValidationError as exc:
        raise MalformedMessage(
            f"not a JSON-RPC 2.0 message: {exc}", request_id=_readable_id(line)
        ) from exc
    except msgspec.DecodeError as exc:
        raise MalformedMessage(f"not JSON: {exc}", code=PARSE_ERROR) from exc
    except RecursionError as exc:
        # Valid JSON nested deeper than the decoder's recursion limit (about a thousand).
        raise MalformedMessage("JSON nested too deeply") from exc
    request_id = None if isinstance(wire.id, msgspec.UnsetType) else wire.id
    if wire.jsonrpc != JSONRPC_VERSION:
        raise MalformedMessage('"jsonrpc" must be "2.0"', request_id=request_id)
    params = None if isinstance(wire.params, msgspec.UnsetType) else wire.params
    if not isinstance(wire.method, msgspec.UnsetType):
        if not (
            isinstance(wire.result, msgspec.UnsetType) and isinstance(wire.error, msgspec.UnsetType)
        ):
            raise MalformedMessage("a request cannot carry a result", request_id=request_id)
        if isinstance(wire.id, msgspec.UnsetType):
            return Notification(wire.method, params)
        if wire.id is None:
            raise MalformedMessage("a request id must not be null")
        return Request(wire.id, wire.method, params)
    if not isinstance(wire.result, msgspec.UnsetType):
        if not isinstance(wire.error, msgspec.UnsetType) or request_id is None:
            raise MalformedMessage("a response needs an id and exactly one of result/error")
        return Response(request_id, wire.result)
    if not isinstance(wire.error, msgspec.UnsetType):
        return ErrorResponse(request_id, wire.error)
    raise MalformedMessage("neither a request nor a response", request_id=request_id)


class _RequestOut(msgspec.Struct, frozen=True, omit_defaults=True):
    jsonrpc: str
    id: RequestId
    method: str
    params: McpObject | None = None


class _NotificationOut(msgspec.Struct, frozen=True, omit_defaults=True):
    jsonrpc: str
    method: str
    params: McpObject | None = None


class _ResultOut(msgspec.Struct, frozen=True):
    jsonrpc: str
    id: RequestId
    result: msgspec.Raw


class _ErrorObjectOut(msgspec.Struct, frozen=True, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _ErrorOut(msgspec.Struct, frozen=True, omit_defaults=True):
    jsonrpc: str
    error: _ErrorObjectOut
    id: RequestId | msgspec.UnsetType | None = msgspec.UNSET


_ENCODER: Final = msgspec.json.Encoder()


def _line(struct: msgspec.Struct) -> bytes:
    # msgspec never emits a raw newline inside a JSON document, so one frame is one line.
    return _ENCODER.encode(struct) + NEWLINE


def encode_request(request_id: RequestId, method: str, params: McpObject | None) -> bytes:
    """Encode a request as one newline-terminated frame."""
    return _line(_RequestOut(JSONRPC_VERSION, request_id, method, params))


def encode_notification(method: str, params: McpObject | None = None) -> bytes:
    """Encode a notification as one newline-terminated frame."""
    return _line(_NotificationOut(JSONRPC_VERSION, method, params))


def encode_result(request_id: RequestId, result: msgspec.Raw | Any) -> bytes:
    """Encode a successful response; ``result`` may be pre-encoded :class:`msgspec.Raw`."""
    raw = result if isinstance(result, msgspec.Raw) else msgspec.Raw(_ENCODER.encode(result))
    return _line(_ResultOut(JSONRPC_VERSION, request_id, raw))


def encode_error(request_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """Encode an error response; ``request_id`` ``None`` omits the id (it was unreadable)."""
    out_id: RequestId | msgspec.UnsetType = msgspec.UNSET if request_id is None else request_id
    return _line(_ErrorOut(JSONRPC_VERSION, _ErrorObjectOut(code, message, data), out_id))
