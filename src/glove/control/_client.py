"""The blocking control client (the CLI's side of the protocol).

One request at a time on one connection::

    with Client.for_runtime_dir() as client:          # connect + hello
        status = client.session_status(sid)           # a SessionStatus, decoded strictly
        view = client.call("session.status", {"session_id": sid})   # any method: a dict
        with client.stream("session.watch", {"session_id": sid}) as events:
            for change in events:
                ...                                    # leaving early sends a cancel

The transport only: the state of the connection and the rule for every frame are the
sans-IO :class:`~glove.control._client_core.ClientCore`'s, ``call`` and the typed calls are
generated from the asyncio client's (``_sync_methods.py``). Every failure is a
``ControlError`` (``glove.control._client_base`` has the table).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TypeVar

from glove.control._address import socket_address
from glove.control._client_base import (
    CLIENT_DEADLINE_S,
    CLIENT_GRACE_S,
    DEFAULT_CLIENT_NAME,
    RECV_BYTES,
    foreign,
)
from glove.control._client_core import (
    ClientCore,
    Params,
    connection_error,
    hello_result,
    stream_step,
)
from glove.control._sync_methods import SyncMethods
from glove.control.errors import (
    ClientClosed,
    ClientTimeout,
    ControlError,
)
from glove.protocol import Event, HelloResult, Response, StreamEnd

T = TypeVar("T")
#: After an early end of a stream, how long the client waits for the daemon to confirm.
CANCEL_DRAIN_S = 2.0


class Client(SyncMethods):
    """A blocking connection to ``gloved``; not thread-safe (one call at a time)."""

    def __init__(
        self,
        socket_path: Path,
        *,
        secret_path: Path | None = None,
        client_name: str = DEFAULT_CLIENT_NAME,
        timeout: float = CLIENT_DEADLINE_S,
    ) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.server: HelloResult | None = None
        self._core = ClientCore.for_socket(socket_path, secret_path, client_name)
        self._sock: socket.socket | None = None
        self._frames: list[Response | Event] = []

    def __enter__(self) -> Client:
        if self.server is None:
            self.connect()
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    # -- connecting ------------------------------------------------------------------------

    def connect(self) -> HelloResult:
        """Connect and say hello; return the daemon's answer.

        Raises:
            DaemonUnavailable: no daemon listens there, or its secret cannot be read.
            RemoteError: the daemon refused (``unauthenticated``, ``busy``, ...).
            ClientTimeout: no answer in time.
            DaemonProtocolError: the answer is not a valid reply.
        """
        self._core.check_usable()
        if self._sock is not None:
            raise ClientClosed("this client is already connected")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            with socket_address(self.socket_path) as address:
                sock.connect(address)
        except TimeoutError as exc:
            sock.close()
            raise ClientTimeout(f"gloved on {self.socket_path} did not accept in time") from exc
        except OSError as exc:
            sock.close()
            raise foreign(exc, connecting=True, where=self.socket_path) from exc
        self._sock = sock
        try:
            rid = self._core.next_id()
            frame = self._core.hello_frame(rid, self.timeout)
            self.server = hello_result(self._unary(rid, frame, self.timeout))
        except BaseException:
            self.close()  # a refused hello leaves nothing open
            raise
        return self.server

    def close(self) -> None:
        """Close the connection; later calls raise ``ClientClosed``. Idempotent."""
        self._core.closed = True
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # -- calls (``call`` and the typed ones: _sync_methods) ------------------------------

    def stream(
        self,
        method: str,
        params: Params = None,
        *,
        timeout: float | None = None,
        event_type: type[T] | None = None,
    ) -> SyncStream[T]:
        """Start a streaming call; iterate the result for its events.

        Raises:
            as :meth:`call` (when starting, and while iterating).
        """
        budget = self.timeout if timeout is None else timeout
        rid = self._core.next_id()
        self._send(self._core.request_frame(rid, method, params, budget))
        return SyncStream(self, rid, time.monotonic() + budget + CLIENT_GRACE_S, event_type)

    # -- the wire ------------------------------------------------------------------------

    def _live(self) -> socket.socket:
        self._core.check_usable()
        if self._sock is None:
            raise ClientClosed("this client is not connected: call connect() first")
        return self._sock

    def _unary(self, rid: int, frame: bytes, budget: float) -> Response:
        self._send(frame)
        reply = self._next(rid, time.monotonic() + budget + CLIENT_GRACE_S, unary=True)
        assert isinstance(reply, Response)  # the core refuses an event for a unary request
        return reply

    def _send(self, frame: bytes) -> None:
        sock = self._live()
        try:
            sock.sendall(frame)
        except OSError as exc:
            # The daemon may have refused us (busy, unauthenticated) and closed before we
            # finished sending: its error frame can still be waiting to be read.
            refusal = self._pending_refusal()
            raise self._break(
                refusal or foreign(exc, connecting=False, where=self.socket_path)
            ) from exc

    def _pending_refusal(self) -> ControlError | None:
        with contextlib.suppress(OSError, ControlError):
            assert self._sock is not None
            self._sock.settimeout(0.2)
            while chunk := self._sock.recv(RECV_BYTES):
                for reply in self._core.feed(chunk):
                    if isinstance(reply, Response) and (err := connection_error(reply)):
                        return err
        return None

    def _next(self, rid: int, deadline: float, *, unary: bool) -> Response | Event:
        """The next frame for ``rid`` (one request at a time: the only one awaited); frames
        of abandoned requests are skipped."""
        while True:
            while self._frames:
                reply = self._frames.pop(0)
                try:
                    ours = self._core.accept(reply, unary=unary if reply.id == rid else None)
                except ControlError as exc:
                    raise self._break(exc) from None
                if ours:
                    return reply
            self._recv(rid, deadline)

    def _recv(self, rid: int, deadline: float) -> None:
        sock = self._live()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self._core.abandoned.add(rid)
            raise ClientTimeout(f"no reply from gloved to request {rid} in time")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(RECV_BYTES)
        except TimeoutError:
            self._core.abandoned.add(rid)
            raise ClientTimeout(f"no reply from gloved to request {rid} in time") from None
        except OSError as exc:
            raise self._break(foreign(exc, connecting=False, where=self.socket_path)) from exc
        if not chunk:
            raise self._break(self._core.eof())
        try:
            self._frames.extend(self._core.feed(chunk))
        except ControlError as exc:
            raise self._break(exc) from exc

    def _break(self, exc: ControlError) -> ControlError:
        """Remember the connection is unusable, close it, and return ``exc`` to raise."""
        self._core.fail(exc)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        return exc

    def _cancel(self, rid: int) -> None:
        """Cancel ``rid`` and wait (briefly) for its final frame, so the next call is clean.

        If the final frame does not come in time, ``rid`` stays abandoned: its frames are
        skipped when they arrive.
        """
        if self._sock is None or self._core.closed or self._core.broken is not None:
            return
        with contextlib.suppress(ControlError):
            self._send(self._core.cancel_frame(rid))
            deadline = time.monotonic() + CANCEL_DRAIN_S
            while not isinstance(self._next(rid, deadline, unary=False), Response):
                pass


class SyncStream(Generic[T]):
    """The events of one streaming call. Closing it early cancels the stream."""

    def __init__(self, client: Client, rid: int, deadline: float, kind: type[T] | None) -> None:
        self.request_id = rid
        self.end: StreamEnd | None = None
        self._client = client
        self._deadline = deadline
        self._kind = kind
        self._done = False

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        try:
            reply = self._client._next(self.request_id, self._deadline, unary=False)
            event, end = stream_step(reply, self._kind)
        except BaseException:
            self._done = True
            raise
        if end is None:
            return event  # type: ignore[no-any-return]
        self._done = True
        self.end = end
        raise StopIteration

    def close(self) -> None:
        """End the stream now: send a cancel unless it already ended. Idempotent."""
        if not self._done:
            self._done = True
            self._client._cancel(self.request_id)

    def __enter__(self) -> SyncStream[T]:
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()


def call(
    socket_path: Path,
    method: str,
    params: Params = None,
    *,
    timeout: float = CLIENT_DEADLINE_S,
) -> Any:
    """Connect, say hello, send one request and return its result (the CLI's one-shot call).

    Raises:
        DaemonUnavailable: no daemon listens on ``socket_path`` (or no secret beside it).
        RemoteError: the daemon answered with a typed error.
        DaemonProtocolError: the daemon's reply was not a valid frame.
        ControlError: any other failure of the call (timeout, lost connection).
    """
    with Client(socket_path, timeout=timeout) as client:
        return client.call(method, params, timeout=timeout)
