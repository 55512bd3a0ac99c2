"""The Streamable HTTP transport of an upstream: ``url = "https://..."``.

Each JSON-RPC message Glove sends is one POST to the URL. A request's answer comes back
as one JSON body or as an SSE stream carrying the server's progress, log messages and
server-to-client requests before the answer; every message on it is delivered to the
actor like a line from a stdio server (and, like one, may make the reader wait for its
audit record). An SSE event of another type than ``message`` that carries data is handed
to the actor as dropped, so it is audited too. Notifications and answers to the server's requests
get 202. After the handshake a GET stream is opened for server-initiated messages (a 405
is fine: not every server offers one), and ``close`` ends the session with DELETE.

TLS is verified (the system's trust store, host name checked); plain ``http://`` is only
accepted for loopback addresses. The extra headers come from Glove's own environment
variables or files named in the configuration (:func:`~glove.mcp._config.header_values`),
never from the agent. Connections are kept alive and reused.

Failure: a connection that cannot be made, a malformed response, or a 404 for the
session (the server forgot it) is a transport failure that crashes the actor, as a dead
stdio server would. Any other HTTP error status answers the one request it belongs to
with ``-33002``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from glove.mcp._config import UpstreamConfig, header_values
from glove.mcp._framing import encode_error
from glove.mcp._http import (
    ChunkedDecoder,
    HeadReader,
    ResponseHead,
    SseParser,
    body_length,
    parse_response_head,
)
from glove.mcp.errors import UPSTREAM_FAILED, HttpError, McpConfigError, UpstreamTransportError

READ_CHUNK_BYTES: Final = 64 * 1024
CONNECT_TIMEOUT_S: Final = 10.0
CLOSE_TIMEOUT_S: Final = 2.0
MAX_IDLE_CONNECTIONS: Final = 8
#: Times a request's SSE stream is resumed (GET with Last-Event-ID) after the server
#: closed it before the answer, and the wait before each when the server gave no retry.
MAX_RESUMES: Final = 8
DEFAULT_RESUME_WAIT_S: Final = 0.5
MAX_RESUME_WAIT_S: Final = 10.0
USER_AGENT: Final = "glove-mcp"

Deliver = Callable[[bytes], Awaitable[None] | None]
Discard = Callable[[bytes, str], Awaitable[None] | None]
Spawn = Callable[[Any, str], object]


class _IdOnly(msgspec.Struct):
    id: int | str | None = None
    method: str | None = None


_ID: Final = msgspec.json.Decoder(_IdOnly)


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HttpTransport:
    """Talks Streamable HTTP to one upstream."""

    def __init__(self, upstream_id: str, config: UpstreamConfig, max_frame_bytes: int) -> None:
        assert config.url is not None
        self.upstream_id = upstream_id
        self.config = config
        self._max_frame_bytes = max_frame_bytes
        parts = urlsplit(config.url)
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._tls else 80)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._authority = parts.netloc.rpartition("@")[2]
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._headers: dict[str, str] = {}
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._deliver: Deliver | None = None
        self._discard: Discard | None = None
        self._spawn: Spawn | None = None
        self._ssl: ssl.SSLContext | None = None
        self._get_started = False

    # -- the transport contract ---------------------------------------------------------------

    async def open(self, deliver: Deliver, spawn: Spawn, discard: Discard) -> None:
        """Read the configured headers; connections are made on the first request.

        Raises:
            UpstreamTransportError: a plain-HTTP URL that is not loopback, or a header whose
                variable or file is missing.
        """
        if not self._tls and not _loopback(self._host):
            raise UpstreamTransportError(
                self.upstream_id, "plain http:// is only allowed to a loopback address"
            )
        try:
            self._headers = header_values(self.config, dict(os.environ))
        except McpConfigError as exc:
            raise UpstreamTransportError(self.upstream_id, str(exc)) from exc
        if self._tls:
            self._ssl = ssl.create_default_context()
        self._deliver = deliver
        self._discard = discard
        self._spawn = spawn

    def send(self, frame: bytes, *, expects_reply: bool = False) -> None:
        """POST one message; its answer (if any) is delivered when it comes."""
        assert self._spawn is not None
        self._spawn(self._post(frame, expects_reply), "post")
        if not self._get_started and self.protocol_version is not None and not expects_reply:
            # The handshake is done (the actor set the version before notifications/initialized).
            self._get_started = True
            self._spawn(self._listen(), "get-stream")

    async def close(self) -> None:
        """End the session (DELETE, best effort) and close the kept connections."""
        if self.session_id is not None:
            with contextlib.suppress(OSError, HttpError, TimeoutError, UpstreamTransportError):
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    reader, writer = await self._connection()
                    writer.write(self._head("DELETE", 0, accept="application/json"))
                    await writer.drain()
                    await self._response_head(reader)
                    writer.close()
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()

    def force_kill(self) -> None:
        """Drop every kept connection at once."""
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()

    @property
    def pid(self) -> int | None:
        """An HTTP upstream has no process of Glove's."""
        return None

    @property
    def stderr_tail(self) -> bytes:
        """An HTTP upstream has no stderr."""
        return b""

    # -- requests ---------------------------------------------------------------------------

    def _head(
        self, method: str, length: int, *, accept: str, last_event_id: str | None = None
    ) -> bytes:
        lines = [
            f"{method} {self._path} HTTP/1.1",
            f"Host: {self._authority}",
            f"User-Agent: {USER_AGENT}",
            f"Accept: {accept}",
        ]
        if method == "POST":
            lines += ["Content-Type: application/json", f"Content-Length: {length}"]
        if self.session_id is not None:
            lines.append(f"Mcp-Session-Id: {self.session_id}")
        if self.protocol_version is not None:
            lines.append(f"MCP-Protocol-Version: {self.protocol_version}")
        if last_event_id is not None:
            lines.append(f"Last-Event-ID: {last_event_id}")
        lines += [f"{name}: {value}" for name, value in self._headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while self._idle:
            reader, writer = self._idle.pop()
            if not writer.is_closing() and not reader.at_eof():
                return reader, writer
            writer.close()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                return await asyncio.open_connection(
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._tls else None,
                    limit=READ_CHUNK_BYTES,
                )
        except (OSError, TimeoutError) as exc:
            raise UpstreamTransportError(
                self.upstream_id, f"cannot connect to {self._authority}: {exc}"
            ) from exc

    async def _post(self, frame: bytes, expects_reply: bool) -> None:
        body = frame.rstrip(b"\n")
        try:
            reader, writer = await self._connection()
            writer.write(
                self._head("POST", len(body), accept="application/json, text/event-stream")
            )
            writer.write(body)
            await writer.drain()
            head, rest = await self._response_head(reader)
            session = head.header("mcp-session-id")
            if session is not None and self.session_id is None:
                self.session_id = session
            if head.status == 404 and self.session_id is not None:
                raise UpstreamTransportError(self.upstream_id, "the server ended the session (404)")
            if head.status >= 300:
                await self._skip_body(reader, head, rest)
                self._reuse(reader, writer, head)
                if expects_reply:
                    await self._fail_request(body, f"HTTP {head.status} {head.reason}")
                return
            answered, last_id, retry_ms = await self._read_body(
                reader, head, rest, self._request_id(body) if expects_reply else None
            )
            self._reuse(reader, writer, head)
            if expects_reply and not answered and last_id is not None:
                await self._resume(body, last_id, retry_ms)
        except HttpError as exc:
            raise UpstreamTransportError(self.upstream_id, f"bad HTTP response: {exc}") from exc
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise UpstreamTransportError(self.upstream_id, f"connection lost: {exc}") from exc

    async def _resume(self, body: bytes, last_id: str, retry_ms: int | None) -> None:
        """The server closed a request's stream before answering (SSE polling): reconnect
        with ``Last-Event-ID`` until the answer comes."""
        request_id = self._request_id(body)
        for _ in range(MAX_RESUMES):
            wait = DEFAULT_RESUME_WAIT_S if retry_ms is None else retry_ms / 1000
            await asyncio.sleep(min(wait, MAX_RESUME_WAIT_S))
            reader, writer = await self._connection()
            writer.write(self._head("GET", 0, accept="text/event-stream", last_event_id=last_id))
            await writer.drain()
            head, rest = await self._response_head(reader)
            if head.status >= 300:
                await self._skip_body(reader, head, rest)
                self._reuse(reader, writer, head)
                break
            answered, newer, retry = await self._read_body(reader, head, rest, request_id)
            self._reuse(reader, writer, head)
            if answered:
                return
            last_id = newer or last_id
            retry_ms = retry if retry is not None else retry_ms
        await self._fail_request(body, "the server closed the stream and never answered")

    def _request_id(self, body: bytes) -> int | str | None:
        try:
            return _ID.decode(body).id
        except msgspec.DecodeError:
            return None

    async def _listen(self) -> None:
        try:
            reader, writer = await self._connection()
            writer.write(self._head("GET", 0, accept="text/event-stream"))
            await writer.drain()
            head, rest = await self._response_head(reader)
            if head.status >= 300:
                writer.close()  # no standalone stream: every message rides a POST's
                return
            await self._read_body(reader, head, rest, None)
            writer.close()
        except (HttpError, ConnectionError, asyncio.IncompleteReadError, UpstreamTransportError):
            return  # the optional GET stream failing is not the session failing

    def _reuse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: ResponseHead
    ) -> None:
        closing = (head.header("connection") or "").lower() == "close"
        if closing or len(self._idle) >= MAX_IDLE_CONNECTIONS or reader.at_eof():
            writer.close()
        else:
            self._idle.append((reader, writer))

    async def _fail_request(self, body: bytes, why: str) -> None:
        request_id = self._request_id(body)
        if request_id is not None and self._deliver is not None:
            pending = self._deliver(encode_error(request_id, UPSTREAM_FAILED, why).rstrip(b"\n"))
            if pending is not None:
                await pending

    # -- responses ----------------------------------------------------------------------------

    async def _response_head(self, reader: asyncio.StreamReader) -> tuple[ResponseHead, bytes]:
        heads = HeadReader()
        while True:
            chunk = await reader.read(READ_CHUNK_BYTES)
            if not chunk:
                raise UpstreamTransportError(self.upstream_id, "the server closed the connection")
            found = heads.feed(chunk)
            if found is not None:
                head_bytes, rest = found
                return parse_response_head(head_bytes), rest

    async def _chunks(
        self, reader: asyncio.StreamReader, head: ResponseHead, rest: bytes
    ) -> AsyncIterator[bytes]:
        """Yield the body's bytes as they arrive (length-delimited, chunked or to EOF)."""
        length = body_length(head.headers, 1 << 62)
        if head.status in (202, 204) or (length == 0 and head.header("content-length")):
            return
        if length is not None and head.header("content-length") is not None:
            got = rest[:length]
            yield got
            while len(got) < length:
                chunk = await reader.read(min(READ_CHUNK_BYTES, length - len(got)))
                if not chunk:
                    raise UpstreamTransportError(self.upstream_id, "a response body was cut")
                got += chunk
                yield chunk
            return
        if length is None:
            decoder = ChunkedDecoder(1 << 62)
            data, _ = decoder.feed(rest)
            yield data
            while not decoder.done:
                chunk = await reader.read(READ_CHUNK_BYTES)
                if not chunk:
                    raise UpstreamTransportError(self.upstream_id, "a chunked response was cut")
                data, _ = decoder.feed(chunk)
                yield data
            return
        # Neither header: the body runs to the end of the connection (RFC 9112 section 6.3),
        # as a plain HTTP/1.1 server streams SSE; body_length's 0 only means "no length".
        yield rest
        while chunk := await reader.read(READ_CHUNK_BYTES):
            yield chunk

    async def _read_body(
        self,
        reader: asyncio.StreamReader,
        head: ResponseHead,
        rest: bytes,
        request_id: int | str | None,
    ) -> tuple[bool, str | None, int | None]:
        """Deliver every message of the body; return whether the answer to ``request_id``
        was among them, the last SSE event id and the server's retry hint."""
        content_type = (head.header("content-type") or "").lower()
        deliver, discard = self._deliver, self._discard
        assert deliver is not None
        assert discard is not None
        if content_type.startswith("text/event-stream"):
            parser = SseParser()
            answered = False
            last_id: str | None = None
            retry: int | None = None
            async for data in self._chunks(reader, head, rest):
                for event in parser.feed(data):
                    last_id = event.id or last_id
                    retry = event.retry if event.retry is not None else retry
                    if not event.data.strip():
                        continue  # a priming event, a keep-alive: nothing was said
                    self._check_size(len(event.data))
                    message = event.data.encode()
                    if event.event != "message":
                        pending = discard(message, f"an SSE event of type {event.event!r}")
                    else:
                        answered = answered or self._answers(message, request_id)
                        pending = deliver(message)
                    if pending is not None:
                        await pending
            return answered, last_id, retry
        body = bytearray()
        async for data in self._chunks(reader, head, rest):
            body += data
            self._check_size(len(body))
        if body.strip():
            pending = deliver(bytes(body))
            if pending is not None:
                await pending
        return True, None, None

    @staticmethod
    def _answers(message: bytes, request_id: int | str | None) -> bool:
        if request_id is None:
            return False
        try:
            found = _ID.decode(message)
        except msgspec.DecodeError:
            return False
        return found.id == request_id and found.method is None

    async def _skip_body(
        self, reader: asyncio.StreamReader, head: ResponseHead, rest: bytes
    ) -> None:
        size = 0
        async for data in self._chunks(reader, head, rest):
            size += len(data)
            self._check_size(size)

    def _check_size(self, size: int) -> None:
        if size > self._max_frame_bytes:
            raise UpstreamTransportError(
                self.upstream_id, f"wrote a message over {self._max_frame_bytes} bytes"
            )
