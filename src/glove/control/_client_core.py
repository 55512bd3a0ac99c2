"""What the blocking and the asyncio clients share: the sans-IO client (h11's shape).

The core turns calls into frames and frames into results or errors, and holds the state
every connection has whatever drives it: whether it was closed (you closed it) or broke (it
broke), which requests were given up on, and the rule for each arriving frame
(:meth:`ClientCore.accept`: ours, a late frame of an abandoned request to drop, or a
protocol error). It never touches a socket: :class:`~glove.control.Client` drives it with
blocking reads, :class:`~glove.control.AsyncClient` with a reader task, and their calls
(``call`` and the typed ones) are one source, ``_async_methods.py``, generated into
``_sync_methods.py``. The error boundary (which foreign exception becomes which
``ControlError``) is :func:`glove.control._client_base.foreign`, shared with the CLI's
one-shot JSON call.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from glove.control._client_base import (
    deadline_ms,
    runtime_socket,
)
from glove.control._secret import read_secret
from glove.control.errors import (
    ClientClosed,
    ConnectionLost,
    ControlError,
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
    StreamEnd,
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
        #: The owner closed the client: every later use is ``ClientClosed``.
        self.closed = False
        #: Why the connection broke, once it has: every later use is ``ConnectionLost``.
        self.broken: ControlError | None = None
        #: Requests given up on (timed out, cancelled) whose final frame has not come yet.
        self.abandoned: set[int] = set()
        self._ids = itertools.count(1)

    @classmethod
    def for_socket(
        cls, socket_path: Path, secret_path: Path | None, client_name: str
    ) -> ClientCore:
        """The core of a client of ``socket_path`` (its secret beside it unless given)."""
        secret = secret_path if secret_path is not None else runtime_socket(socket_path.parent)[1]
        return cls(secret, client_name)

    def check_usable(self) -> None:
        """Refuse use of a closed or broken client.

        Raises:
            ClientClosed: the owner closed it.
            ConnectionLost: the connection broke earlier (the first error is named).
        """
        if self.closed:
            raise ClientClosed("this client was closed")
        if self.broken is not None:
            raise ConnectionLost(f"the connection is unusable: {self.broken}")

    def fail(self, exc: ControlError) -> ControlError:
        """Remember that the connection broke with ``exc`` (the first reason is kept; closing
        is not breaking); return ``exc`` for the caller to raise."""
        if self.broken is None and not isinstance(exc, ClientClosed):
            self.broken = exc
        return exc

    def accept(self, reply: Response | Event, *, unary: bool | None) -> bool:
        """Whether ``reply`` goes to its caller: ``unary`` says what kind of request of ours
        awaits its id (``None``: none does). The late frame of an abandoned request is
        dropped (``False``); its final frame forgets it.

        Raises:
            RemoteError: a connection-level error (id 0): the daemon refused us.
            DaemonProtocolError: an event for a unary request, or a frame for an id we never
                sent or already finished.
        """
        if isinstance(reply, Response) and (err := connection_error(reply)):
            raise err
        if unary is not None:
            if unary and isinstance(reply, Event):
                raise DaemonProtocolError(f"an event for unary request {reply.id}")
            return True
        if reply.id not in self.abandoned:
            raise DaemonProtocolError(f"a reply for unknown request {reply.id}")
        if isinstance(reply, Response):
            self.abandoned.discard(reply.id)
        return False

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


def stream_step(reply: Response | Event, kind: type[T] | None) -> tuple[Any, StreamEnd | None]:
    """One frame of a stream: ``(event, None)`` for an event (converted to ``kind``), or
    ``(None, end)`` for its final response.

    Raises:
        RemoteError: the stream ended with an error.
        DaemonProtocolError: the event is not a ``kind``, or the end is not a ``StreamEnd``.
    """
    if isinstance(reply, Event):
        return convert(reply.event, kind), None
    end: StreamEnd = result_of(reply, StreamEnd)
    return None, end


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
