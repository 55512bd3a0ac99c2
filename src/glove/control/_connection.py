"""One authenticated conversation on the control socket: hello, then requests and streams.

The shape of a connection::

    accept ─ SO_PEERCRED (server) ─ hello within CONTROL_HELLO_DEADLINE_S ─┬─ requests ─ close
                                     wrong/missing secret: unauthenticated └─ (idle: close)

After ``hello`` the reader loop reads frames and never waits for a handler: each request
runs in a task of its own (at most ``MAX_INFLIGHT_PER_CONNECTION``), so a stream and a
``cancel`` for it can share one connection. Replies are written as handlers finish, in
any order; the client matches them by id.

Errors, and who caused them (h11's split of local and peer faults):

* The peer broke the protocol (oversized, truncated or malformed frame, a repeated key,
  slowloris): one typed error frame with id 0, then the connection closes. Nothing else on
  the daemon notices.
* The peer asked for something that cannot be done (unknown method, bad params, a deadline
  passed, a handler's ``MethodError``): an error frame with the request's id; the
  connection stays open.
* The daemon failed (a handler bug): ``internal_error`` with no traceback for the client,
  the traceback once in the daemon's log, and the connection stays open.

Every wait has a deadline: a frame completes within the read deadline once its first byte
arrived, a connection with nothing in flight is closed after the idle deadline, a reply
that the client does not read within the write deadline aborts the connection, and a
stream whose unread output passes ``STREAM_BUFFER_BYTES`` ends with ``stream_overflow``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import msgspec

from glove.actors import Busy, DeadlineExceeded, TaskOwner, reset_deadline, set_deadline
from glove.control._auth import PeerCredentials, secret_matches
from glove.control._registry import HELLO, CallContext, MethodRegistry, MethodSpec
from glove.control.errors import MethodError
from glove.protocol import (
    CONTROL_HELLO_DEADLINE_S,
    CONTROL_IDLE_DEADLINE_S,
    CONTROL_MAX_REQUEST_BYTES,
    CONTROL_MAX_RESPONSE_BYTES,
    CONTROL_READ_DEADLINE_S,
    PROTOCOL_VERSION,
    Cancel,
    Event,
    FrameDecoder,
    HelloParams,
    InvalidParams,
    MalformedFrame,
    ProtocolError,
    Request,
    Response,
    StreamEnd,
    TruncatedFrame,
    decode_client_frame,
    decode_params,
    encode,
    encode_frame,
    error_response,
)
from glove.protocol.control import HelloResult

_log = logging.getLogger(__name__)

READ_CHUNK_BYTES: Final = 64 * 1024
#: A reply the client does not take within this long aborts the connection.
WRITE_DEADLINE_S: Final = 5.0
#: Requests one connection may have running at once; more are answered ``busy``.
MAX_INFLIGHT_PER_CONNECTION: Final = 32
#: Unread bytes a connection may hold in our write buffer before a stream on it ends with
#: ``stream_overflow`` (the kernel's socket buffers come on top of this).
STREAM_BUFFER_BYTES: Final = 256 * 1024
#: How long a stream's handler gets to run its cleanup when the stream ends.
STREAM_CLOSE_DEADLINE_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds one connection keeps (the server's configuration)."""

    max_request_bytes: int = CONTROL_MAX_REQUEST_BYTES
    read_deadline_s: float = CONTROL_READ_DEADLINE_S
    idle_deadline_s: float = CONTROL_IDLE_DEADLINE_S
    hello_deadline_s: float = CONTROL_HELLO_DEADLINE_S
    write_deadline_s: float = WRITE_DEADLINE_S
    max_inflight: int = MAX_INFLIGHT_PER_CONNECTION
    stream_buffer_bytes: int = STREAM_BUFFER_BYTES


class _Refused(Exception):
    """Ends the connection after the error frame already written (not a GloveError: it
    never leaves this module)."""


