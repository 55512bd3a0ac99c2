"""The asyncio control client: many calls and streams at once on one connection.

::

    async with AsyncClient.for_runtime_dir() as client:      # connect + hello
        caps = await client.capabilities()                   # typed calls: _async_methods
        view = await client.call("session.status", {"session_id": sid})   # any method
        async with client.stream("session.watch", {"session_id": sid}) as events:
            async for change in events:
                ...                                           # leaving early cancels

A reader task (owned by the client, cancelled by ``aclose``) routes each reply to its
call by id. A stream's unread events wait in a bounded queue; when it is full the reader
stops reading, so a consumer that falls behind pushes back to the daemon, which ends that
stream with ``stream_overflow`` rather than buffering without bound.

The transport only: the state of the connection and the rule for every frame are the
sans-IO :class:`~glove.control._client_core.ClientCore`'s, and ``call`` and the typed calls
are written once in ``_async_methods.py`` (the blocking client's are generated from them).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from types import TracebackType
from typing import Final, Generic, TypeVar

from glove.actors import TaskOwner
from glove.control._address import socket_address
from glove.control._async_methods import AsyncMethods
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
from glove.control.errors import (
    ClientClosed,
    ClientTimeout,
    ControlError,
    DaemonProtocolError,
)
from glove.protocol import Event, HelloResult, Response, StreamEnd

T = TypeVar("T")
#: Events of one stream buffered in the client before the reader stops reading.
STREAM_QUEUE_EVENTS: Final = 1024
#: While the daemon's listen queue is full (EAGAIN), connect is retried this often.
CONNECT_RETRY_S: Final = 0.005
CONNECT_RETRY_MAX_S: Final = 0.1
WRITE_DEADLINE_S: Final = 5.0


class AsyncClient(AsyncMethods):
    """An asyncio connection to ``gloved``: concurrent calls and streams, matched by id."""

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
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._owner = TaskOwner(f"control-client/{socket_path.name}")
        self._task: asyncio.Task[None] | None = None
        self._calls: dict[int, asyncio.Future[Response]] = {}
        self._streams: dict[int, asyncio.Queue[Response | Event | _Failure]] = {}

    async def __aenter__(self) -> AsyncClient:
        if self.server is None:
            await self.connect()
        return self

    async def __aexit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- connecting ------------------------------------------------------------------------

    async def connect(self) -> HelloResult:
        """Connect and say hello; return the daemon's answer.

        Raises:
            DaemonUnavailable: no daemon listens there, or its secret cannot be read.
            RemoteError: the daemon refused (``unauthenticated``, ``busy``, ...).
            ClientTimeout: no answer in time.
            DaemonProtocolError: the answer is not a valid reply.
        """
        self._core.check_usable()
        if self._writer is not None:
            raise ClientClosed("this client is already connected")
        try:
            async with asyncio.timeout(self.timeout):
                sock = await self._connect_socket()
        except TimeoutError as exc:
            raise ClientTimeout(f"gloved on {self.socket_path} did not accept in time") from exc
        except OSError as exc:
            raise foreign(exc, connecting=True, where=self.socket_path) from exc
        try:
            async with asyncio.timeout(self.timeout + CLIENT_GRACE_S):
                self.server = hello_result(await self._hello(sock))
            self._reader, self._writer = await asyncio.open_unix_connection(sock=sock)
        except TimeoutError as exc:
            sock.close()
            self._core.closed = True
            raise ClientTimeout(f"gloved on {self.socket_path} did not answer hello") from exc
        except BaseException:
            sock.close()
            self._core.closed = True  # a refused hello leaves nothing open
            raise
        # report=False: aclose awaits the reader and lets its failure through.
        self._task = self._owner.start(self._read_loop(), report=False)
        return self.server

    async def _hello(self, sock: socket.socket) -> Response:
        """Say hello on the bare socket, before any transport owns it: if the daemon refused
        us (busy, peer_rejected) and closed, our send fails but its error frame can still
        be read, which an asyncio transport would have thrown away with the socket."""
        loop = asyncio.get_running_loop()
        rid = self._core.next_id()
        sent: OSError | None = None
        try:
            await loop.sock_sendall(sock, self._core.hello_frame(rid, self.timeout))
        except OSError as exc:
            sent = exc
        while True:
            try:
                chunk = await loop.sock_recv(sock, RECV_BYTES)
            except OSError as exc:
                raise foreign(sent or exc, connecting=False, where=self.socket_path) from exc
            if not chunk:
                if sent is not None:
                    raise foreign(sent, connecting=False, where=self.socket_path) from sent
                raise self._core.eof()
            for reply in self._core.feed(chunk):
                if isinstance(reply, Response) and (err := connection_error(reply)):
                    raise err
                if reply.id != rid or not isinstance(reply, Response):
                    raise DaemonProtocolError(f"an unexpected frame (id {reply.id}) before hello")
                return reply

    async def _connect_socket(self) -> socket.socket:
        """A connected non-blocking socket; a full listen queue (EAGAIN) is waited out."""
        pause = CONNECT_RETRY_S
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                # A Unix socket connects at once or fails: EAGAIN means the backlog is full.
                with socket_address(self.socket_path) as address:
                    sock.connect(address)
            except BlockingIOError:
                sock.close()
                await asyncio.sleep(pause)
                pause = min(pause * 2, CONNECT_RETRY_MAX_S)
                continue
            except BaseException:
                sock.close()
                raise
            return sock

    async def aclose(self) -> None:
        """Close the connection; pending and later calls raise ``ClientClosed``. Idempotent."""
        if self._core.closed:
            return
        self._core.closed = True
        self._fail_all(ClientClosed("the client was closed while the call was pending"))
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(WRITE_DEADLINE_S):
                    await self._writer.wait_closed()
            self._writer = None

    # -- calls (``call`` and the typed ones: _async_methods) -----------------------------

    def stream(
        self,
        method: str,
        params: Params = None,
        *,
        timeout: float | None = None,
        event_type: type[T] | None = None,
    ) -> AsyncStream[T]:
        """A streaming call, sent when first iterated or entered.

        Raises:
            as :meth:`call` (while iterating).
        """
        budget = self.timeout if timeout is None else timeout
        return AsyncStream(self, method, params, budget, event_type)

    async def _unary(self, rid: int, frame: bytes, budget: float) -> Response:
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._calls[rid] = future
        try:
            await self._send(frame)
            async with asyncio.timeout(budget + CLIENT_GRACE_S):
                return await future
        except TimeoutError as exc:
            self._core.abandoned.add(rid)
            raise ClientTimeout(f"no reply from gloved to request {rid} in time") from exc
        finally:
            self._calls.pop(rid, None)

    async def _open_stream(
        self, rid: int, frame: bytes
    ) -> asyncio.Queue[Response | Event | _Failure]:
        queue: asyncio.Queue[Response | Event | _Failure] = asyncio.Queue(STREAM_QUEUE_EVENTS)
        self._streams[rid] = queue
        try:
            await self._send(frame)
        except BaseException:
            self._streams.pop(rid, None)
            raise
        return queue

    async def _cancel(self, rid: int) -> None:
        """Tell the daemon to end ``rid``; its remaining frames are dropped on arrival."""
        queue = self._streams.pop(rid, None)
        while queue is not None and not queue.empty():
            queue.get_nowait()  # frees a reader waiting to put into it
        self._core.abandoned.add(rid)
        if self._writer is not None and not self._core.closed and self._core.broken is None:
            with contextlib.suppress(ControlError):
                await self._send(self._core.cancel_frame(rid))

    # -- the wire ------------------------------------------------------------------------

    async def _send(self, frame: bytes) -> None:
        self._core.check_usable()
        writer = self._writer
        if writer is None:
            raise ClientClosed("this client is not connected: call connect() first")
        try:
            writer.write(frame)
            async with asyncio.timeout(WRITE_DEADLINE_S):
                await writer.drain()
        except TimeoutError as exc:
            raise ClientTimeout("gloved does not read what we send") from exc
        except OSError as exc:
            # The reader may already hold the daemon's reason (busy, unauthenticated).
            await asyncio.sleep(0)
            broken = self._core.broken
            raise broken or foreign(exc, connecting=False, where=self.socket_path) from exc

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while chunk := await self._reader.read(RECV_BYTES):
                for reply in self._core.feed(chunk):
                    await self._route(reply)
            self._fail_all(self._core.eof())
        except ControlError as exc:
            self._fail_all(exc)
        except OSError as exc:
            self._fail_all(foreign(exc, connecting=False, where=self.socket_path))

    async def _route(self, reply: Response | Event) -> None:
        call = self._calls.get(reply.id)
        queue = self._streams.get(reply.id)
        kind = True if call is not None else (False if queue is not None else None)
        if not self._core.accept(reply, unary=kind):
            return  # the late frame of a request we gave up on
        if call is not None:
            assert isinstance(reply, Response)  # the core refuses an event for a unary call
            if not call.done():
                call.set_result(reply)
            return
        assert queue is not None
        await queue.put(reply)  # a full queue stops the reader: backpressure
        if isinstance(reply, Response):
            self._streams.pop(reply.id, None)

    def _fail_all(self, exc: ControlError) -> None:
        self._core.fail(exc)
        for future in self._calls.values():
            if not future.done():
                future.set_exception(exc)
        for queue in self._streams.values():
            if queue.full():
                queue.get_nowait()  # the connection is gone: the error matters more
            queue.put_nowait(_Failure(exc))
        self._streams.clear()


class _Failure:
    """Put in a stream's queue when the connection ends under it."""

    def __init__(self, exc: ControlError) -> None:
        self.exc = exc


