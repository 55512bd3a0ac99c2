"""What the blocking and the asyncio clients share: sans-IO framing and the typed codec.

The core turns calls into frames and frames into results or errors; it never touches a
socket. The error boundary (which foreign exception becomes which ``ControlError``) is
:func:`glove.control._client_base.foreign`, shared with the CLI's one-shot JSON call.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from glove.control._client_base import (
    deadline_ms,
)
from glove.control._secret import read_secret
from glove.control.errors import (
    ConnectionLost,
    DaemonProtocolError,
    RemoteError,
    RequestInvalid,
)
from glove.protocol import (
    CONTROL_MAX_REQUEST_BYTES,
    CONTROL_MAX_RESPONSE_BYTES,
    PROTOCOL_VERSION,
    Cancel,
    Event,
    FrameDecoder,
    FrameTooLarge,
    HelloParams,
    HelloResult,
    ProtocolError,
    Request,
    Response,
    decode_server_frame,
    encode,
    encode_frame,
)

T = TypeVar("T")
Params = Mapping[str, Any] | msgspec.Struct | None


class ClientCore:
    """Sans-IO: ids, request and cancel frames, reply decoding, result conversion."""

    def __init__(self, secret_path: Path, client_name: str) -> None:
        self.secret_path = secret_path
        self.client_name = client_name
        self.decoder = FrameDecoder(max_frame_bytes=CONTROL_MAX_RESPONSE_BYTES)
        self._ids = itertools.count(1)

    def next_id(self) -> int:
        """A fresh request id."""
        return next(self._ids)

    def hello_frame(self, request_id: int, timeout: float) -> bytes:
        """The ``hello`` frame, with the secret read from the runtime directory now.

        Raises:
            DaemonUnavailable: the secret file is missing or unsafe.
        """
        params = HelloParams(
            secret=read_secret(self.secret_path), client=self.client_name, protocol=PROTOCOL_VERSION
        )
        return self.request_frame(request_id, "hello", params, timeout)

    def request_frame(self, request_id: int, method: str, params: Params, timeout: float) -> bytes:
        """A framed request whose ``deadline_ms`` is ``timeout``.

        Raises:
            RequestInvalid: the params are not encodable or the frame exceeds the cap.
        """
        request = Request(
            id=request_id, method=method, params=params or {}, deadline_ms=deadline_ms(timeout)
        )
        try:
            return encode_frame(encode(request), max_frame_bytes=CONTROL_MAX_REQUEST_BYTES)
        except FrameTooLarge as exc:
            raise RequestInvalid(f"{method}: {exc}") from exc
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            raise RequestInvalid(f"{method}: params are not encodable: {exc}") from exc

    def cancel_frame(self, request_id: int) -> bytes:
        """The frame that cancels ``request_id``."""
        frame = encode(Cancel(id=request_id, cancel=True))
        return encode_frame(frame, max_frame_bytes=CONTROL_MAX_REQUEST_BYTES)

    def feed(self, data: bytes) -> list[Response | Event]:
        """Decode every complete frame in ``data`` (plus what was buffered).

        Raises:
            DaemonProtocolError: a frame is oversized or not a valid reply.
        """
        self.decoder.feed(data)
        frames: list[Response | Event] = []
        try:
            while (payload := self.decoder.next_frame()) is not None:
                frames.append(decode_server_frame(payload))
        except ProtocolError as exc:
            raise DaemonProtocolError(f"gloved sent an invalid reply: {exc}") from exc
        return frames

    def eof(self) -> ConnectionLost:
        """The error for the daemon closing the connection while a reply was awaited."""
        where = " inside a reply" if self.decoder.pending else ""
        return ConnectionLost(f"gloved closed the connection{where} before answering")


def result_of(frame: Response, result_type: type[T] | None) -> Any:
    """The result of a response, converted to ``result_type`` if given.

    Raises:
        RemoteError: the response is an error.
        DaemonProtocolError: the result does not match ``result_type``.
    """
    if frame.error is not None:
        raise RemoteError(frame.error.code, frame.error.message, frame.error.data)
    return convert(frame.result, result_type)


def convert(value: Any, kind: type[T] | None) -> Any:
    """``value`` as ``kind`` (unchanged when ``kind`` is None).

    Raises:
        DaemonProtocolError: it does not match.
    """
    if kind is None:
        return value
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise DaemonProtocolError(f"gloved's reply is not a {kind.__name__}: {exc}") from exc


def connection_error(frame: Response) -> RemoteError | None:
    """The error a connection-level frame (id 0) carries, if it is one."""
    if frame.id == 0 and frame.error is not None:
        return RemoteError(frame.error.code, frame.error.message, frame.error.data)
    return None


def hello_result(frame: Response) -> HelloResult:
    """The typed ``hello`` result.

    Raises:
        RemoteError: ``hello`` was refused.
        DaemonProtocolError: the result is not a hello result.
    """
    result: HelloResult = result_of(frame, HelloResult)
    return result
