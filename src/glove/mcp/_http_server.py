"""``glove mcp serve --http HOST:PORT``: the agent-facing side over Streamable HTTP.

One endpoint, ``/mcp`` (MCP 2025-03-26 to 2025-11-25 Streamable HTTP)::

    POST /mcp     one JSON-RPC message; a request gets application/json or an SSE stream
    GET  /mcp     the session's standalone SSE stream (server-initiated messages)
    DELETE /mcp   end the session

Every request is checked before anything else, in this order: the path; the ``Host``
header (loopback names, the bound host, and ``--allow-host`` names: against DNS
rebinding); the ``Origin`` header when present (the same names); the bearer token when
``--token-file`` is given (constant-time compare); the ``MCP-Protocol-Version`` header
when present. Any failure is a 4xx with a JSON-RPC error body, and nothing reaches a
mediation.

Sessions: an ``initialize`` without ``Mcp-Session-Id`` starts **one mediation** (its
upstreams, its audit run id) for that session, and the answer carries the new id. Every
later request names the session; an unknown or ended one gets 404 (the client then
initializes again). Sessions end on DELETE, after :attr:`HttpOptions.session_idle_s`
without a request, or when their mediation fails (one strike, as everywhere). At most
:attr:`HttpOptions.max_sessions` live at once (503 beyond).

Streams: a request from a client that accepts ``text/event-stream`` is answered on an SSE
stream that opens with a priming event (an event id and a ``retry`` hint) and carries
that request's progress, the log messages and server-to-client requests related to it,
then its answer (as the SDKs' own servers do); a client that accepts only JSON gets one
JSON body. Messages related to no open request go to the GET stream, or wait
(bounded) for one. Each stream keeps its last events; a GET with ``Last-Event-ID``
replays what followed that event and, if the stream is still open, continues it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

from glove.actors import Actor, ChildSpec, race, settle, spawn_node
from glove.errors import GloveError
from glove.exits import EXIT_FAILED
from glove.mcp._agent_session import AgentSession
from glove.mcp._config import McpConfig
from glove.mcp._endpoint import MAX_AGENT_FRAME_BYTES
from glove.mcp._framing import decode_message, encode_error
from glove.mcp._http import (
    ChunkedDecoder,
    HeadReader,
    RequestHead,
    body_length,
    encode_chunk,
    encode_response_head,
    parse_request_head,
)
from glove.mcp._http_checks import (
    REASONS,
    HttpOptions,
    check_request,
)
from glove.mcp._http_streams import Session, SessionActor, Stream
from glove.mcp._messages import Notification, Request
from glove.mcp._service import Mediation, start_mediation
from glove.mcp.errors import (
    INVALID_REQUEST,
    UPSTREAM_FAILED,
    FramingError,
    HttpError,
    agent_message,
)

_log = logging.getLogger(__name__)

READ_CHUNK_BYTES: Final = 64 * 1024
#: A connection must send a whole request head within this, and its body within BODY_S.
HEAD_TIMEOUT_S: Final = 30.0
BODY_TIMEOUT_S: Final = 30.0
#: An idle kept-alive connection is closed after this.
KEEPALIVE_IDLE_S: Final = 120.0
REAP_EVERY_S: Final = 10.0
MIN_REAP_EVERY_S: Final = 0.1
MAX_CONNECTIONS: Final = 256
SESSION_HEADER: Final = "mcp-session-id"
SESSION_NOT_FOUND: Final = -32001


StartMediation = Callable[..., Awaitable[Mediation]]


class HttpFront(Actor):
    """The HTTP listener and its sessions; stop it to end every session."""

    def __init__(
        self,
        config: McpConfig,
        options: HttpOptions,
        *,
        start: StartMediation = start_mediation,
        audit_factory: Callable[[str], Any] | None = None,
    ) -> None:
        super().__init__("mcp-http")
        self.config = config
        self.options = options
        self._start_mediation = start
        self._audit_factory = audit_factory
        self._server: asyncio.Server | None = None
        self.sessions: dict[str, Session] = {}
        self._starting = 0
        self._connections = 0
        self.port: int | None = None
        #: Run ids of the sessions started so far (each mediation's own).
        self.run_ids: list[str] = []

    async def on_start(self) -> None:
        """Listen; start the idle-session reaper.

        Raises:
            OSError: the address cannot be bound.
        """
        self._server = await asyncio.start_server(
            self._accept, self.options.host, self.options.port, limit=READ_CHUNK_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.spawn_task(self._reap(), name="reaper")

    async def on_stop(self) -> None:
        """Stop listening and end every session's mediation."""
        if self._server is not None:
            self._server.close()
        sessions = list(self.sessions.values())
        self.sessions.clear()
        await settle(*(self._end(s) for s in sessions))

    async def handle(self, msg: object) -> object:
        """Takes no messages."""
        return await super().handle(msg)

    # -- connections ------------------------------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._connections >= MAX_CONNECTIONS or self.state != "running":
            writer.close()
            return
        self._connections += 1
        self.spawn_task(self._connection(reader, writer), name="connection")

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_connection(reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except HttpError as exc:
            with contextlib.suppress(ConnectionError):
                await _respond_error(writer, exc.status, str(exc), close=True)
        except Exception:  # noqa: BLE001 - one connection's bug must not take the front down
            _log.exception("HTTP connection failed")
        finally:
            self._connections -= 1
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        rest = b""
        timeout = HEAD_TIMEOUT_S
        while True:
            head_bytes, rest = await _read_head(reader, rest, timeout)
            if head_bytes is None:
                return
            timeout = KEEPALIVE_IDLE_S
            request = parse_request_head(head_bytes)
            body, rest = await _read_body(reader, request, rest)
            keep = await self._route(request, body, writer)
            await writer.drain()
            if (
                not keep
                or request.version == "HTTP/1.0"
                or (request.header("connection") or "").lower() == "close"
            ):
                return

    # -- routing ---------------------------------------------------------------------------

    async def _route(self, head: RequestHead, body: bytes, writer: asyncio.StreamWriter) -> bool:
        try:
            check_request(head, self.options)
        except HttpError as exc:
            extra = [("WWW-Authenticate", "Bearer")] if exc.status == 401 else []
            await _respond_error(writer, exc.status, str(exc), extra=extra)
            return True
        if head.method == "POST":
            return await self._post(head, body, writer)
        if head.method == "GET":
            return await self._get(head, writer)
        if head.method == "DELETE":
            session = self._session_of(head)
            if session is None:
                await _respond_error(writer, 404, "session not found", code=SESSION_NOT_FOUND)
                return True
            self.sessions.pop(session.id, None)
            await self._end(session)
            _respond(writer, 200, b"", [])
            return True
        await _respond_error(
            writer, 405, "method not allowed", extra=[("Allow", "GET, POST, DELETE")]
        )
        return True

    def _session_of(self, head: RequestHead) -> Session | None:
        session_id = head.header(SESSION_HEADER)
        session = self.sessions.get(session_id) if session_id else None
        if session is not None and _ended(session.mediation):
            # One strike ended it: forget it now, and finish its teardown (the mediation's
            # failure is collected there) without holding up this request.
            self.sessions.pop(session.id, None)
            self.spawn_task(self._end(session), name="end-session")
            return None
        if session is not None:
            session.last_used = time.monotonic()
        return session

    async def _post(  # noqa: PLR0911 - one early answer per refusal, in the order checked
        self, head: RequestHead, body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        content_type = (head.header("content-type") or "").lower()
        if not content_type.startswith("application/json"):
            await _respond_error(writer, 415, "Content-Type must be application/json")
            return True
        try:
            message = decode_message(body)
        except FramingError as exc:
            frame = encode_error(exc.request_id, exc.code, str(exc)[:256])
            _respond(writer, 400, frame, [("Content-Type", "application/json")])
            return True
        accepts_sse = "text/event-stream" in (head.header("accept") or "")
        if head.header(SESSION_HEADER) is None:
            if isinstance(message, Request) and message.method == "initialize":
                return await self._initialize(message, writer)
            await _respond_error(
                writer, 400, "Bad Request: no valid session ID", code=INVALID_REQUEST
            )
            return True
        session = self._session_of(head)
        if session is None or session.agent is None:
            await _respond_error(writer, 404, "session not found", code=SESSION_NOT_FOUND)
            return True
        if not isinstance(message, Request):
            await session.agent.on_message(message)
            if isinstance(message, Notification) and message.method == "notifications/cancelled":
                # A cancelled request is never answered (MCP): end its stream now.
                session.cancelled((message.params or {}).get("requestId"))
            _respond(writer, 202, b"", [])
            return True
        if message.method == "initialize":
            await _respond_error(
                writer, 400, "the session is already initialized", code=INVALID_REQUEST
            )
            return True
        session.busy += 1
        try:
            if accepts_sse:
                return await self._answer_on_stream(session, message, writer)
            return await self._answer_json(session, message, writer)
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()

    async def _answer_json(
        self, session: Session, message: Request, writer: asyncio.StreamWriter
    ) -> bool:
        assert session.agent is not None
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        session.waiters[message.id] = waiter
        try:
            await session.agent.on_message(message)
            waits: set[asyncio.Future[Any]] = {waiter, session.mediation.failed}
            await asyncio.wait(waits, timeout=self._max_wait(), return_when=asyncio.FIRST_COMPLETED)
        finally:
            session.waiters.pop(message.id, None)
        if waiter.done():
            _respond(writer, 200, waiter.result(), self._headers(session, "application/json"))
            return True
        waiter.cancel()
        failure = encode_error(message.id, UPSTREAM_FAILED, "the mediation session ended")
        _respond(writer, 200, failure, self._headers(session, "application/json"))
        return True

    async def _answer_on_stream(
        self, session: Session, message: Request, writer: asyncio.StreamWriter
    ) -> bool:
        assert session.agent is not None
        stream = session.open_stream(message.id)
        writer.write(
            encode_response_head(
                200, "OK", self._headers(session, "text/event-stream", chunked=True)
            )
        )
        stream.attach(writer)
        await session.agent.on_message(message)
        return await self._hold(session, stream, writer)

    async def _hold(self, session: Session, stream: Stream, writer: asyncio.StreamWriter) -> bool:
        """Keep the response open until the stream ends, the client goes, or the session ends."""
        await race(stream.ended.wait(), stream.detached.wait(), session.mediation.failed)
        if stream.ended.is_set():
            return True
        if session.mediation.failed.done() and stream.writer is writer:
            stream.end()
            return True
        return False  # the client went away: this connection is done

    async def _get(  # noqa: PLR0911 - one early answer per refusal, in the order checked
        self, head: RequestHead, writer: asyncio.StreamWriter
    ) -> bool:
        if "text/event-stream" not in (head.header("accept") or ""):
            await _respond_error(writer, 406, "GET needs Accept: text/event-stream")
            return True
        session = self._session_of(head)
        if session is None:
            await _respond_error(writer, 404, "session not found", code=SESSION_NOT_FOUND)
            return True
        last = head.header("last-event-id")
        if last is not None:
            key, _, number = last.rpartition("-")
            stream = session.by_key.get(key)
            if stream is None or not (number.isascii() and number.isdigit()):
                await _respond_error(writer, 404, "unknown Last-Event-ID")
                return True
            writer.write(
                encode_response_head(
                    200, "OK", self._headers(session, "text/event-stream", chunked=True)
                )
            )
            stream.attach(writer, replay_after=int(number))
            if stream.ended.is_set():
                writer.write(encode_chunk(b""))
                return True
            return await self._hold(session, stream, writer)
        if session.get_stream is not None and session.get_stream.writer is not None:
            await _respond_error(writer, 409, "the session already has a GET stream")
            return True
        stream = session.get_stream or Stream(secrets.token_hex(6), self.options.retry_ms)
        session.get_stream = stream
        session.by_key[stream.key] = stream
        writer.write(
            encode_response_head(
                200, "OK", self._headers(session, "text/event-stream", chunked=True)
            )
        )
        stream.attach(writer)
        while session.backlog:
            stream.send(session.backlog.popleft())
        return await self._hold(session, stream, writer)

    # -- sessions ------------------------------------------------------------------------------

    async def _initialize(self, message: Request, writer: asyncio.StreamWriter) -> bool:
        if len(self.sessions) + self._starting >= self.options.max_sessions:
            await _respond_error(writer, 503, "too many sessions", extra=[("Retry-After", "5")])
            return True
        params = message.params or {}
        caps = params.get("capabilities")
        session_id = secrets.token_urlsafe(24)
        run_id = secrets.token_hex(6)
        self._starting += 1
        try:
            mediation = await self._start_mediation(
                self.config,
                audit_factory=self._audit_factory,
                client_capabilities=dict(caps) if isinstance(caps, dict) else {},
                run_id=run_id,
            )
        except GloveError as exc:
            _log.error("glove mcp: a session failed to start: %s", exc)
            frame = encode_error(
                message.id,
                UPSTREAM_FAILED,
                f"the mediation failed to start: {agent_message(exc)}"[:512],
            )
            _respond(writer, 500, frame, [("Content-Type", "application/json")])
            return True
        finally:
            self._starting -= 1
        self.run_ids.append(run_id)
        actor = SessionActor(session_id)
        session = Session(session_id, mediation, actor, self.options)
        agent = AgentSession(
            mediation.mediator,  # type: ignore[arg-type]
            session.emit,
            lambda coro, name: actor.spawn_task(coro, name=name),
            live=lambda: actor.state == "running",
            on_roots_changed=mediation.roots_changed,
        )
        session.agent = agent
        mediation.sessions.append(agent)
        mediation.supervisor.start_child(ChildSpec(actor.name, lambda: actor, restart="temporary"))
        await race(actor.started.wait(), mediation.failed)
        self.sessions[session_id] = session
        await self._answer_json(session, message, writer)
        return True

    async def _end(self, session: Session) -> None:
        for stream in list(session.streams.values()):
            stream.end()
        if session.get_stream is not None:
            session.get_stream.end()
        await session.mediation.stop()

    async def _reap(self) -> None:
        # Checked at least twice per idle bound, so a session lives at most 1.5 bounds idle.
        every = min(REAP_EVERY_S, max(MIN_REAP_EVERY_S, self.options.session_idle_s / 2))
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                failed = _ended(session.mediation)
                idle = not session.busy and now - session.last_used > self.options.session_idle_s
                if failed or idle:
                    self.sessions.pop(session.id, None)
                    await self._end(session)

    def _max_wait(self) -> float:
        return max(u.call_timeout_s for u in self.config.upstreams.values()) + 5.0

    def _headers(
        self, session: Session, content_type: str, *, chunked: bool = False
    ) -> list[tuple[str, str]]:
        headers = [("Content-Type", content_type), ("Mcp-Session-Id", session.id)]
        if chunked:
            headers += [("Cache-Control", "no-cache"), ("Transfer-Encoding", "chunked")]
        return headers


def _ended(mediation: Mediation) -> bool:
    """Whether a session's mediation has ended or is tearing down (one strike)."""
    return mediation.failed.done() or mediation.supervisor.state != "running" or mediation.struck


async def _read_head(
    reader: asyncio.StreamReader, rest: bytes, timeout: float
) -> tuple[bytes | None, bytes]:
    heads = HeadReader()
    found = heads.feed(rest) if rest else None
    async with asyncio.timeout(timeout):
        while found is None:
            chunk = await reader.read(READ_CHUNK_BYTES)
            if not chunk:
                if heads.pending:
                    raise HttpError(400, "the connection closed inside a request head")
                return None, b""
            found = heads.feed(chunk)
    return found


async def _read_body(
    reader: asyncio.StreamReader, head: RequestHead, rest: bytes
) -> tuple[bytes, bytes]:
    length = body_length(head.headers, MAX_AGENT_FRAME_BYTES)
    async with asyncio.timeout(BODY_TIMEOUT_S):
        if length is not None:
            while len(rest) < length:
                chunk = await reader.read(READ_CHUNK_BYTES)
                if not chunk:
                    raise HttpError(400, "the connection closed inside a request body")
                rest += chunk
            return rest[:length], rest[length:]
        decoder = ChunkedDecoder(MAX_AGENT_FRAME_BYTES)
        body, left = decoder.feed(rest)
        parts = [body]
        while not decoder.done:
            chunk = await reader.read(READ_CHUNK_BYTES)
            if not chunk:
                raise HttpError(400, "the connection closed inside a chunked body")
            body, left = decoder.feed(chunk)
            parts.append(body)
        return b"".join(parts), left


def _respond(
    writer: asyncio.StreamWriter, status: int, body: bytes, headers: list[tuple[str, str]]
) -> None:
    head = encode_response_head(
        status, REASONS.get(status, "Error"), [*headers, ("Content-Length", str(len(body)))]
    )
    writer.write(head + body)


async def _respond_error(
    writer: asyncio.StreamWriter,
    status: int,
    message: str,
    *,
    code: int = INVALID_REQUEST,
    extra: list[tuple[str, str]] | None = None,
    close: bool = False,
) -> None:
    body = msgspec.json.encode(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message[:256]}}
    )
    headers = [("Content-Type", "application/json"), *(extra or [])]
    if close:
        headers.append(("Connection", "close"))
    _respond(writer, status, body, headers)
    await writer.drain()


STOP_SIGNALS_HTTP: Final = ("SIGTERM", "SIGINT", "SIGHUP")


async def serve_http(
    config: McpConfig,
    options: HttpOptions,
    *,
    ready: Callable[[int], None] | None = None,
) -> int:
    """Serve Streamable HTTP until a stop signal (0) or the front fails (1).

    ``ready(port)`` is called once listening (the CLI prints the URL).

    Raises:
        OSError: the address cannot be bound.
    """
    import signal

    front = HttpFront(config, options)
    task = await spawn_node(front)
    if task.done():
        task.result()  # raises the bind failure
        return EXIT_FAILED
    assert front.port is not None
    if ready is not None:
        ready(front.port)
    interrupt = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = [getattr(signal, name) for name in STOP_SIGNALS_HTTP]
    for signum in signals:
        loop.add_signal_handler(signum, interrupt.set)
    try:
        await race(interrupt.wait(), task)
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
    failed = task.done()
    front.stop()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return 1 if failed else 0