class Connection:
    """Serves one accepted, uid-checked connection until it ends. Never raises."""

    def __init__(
        self,
        *,
        conn_id: int,
        peer: PeerCredentials,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        registry: MethodRegistry,
        secret: bytes,
        limits: Limits,
        hello_result: Callable[[], HelloResult],
        admit: Callable[[Connection], bool],
    ) -> None:
        self.conn_id = conn_id
        self.peer = peer
        self.client = ""
        self.authenticated = False
        self.requests = 0
        self._reader = reader
        self._writer = writer
        self._registry = registry
        self._secret = secret
        self._limits = limits
        self._hello_result = hello_result
        self._admit = admit
        self._decoder = FrameDecoder(max_frame_bytes=limits.max_request_bytes)
        self._loop = asyncio.get_running_loop()
        self._accepted = self._loop.time()
        self._last_activity = self._accepted
        self._calls = TaskOwner(f"control/conn-{self.conn_id}")  # owns every call's task
        self._inflight: dict[int, asyncio.Task[None]] = {}
        self._contexts: dict[int, CallContext] = {}
        self._kinds: dict[int, str] = {}
        self._cancel_asked: set[int] = set()

    # -- the connection's life ----------------------------------------------------------------

    async def serve(self) -> None:
        """Authenticate, then read and dispatch frames until EOF, idle, or a protocol error."""
        try:
            if await self._hello():
                await self._requests()
        except ProtocolError as exc:
            _log.info("control: conn %d: %s: %s", self.conn_id, exc.code, exc)
            self._send(error_response(0, exc.code, str(exc)))
        except _Refused:
            pass
        except (OSError, TimeoutError) as exc:
            _log.info("control: conn %d ended: %r", self.conn_id, exc)
        except asyncio.CancelledError:
            # The daemon is stopping: say so for everything still in flight.
            for request_id in list(self._inflight):
                self._send(error_response(request_id, "shutting_down", "gloved is stopping"))
            raise
        except Exception:  # noqa: BLE001 - a bug here ends this connection, never the daemon
            _log.exception("control: conn %d: internal error; closing it", self.conn_id)
        finally:
            await self._finish()

    async def _finish(self) -> None:
        # Everything that must happen happens before the first await: a second cancel (a
        # supervisor giving up on a slow stop) can interrupt what follows.
        for ctx in self._contexts.values():
            ctx.gone.set()
        self._calls.cancel()
        self._writer.close()
        await self._calls.join()
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(self._limits.write_deadline_s):
                await self._writer.wait_closed()

    async def _hello(self) -> bool:
        """The first frame must be a correct ``hello``; anything else ends the connection."""
        deadline = self._accepted + self._limits.hello_deadline_s
        payload = await self._read_frame(start_by=deadline, hello=True)
        if payload is None:
            return False
        frame = decode_client_frame(payload)
        if not isinstance(frame, Request) or frame.method != HELLO:
            request_id = frame.id if isinstance(frame, Request) else 0
            self._refuse(request_id, "unauthenticated", "the first request must be hello")
        self._check_hello(frame)
        if not self._admit(self):
            self._refuse(frame.id, "busy", "too many connections are open; try again later")
        self.authenticated = True
        await self._reply(Response(id=frame.id, result=self._hello_result()))
        return True

    def _check_hello(self, request: Request) -> None:
        try:
            params = decode_params(request.params, HelloParams)
        except InvalidParams as exc:
            self._refuse(request.id, "unauthenticated", f"hello needs a secret: {exc}")
        if not secret_matches(self._secret, params.secret):
            self._refuse(request.id, "unauthenticated", "wrong bootstrap secret")
        if params.protocol != PROTOCOL_VERSION:
            self._refuse(
                request.id,
                "unsupported_protocol",
                f"protocol {params.protocol} is not supported",
                {"supported": [PROTOCOL_VERSION]},
            )
        self.client = params.client

    def _refuse(self, request_id: int, code: str, message: str, data: Any = None) -> NoReturn:
        _log.info("control: conn %d (pid %d): %s: %s", self.conn_id, self.peer.pid, code, message)
        self._send(error_response(request_id, code, message, data))
        raise _Refused

    async def _requests(self) -> None:
        while (payload := await self._read_frame(start_by=None, hello=False)) is not None:
            received = self._loop.time()
            self._last_activity = received
            frame = decode_client_frame(payload)
            if isinstance(frame, Cancel):
                self._cancel(frame.id)
            else:
                await self._dispatch(frame, received)
        # EOF: the client is gone. Streams end; unary calls finish within their deadlines.
        for request_id, ctx in self._contexts.items():
            ctx.gone.set()
            if self._kinds[request_id] == "stream":
                self._inflight[request_id].cancel()
        await self._calls.join()

    # -- reading --------------------------------------------------------------------------------

    async def _read_frame(self, *, start_by: float | None, hello: bool) -> bytes | None:
        """One frame. Until it starts: ``start_by`` (hello) or the idle deadline; once it
        started it must complete within the read deadline.

        Raises:
            TruncatedFrame: EOF inside a frame, or it did not complete in time.
            FrameTooLarge: its declared length exceeds the request cap.
        """
        frame_deadline: float | None = None
        while (frame := self._decoder.next_frame()) is None:
            if self._decoder.pending and frame_deadline is None:
                frame_deadline = self._loop.time() + self._limits.read_deadline_s
            if frame_deadline is not None:
                until = frame_deadline if start_by is None else min(frame_deadline, start_by)
            elif start_by is not None:
                until = start_by
            else:
                until = self._last_activity + self._limits.idle_deadline_s
            try:
                async with asyncio.timeout_at(until):
                    chunk = await self._reader.read(
                        min(max(self._decoder.wanted, 1), READ_CHUNK_BYTES)
                    )
            except TimeoutError:
                if frame_deadline is not None:
                    raise TruncatedFrame(
                        f"frame not completed within {self._limits.read_deadline_s}s"
                    ) from None
                if hello:
                    self._refuse(
                        0, "unauthenticated", f"no hello within {self._limits.hello_deadline_s}s"
                    )
                if self._inflight:
                    self._last_activity = self._loop.time()  # a stream is not idleness
                    continue
                if self._loop.time() >= self._last_activity + self._limits.idle_deadline_s:
                    return None  # idle: end quietly
                continue
            if not chunk:
                self._decoder.close()
                return None
            self._decoder.feed(chunk)
        return frame

    # -- dispatch -------------------------------------------------------------------------------

    def _cancel(self, request_id: int) -> None:
        """Cancel a request in flight; a cancel for one already answered is ignored (they
        cross on the wire)."""
        task = self._inflight.get(request_id)
        if task is not None and request_id not in self._cancel_asked:
            self._cancel_asked.add(request_id)
            task.cancel()

    async def _dispatch(self, request: Request, received: float) -> None:
        self.requests += 1
        if request.id in self._inflight:
            raise MalformedFrame(f"request id {request.id} is already in flight")
        if request.method == HELLO:
            self._check_hello(request)
            await self._reply(Response(id=request.id, result=self._hello_result()))
            return
        spec = self._registry.lookup(request.method)
        if spec is None:
            await self._reply(
                error_response(
                    request.id, "method_not_found", f"unknown method {request.method[:64]!r}"
                )
            )
            return
        if len(self._inflight) >= self._limits.max_inflight:
            await self._reply(
                error_response(
                    request.id, "busy", f"{self._limits.max_inflight} requests already in flight"
                )
            )
            return
        try:
            params = decode_params(request.params, spec.params_type)
        except InvalidParams as exc:
            await self._reply(
                error_response(request.id, "invalid_params", str(exc), {"path": exc.path})
            )
            return
        limit_s = spec.deadline_s
        if request.deadline_ms is not None:
            limit_s = min(limit_s, request.deadline_ms / 1000)
        ctx = CallContext(
            request_id=request.id,
            method=spec.name,
            deadline=received + limit_s,
            peer=self.peer,
            connection_id=self.conn_id,
            client=self.client,
        )
        run = self._run_stream if spec.kind == "stream" else self._run_unary
        task = self._calls.start(run(spec, params, ctx), name=str(request.id))
        self._inflight[request.id] = task
        self._contexts[request.id] = ctx
        self._kinds[request.id] = spec.kind
        task.add_done_callback(functools.partial(self._done, request.id))

    def _done(self, request_id: int, _task: asyncio.Task[None]) -> None:
        self._inflight.pop(request_id, None)
        self._contexts.pop(request_id, None)
        self._kinds.pop(request_id, None)
        self._cancel_asked.discard(request_id)
        self._last_activity = self._loop.time()

    async def _run_unary(self, spec: MethodSpec, params: msgspec.Struct, ctx: CallContext) -> None:
        token = set_deadline(ctx.deadline)  # actor asks inside the handler inherit it
        scope = asyncio.timeout_at(ctx.deadline)
        try:
            async with scope:
                result = await spec.handler(params, ctx)
            response = self._result(ctx, result)
        except BaseException as exc:  # noqa: BLE001 - the one boundary; _failure re-raises the rest
            response = self._failure(ctx, exc, expired=scope.expired())
        finally:
            reset_deadline(token)
        await self._reply(response)

    async def _run_stream(self, spec: MethodSpec, params: msgspec.Struct, ctx: CallContext) -> None:
        token = set_deadline(ctx.deadline)
        scope = asyncio.timeout_at(ctx.deadline)
        events = 0
        iterator: AsyncIterator[msgspec.Struct] | None = None
        try:
            async with scope:
                iterator = spec.handler(params, ctx)
                async for item in iterator:
                    frame = self._event_frame(ctx, item)
                    if self._writer.is_closing():
                        return
                    if spec.paced:
                        # Pulled at the reader's pace: wait (within the stream's deadline)
                        # for our buffer to drain, never queue for it, never overflow.
                        self._writer.write(frame)
                        events += 1
                        try:
                            await self._writer.drain()
                        except OSError:
                            return  # the client is gone: nobody to answer
                        await asyncio.sleep(0)
                        continue
                    unread = self._writer.transport.get_write_buffer_size()
                    if unread + len(frame) > self._limits.stream_buffer_bytes:
                        response = error_response(
                            ctx.request_id,
                            "stream_overflow",
                            f"the client left {unread} bytes unread; the stream ended",
                        )
                        break
                    self._writer.write(frame)
                    events += 1
                    await asyncio.sleep(0)  # a handler that never awaits must not hold the loop
                else:
                    response = Response(id=ctx.request_id, result=StreamEnd(events=events))
        except BaseException as exc:  # noqa: BLE001 - the one boundary; _failure re-raises the rest
            response = self._failure(ctx, exc, expired=scope.expired())
        finally:
            reset_deadline(token)
            await self._close_iterator(ctx, iterator)
        await self._reply(response)

    async def _close_iterator(
        self, ctx: CallContext, iterator: AsyncIterator[msgspec.Struct] | None
    ) -> None:
        aclose = getattr(iterator, "aclose", None)
        if aclose is None:
            return
        try:
            async with asyncio.timeout(STREAM_CLOSE_DEADLINE_S):
                await aclose()
        except Exception:  # noqa: BLE001 - a handler's cleanup bug is logged, the stream is over
            _log.exception(
                "control: %s (request %d): closing the stream failed", ctx.method, ctx.request_id
            )

    def _event_frame(self, ctx: CallContext, item: object) -> bytes:
        if not isinstance(item, msgspec.Struct):
            raise TypeError(f"{ctx.method} yielded a {type(item).__name__}, not a msgspec Struct")
        return encode_frame(
            encode(Event(id=ctx.request_id, event=item)),
            max_frame_bytes=CONTROL_MAX_RESPONSE_BYTES,
        )

    def _result(self, ctx: CallContext, result: object) -> Response:
        if not isinstance(result, msgspec.Struct):
            raise TypeError(
                f"{ctx.method} returned a {type(result).__name__}, not a msgspec Struct"
            )
        return Response(id=ctx.request_id, result=result)

    def _failure(self, ctx: CallContext, exc: BaseException, *, expired: bool) -> Response:
        """Map whatever ended a handler to the error its client gets (one boundary)."""
        rid = ctx.request_id
        if isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if rid in self._cancel_asked and task is not None and task.uncancel() == 0:
                return error_response(rid, "cancelled", "cancelled by the client")
            raise exc
        if expired or isinstance(exc, DeadlineExceeded):
            return error_response(rid, "deadline_exceeded", f"{ctx.method} ran past its deadline")
        if isinstance(exc, MethodError):
            return error_response(rid, exc.code, exc.message, exc.data)
        if isinstance(exc, InvalidParams):  # a handler decoding a nested value itself
            return error_response(rid, "invalid_params", str(exc), {"path": exc.path})
        if isinstance(exc, Busy):
            return error_response(rid, "busy", str(exc))
        if not isinstance(exc, Exception):
            raise exc  # KeyboardInterrupt, SystemExit: not ours to answer
        _log.error(
            "control: %s (request %d, conn %d) failed",
            ctx.method,
            rid,
            self.conn_id,
            exc_info=exc,
        )
        return error_response(rid, "internal_error", f"{ctx.method} failed inside gloved")

    # -- writing --------------------------------------------------------------------------------

    def _encode(self, response: Response) -> bytes:
        try:
            return encode_frame(encode(response), max_frame_bytes=CONTROL_MAX_RESPONSE_BYTES)
        except ProtocolError as exc:  # FrameTooLarge: we never send what a client must refuse
            _log.error("control: reply to request %d: %s", response.id, exc)
            message = f"the result is larger than {CONTROL_MAX_RESPONSE_BYTES} bytes"
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            _log.error("control: reply to request %d is not encodable: %s", response.id, exc)
            message = "the result could not be encoded"
        fallback = error_response(response.id, "internal_error", message)
        return encode_frame(encode(fallback), max_frame_bytes=CONTROL_MAX_RESPONSE_BYTES)

    def _send(self, response: Response) -> None:
        """Queue a frame without waiting (error frames just before a close)."""
        if not self._writer.is_closing():
            with contextlib.suppress(OSError):
                self._writer.write(self._encode(response))

    async def _reply(self, response: Response) -> None:
        """Write a reply and wait, under the write deadline, for the client to take it."""
        if self._writer.is_closing():
            return
        self._writer.write(self._encode(response))
        try:
            async with asyncio.timeout(self._limits.write_deadline_s):
                await self._writer.drain()
        except TimeoutError:
            _log.info("control: conn %d does not read its replies; aborting it", self.conn_id)
            self._writer.transport.abort()
        except OSError as exc:
            _log.info("control: conn %d: write failed: %r", self.conn_id, exc)
            self._writer.transport.abort()
