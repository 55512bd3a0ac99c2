"""One upstream MCP server: a host subprocess on stdio, owned by one actor.

The actor starts the server with a scrubbed environment, completes the handshake the
server speaks (a ``server/discover`` probe for the stateless 2026-07-28 era, falling back
to the ``initialize`` handshake every off-the-shelf server speaks today), lists its tools
page by page, and then forwards ``tools/call`` requests under ids of its own.

Failure is never a hang: garbage or an oversized frame on the server's stdout, end of
file, or the process exiting fails every pending call at once with
:class:`~glove.mcp.errors.UpstreamTransportError` and crashes the actor, so its
supervisor applies the session's rules. A caller that gives up (its deadline passed, or
the agent cancelled) cancels the reply future; the actor then sends
``notifications/cancelled`` upstream and drops the late reply when it comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import Callable
from typing import Any, Final

import msgspec

from glove.actors import Actor, Deferred
from glove.mcp._config import UpstreamConfig, child_environment
from glove.mcp._framing import (
    OVERSIZED,
    LineSplitter,
    decode_message,
    encode_error,
    encode_notification,
    encode_request,
)
from glove.mcp._messages import (
    DiscoverResult,
    ErrorResponse,
    InitializeResult,
    ListToolsPage,
    Notification,
    Request,
    Response,
    ToolInfo,
)
from glove.mcp.errors import (
    METHOD_NOT_FOUND,
    FramingError,
    UpstreamCallFailed,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTransportError,
)

_log = logging.getLogger(__name__)

MAX_UPSTREAM_FRAME_BYTES: Final = 16 * 1024 * 1024
READ_CHUNK_BYTES: Final = 256 * 1024
STDERR_TAIL_BYTES: Final = 8 * 1024
MAX_TOOL_PAGES: Final = 100
MAX_TOOLS: Final = 4096
MAX_PENDING_CALLS: Final = 256
PROBE_TIMEOUT_S: Final = 3.0
STOP_GRACE_S: Final = 2.0

MODERN_VERSION: Final = "2026-07-28"
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_LEGACY_VERSION: Final = LEGACY_VERSIONS[0]
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_INFO: Final = {"name": "glove", "version": "0.1.0"}
LISTEN_FILTER: Final = {"toolsListChanged": True}

ProgressSink = Callable[[dict[str, Any]], None]
ToolsChanged = Callable[[str], None]


class CallTool(msgspec.Struct, frozen=True):
    """Forward ``tools/call`` of the upstream's own tool ``name``; reply is the raw result.

    ``progress`` receives the params of each ``notifications/progress`` for this call with
    the upstream's token already replaced by ``progress_token`` (the agent's own).
    """

    name: str
    arguments: dict[str, Any] | None
    progress_token: int | str | None = None
    progress: ProgressSink | None = None


class ListTools(msgspec.Struct, frozen=True):
    """Return the upstream's tools as last listed (a ``list[ToolInfo]``)."""