class AsyncStream(Generic[T]):
    """The events of one streaming call. Leaving it early cancels the stream."""

    def __init__(
        self, client: AsyncClient, method: str, params: Params, budget: float, kind: type[T] | None
    ) -> None:
        self.request_id = 0
        self.end: StreamEnd | None = None
        self._client = client
        self._method = method
        self._params = params
        self._budget = budget
        self._kind = kind
        self._queue: asyncio.Queue[Response | Event | _Failure] | None = None
        self._deadline = 0.0
        self._done = False

    async def start(self) -> None:
        """Send the request (done by the first iteration or ``async with``)."""
        if self._queue is not None:
            return
        core = self._client._core
        self.request_id = core.next_id()
        frame = core.request_frame(self.request_id, self._method, self._params, self._budget)
        self._deadline = asyncio.get_running_loop().time() + self._budget + CLIENT_GRACE_S
        self._queue = await self._client._open_stream(self.request_id, frame)

    def __aiter__(self) -> AsyncStream[T]:
        return self

    async def __anext__(self) -> T:
        if self._done:
            raise StopAsyncIteration
        await self.start()
        assert self._queue is not None
        try:
            async with asyncio.timeout_at(self._deadline):
                reply = await self._queue.get()
        except TimeoutError as exc:
            await self.aclose()
            raise ClientTimeout(f"stream {self.request_id} ran past its deadline") from exc
        if isinstance(reply, _Failure):
            self._done = True
            raise reply.exc
        try:
            event, end = stream_step(reply, self._kind)
        except BaseException:
            self._done = True
            raise
        if end is None:
            return event  # type: ignore[no-any-return]
        self._done = True
        self.end = end
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """End the stream now: send a cancel unless it already ended. Idempotent."""
        if not self._done:
            self._done = True
            if self._queue is not None:
                await self._client._cancel(self.request_id)

    async def __aenter__(self) -> AsyncStream[T]:
        await self.start()
        return self

    async def __aexit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        await self.aclose()