class _Pending:
    __slots__ = ("future", "method", "progress", "progress_token")

    def __init__(
        self,
        future: asyncio.Future[Any],
        method: str,
        progress_token: int | str | None,
        progress: ProgressSink | None,
    ) -> None:
        self.future = future
        self.method = method
        self.progress_token = progress_token
        self.progress = progress


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a future nobody awaits (a listen stream ends with the actor)."""
    if not future.cancelled():
        future.exception()


def tool_info(raw: dict[str, Any]) -> ToolInfo:
    """Read the parts of one tool definition Glove needs.

    Raises:
        TypeError: the definition has no string ``name`` or a non-object schema.
    """
    name = raw.get("name")
    description = raw.get("description")
    schema = raw.get("inputSchema", {})
    if not isinstance(name, str) or not isinstance(schema, dict):
        raise TypeError("a tool definition needs a string name and an object inputSchema")
    return ToolInfo(name, description if isinstance(description, str) else None, schema, raw)


class UpstreamActor(Actor):
    """Owns one upstream server process and every request in flight to it."""

    def __init__(
        self,
        upstream_id: str,
        config: UpstreamConfig,
        *,
        on_tools_changed: ToolsChanged | None = None,
        max_frame_bytes: int = MAX_UPSTREAM_FRAME_BYTES,
    ) -> None:
        super().__init__(f"mcp-{upstream_id}")
        self.upstream_id = upstream_id
        self.config = config
        self.era: str | None = None
        self.server_info: dict[str, Any] = {}
        self.tools: list[ToolInfo] = []
        self._on_tools_changed = on_tools_changed
        self._max_frame_bytes = max_frame_bytes
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._failure: UpstreamError | None = None
        self._stderr_tail: deque[bytes] = deque()
        self._stderr_bytes = 0
        self._relisting = False

    # -- life ---------------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Start the process, complete the handshake and list the tools.

        Raises:
            UpstreamTransportError: the program cannot be started or died during startup.
            UpstreamProtocolError: the handshake or the tool list was malformed.
            DeadlineExceeded: startup took longer than ``startup_timeout_s``.
        """
        env = child_environment(self.config, dict(os.environ))
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.config.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=self.config.cwd,
                start_new_session=True,
                limit=READ_CHUNK_BYTES,
            )
        except OSError as exc:
            raise UpstreamTransportError(
                self.upstream_id, f"cannot start {self.config.command[0]!r}: {exc.strerror}"
            ) from exc
        self.spawn_task(self._read_stdout(), name="stdout")
        self.spawn_task(self._drain_stderr(), name="stderr")
        try:
            async with asyncio.timeout(self.config.startup_timeout_s):
                await self._handshake()
                self.tools = await self._list_all_tools()
        except TimeoutError as exc:
            raise UpstreamTransportError(
                self.upstream_id,
                f"no handshake and tool list within {self.config.startup_timeout_s} s",
            ) from exc

    async def on_stop(self) -> None:
        """Fail what is pending, then close stdin, SIGTERM and SIGKILL the process group."""
        self._fail_all(self._failure or UpstreamTransportError(self.upstream_id, "stopped"))
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
            # Always awaited, even when the server already exited: a write that met a closed
            # pipe leaves a BrokenPipeError on the stdin close future, which asyncio would
            # otherwise report on stderr as "Future exception was never retrieved".
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(STOP_GRACE_S):
                    await proc.stdin.wait_closed()
        if proc.returncode is not None:
            return
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_GRACE_S):
                    await proc.wait()
                return

    def force_kill(self) -> None:
        """SIGKILL the server's process group at once."""
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)

    @property
    def pid(self) -> int | None:
        """The server's process id once started."""
        return None if self._proc is None else self._proc.pid

    @property
    def stderr_tail(self) -> bytes:
        """The last bytes the server wrote on stderr (bounded), for diagnostics."""
        return b"".join(self._stderr_tail)

    # -- messages -----------------------------------------------------------------------------

    async def handle(self, msg: object) -> object:
        """Forward a call (a deferred raw result) or return the cached tool list.

        Raises:
            UpstreamTransportError: the upstream has already failed.
        """
        if isinstance(msg, CallTool):
            params: dict[str, Any] = {"name": msg.name}
            if msg.arguments is not None:
                params["arguments"] = msg.arguments
            return Deferred(
                self._request(
                    "tools/call", params, progress_token=msg.progress_token, progress=msg.progress
                )
            )
        if isinstance(msg, ListTools):
            return list(self.tools)
        return await super().handle(msg)

    # -- requests -----------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        progress_token: int | str | None = None,
        progress: ProgressSink | None = None,
    ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self._failure is not None:
            future.set_exception(self._failure)
            return future
        if len(self._pending) >= MAX_PENDING_CALLS:
            future.set_exception(
                UpstreamTransportError(self.upstream_id, "too many calls in flight")
            )
            return future
        self._next_id += 1
        request_id = self._next_id
        params = dict(params) if params is not None else {}
        meta = dict(params.get("_meta") or {})
        if progress is not None and progress_token is not None:
            meta["progressToken"] = request_id
        if self.era == MODERN_VERSION or method == "server/discover":
            meta[META_PROTOCOL_VERSION] = MODERN_VERSION
            meta[META_CLIENT_CAPABILITIES] = {}
            meta[META_CLIENT_INFO] = CLIENT_INFO
        if meta:
            params["_meta"] = meta
        self._pending[request_id] = _Pending(future, method, progress_token, progress)
        future.add_done_callback(lambda fut: self._settled(request_id, fut))
        self._write(encode_request(request_id, method, params or None))
        return future

    def _settled(self, request_id: int, future: asyncio.Future[Any]) -> None:
        pending = self._pending.pop(request_id, None)
        if pending is not None and future.cancelled() and self._failure is None:
            # The caller gave up: tell the server, and forget the id so a late reply drops.
            self._write(
                encode_notification(
                    "notifications/cancelled",
                    {"requestId": request_id, "reason": "the caller's deadline passed"},
                )
            )

    def _write(self, frame: bytes) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            return
        proc.stdin.write(frame)

    async def _call(self, method: str, params: dict[str, Any] | None) -> msgspec.Raw:
        return await self._request(method, params)  # type: ignore[no-any-return]

    # -- handshake and tools --------------------------------------------------------------------

    async def _handshake(self) -> None:
        if self.config.era in ("auto", MODERN_VERSION) and await self._probe_modern():
            return
        if self.config.era == MODERN_VERSION:
            raise UpstreamProtocolError(self.upstream_id, "the server does not speak 2026-07-28")
        raw = await self._call(
            "initialize",
            {
                "protocolVersion": LATEST_LEGACY_VERSION,
                "capabilities": {},
                "clientInfo": CLIENT_INFO,
            },
        )
        try:
            result = msgspec.json.decode(raw, type=InitializeResult)
        except msgspec.DecodeError as exc:
            raise UpstreamProtocolError(self.upstream_id, f"bad initialize result: {exc}") from exc
        if result.protocol_version not in LEGACY_VERSIONS:
            raise UpstreamProtocolError(
                self.upstream_id, f"unsupported protocol version {result.protocol_version!r}"
            )
        self.era = result.protocol_version
        self.server_info = result.server_info
        self._write(encode_notification("notifications/initialized"))

    async def _probe_modern(self) -> bool:
        future = self._request("server/discover", {})
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                raw = await future
        except UpstreamTransportError:
            raise
        except (UpstreamError, TimeoutError):
            # Any error or silence means "not modern": the spec forbids keying the
            # fallback to one error code.
            return False
        try:
            result = msgspec.json.decode(raw, type=DiscoverResult)
        except msgspec.DecodeError:
            return False
        if MODERN_VERSION not in result.supported_versions:
            return False
        self.era = MODERN_VERSION
        tools = result.capabilities.get("tools")
        if isinstance(tools, dict) and tools.get("listChanged"):
            # 2026-07-28 delivers list_changed only on a subscriptions/listen stream: open
            # one for the life of the connection; its notifications arrive like any other.
            stream = self._request("subscriptions/listen", {"notifications": LISTEN_FILTER})
            stream.add_done_callback(_consume)
        return True

    async def _list_all_tools(self) -> list[ToolInfo]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            raw = await self._call("tools/list", None if cursor is None else {"cursor": cursor})
            try:
                page = msgspec.json.decode(raw, type=ListToolsPage)
                tools.extend(tool_info(definition) for definition in page.tools)
            except (msgspec.DecodeError, TypeError) as exc:
                raise UpstreamProtocolError(self.upstream_id, f"bad tools/list: {exc}") from exc
            if len(tools) > MAX_TOOLS:
                raise UpstreamProtocolError(self.upstream_id, f"more than {MAX_TOOLS} tools")
            if not page.next_cursor:
                return tools
            cursor = page.next_cursor
        raise UpstreamProtocolError(self.upstream_id, f"more than {MAX_TOOL_PAGES} pages")

    async def _relist(self) -> None:
        try:
            self.tools = await self._list_all_tools()
        finally:
            self._relisting = False
        if self._on_tools_changed is not None:
            self._on_tools_changed(self.upstream_id)

    # -- reading ------------------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None
        assert proc.stdout is not None
        splitter = LineSplitter(self._max_frame_bytes)
        try:
            while True:
                chunk = await proc.stdout.read(READ_CHUNK_BYTES)
                if not chunk:
                    code = await proc.wait()
                    raise UpstreamTransportError(
                        self.upstream_id, f"closed its stdout (exit status {code})"
                    )
                for frame in splitter.feed(chunk):
                    if frame is OVERSIZED:
                        raise UpstreamTransportError(
                            self.upstream_id, f"wrote a frame over {self._max_frame_bytes} bytes"
                        )
                    assert isinstance(frame, bytes)
                    self._on_frame(frame)
        except UpstreamError as exc:
            self._failure = exc
            self._fail_all(exc)
            raise

    def _on_frame(self, frame: bytes) -> None:
        try:
            message = decode_message(frame)
        except FramingError as exc:
            raise UpstreamTransportError(self.upstream_id, f"wrote garbage: {exc}") from exc
        if isinstance(message, Response | ErrorResponse):
            if not isinstance(message.id, int):
                return  # not an id Glove issued: a late or stray reply, dropped
            pending = self._pending.get(message.id)
            if pending is None or pending.future.done():
                return
            if isinstance(message, Response):
                pending.future.set_result(message.result)
            else:
                pending.future.set_exception(
                    UpstreamCallFailed(self.upstream_id, message.error.code, message.error.message)
                )
        elif isinstance(message, Notification):
            self._on_notification(message)
        elif isinstance(message, Request):
            # Glove declares no client capability, so a server-to-client request (sampling,
            # elicitation, roots) is refused: forwarding it could widen the server's reach.
            self._write(
                encode_error(
                    message.id, METHOD_NOT_FOUND, "Glove relays no server-to-client requests"
                )
            )

    def _on_notification(self, message: Notification) -> None:
        params = message.params or {}
        if message.method == "notifications/progress":
            token = params.get("progressToken")
            pending = self._pending.get(token) if isinstance(token, int) else None
            if pending is not None and pending.progress is not None:
                pending.progress({**params, "progressToken": pending.progress_token})
        elif (
            message.method == "notifications/tools/list_changed"
            and not self._relisting
            and self.era is not None
        ):
            self._relisting = True
            self.spawn_task(self._relist(), name="relist")

    async def _drain_stderr(self) -> None:
        proc = self._proc
        assert proc is not None
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(READ_CHUNK_BYTES):
            # Keep only a bounded tail: a server that floods stderr must not stall on a
            # full pipe nor grow Glove's memory.
            self._stderr_tail.append(chunk[-STDERR_TAIL_BYTES:])
            self._stderr_bytes += len(self._stderr_tail[-1])
            while self._stderr_bytes > STDERR_TAIL_BYTES and len(self._stderr_tail) > 1:
                self._stderr_bytes -= len(self._stderr_tail.popleft())

    def _fail_all(self, exc: UpstreamError) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            if not entry.future.done():
                entry.future.set_exception(exc)
