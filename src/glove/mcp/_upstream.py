"""One upstream MCP server, owned by one actor, over stdio or Streamable HTTP.

The actor opens its transport (:mod:`._upstream_stdio`: a host subprocess with a scrubbed
environment; :mod:`._upstream_http`: an HTTP endpoint), completes the handshake the server
speaks (a ``server/discover`` probe for the stateless 2026-07-28 era, falling back to the
``initialize`` handshake every off-the-shelf server speaks today), lists what it offers
(tools, prompts, resources, resource templates: each as its capabilities say, page by
page), and then forwards requests under ids of its own.

Server-to-client traffic goes to the mediation's :class:`UpstreamEvents`: list changes
(after the actor re-listed), log messages and resource updates, and requests (sampling,
elicitation, roots), which are answered with whatever the mediation decides. ``ping`` from
the server is answered here.

Failure is never a hang: an oversized frame, end of file, the process exiting, or a frame
that is JSON but not JSON-RPC fails every pending call at once with
:class:`~glove.mcp.errors.UpstreamTransportError` and crashes the actor, so its supervisor
applies the session's rules. A line that is not JSON at all is dropped (``stdout =
"lenient"``, the default) or fatal too (``"strict"``). A caller that gives up (its deadline
passed, or the agent cancelled) cancels the reply future; the actor then sends
``notifications/cancelled`` upstream and drops the late reply when it comes.

Nothing the server sends is dropped unaudited (:mod:`._upstream_audit`): a dropped line or
message gets its record through :meth:`UpstreamEvents.record` **before the transport reads
on** (the reader awaits it, so records keep the order of the lines, and a flood is slowed to
the log's pace rather than buffered), and when the actor stops it writes the final counts
and, if it failed, its failure with the last lines of the server's stderr. The audit log is
the mediation's first child, so it is open before the server's first byte is read. Record
writes are shielded from the reader's cancellation and awaited in ``on_stop``: a record
is never abandoned half-way by a crash. A drop that cannot be recorded crashes the actor
(fail closed).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import msgspec

from glove.actors import NOT_NOW, Actor, Deferred, TaskOwner, settle
from glove.mcp._config import UpstreamConfig
from glove.mcp._contracts import arguments_digest
from glove.mcp._framing import (
    decode_message,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)
from glove.mcp._messages import (
    DiscoverResult,
    ErrorResponse,
    InitializeResult,
    ListToolsPage,
    McpObject,
    Notification,
    Request,
    Response,
    ToolInfo,
)
from glove.mcp._text import printable
from glove.mcp._upstream_audit import (
    EXCERPT_BYTES,
    MESSAGE_KIND,
    OUTPUT_KIND,
    DropCounter,
    Record,
    excerpt_of,
    failure_record,
    final_record,
    line_record,
    message_record,
    stderr_lines,
)
from glove.mcp.errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    OVERLOADED,
    PARSE_ERROR,
    FramingError,
    UpstreamCallFailed,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTransportError,
)

_log = logging.getLogger(__name__)

MAX_UPSTREAM_FRAME_BYTES: Final = 16 * 1024 * 1024
MAX_TOOL_PAGES: Final = 100
MAX_TOOLS: Final = 4096
#: Most prompts, resources or templates kept per upstream (each kind separately).
MAX_LISTED_ITEMS: Final = 4096
MAX_PENDING_CALLS: Final = 256
#: Server-to-client requests of one upstream being relayed at once; more are refused.
MAX_SERVER_REQUESTS: Final = 16
#: Cancelled request ids remembered, so a late reply to one is not reported as a stray.
MAX_CANCELLED_REMEMBERED: Final = 1024
#: Longest excerpt of a dropped non-JSON stdout line that is reported, in bytes.
GARBAGE_EXCERPT_BYTES: Final = EXCERPT_BYTES
PROBE_TIMEOUT_S: Final = 3.0
#: How long ``on_stop`` waits for the last audit records (final counts, the failure).
STOP_AUDIT_S: Final = 3.0
STDOUT_DROP_REASON: Final = 'a line on the server\'s stdout was not JSON (stdout = "lenient")'
HTTP_DROP_REASON: Final = "a message on the server's HTTP stream was not JSON"

MODERN_VERSION: Final = "2026-07-28"
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_LEGACY_VERSION: Final = LEGACY_VERSIONS[0]
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_INFO: Final = {"name": "glove", "version": "0.1.0"}
LISTEN_FILTER: Final = {"toolsListChanged": True}
LISTEN_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
#: list_changed notification -> the kind the actor re-lists.
LIST_CHANGED: Final = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}

ProgressSink = Callable[[McpObject], None]
ToolsChanged = Callable[[str], None]
#: Hands the actor one frame; an awaitable result must be awaited before the next frame
#: is read (an audit record the frame needs, or the refusal it gets).
Deliver = Callable[[bytes], Awaitable[None] | None]
#: Hands the actor what a transport itself dropped (an SSE event that is not a message)
#: with the reason; the result is awaited like :data:`Deliver`'s.
Discard = Callable[[bytes, str], Awaitable[None] | None]


class UpstreamEvents(Protocol):
    """Where an upstream's own traffic goes (the mediation implements it)."""

    def list_changed(self, upstream_id: str, kind: str) -> None:
        """``kind`` (tools, prompts, resources) was re-listed after a list_changed."""

    def notification(self, upstream_id: str, method: str, params: McpObject) -> str | None:
        """A notification the actor does not handle itself (log messages, resource updates);
        return why it was dropped, or ``None`` when it went on to the agents."""

    def server_request(
        self, upstream_id: str, method: str, params: McpObject | None
    ) -> Awaitable[Any]:
        """A server-to-client request; the awaitable's result is the answer, an exception
        carrying ``code`` and ``message`` (or any other) an error answer."""
        ...

    def record(self, upstream_id: str, record: dict[str, object]) -> Awaitable[None]:
        """Append an audit record about this upstream's own traffic (a dropped line or
        message, its failure); the awaitable is done once the record is durable, and raises
        the audit log's error (:class:`glove.audit.AuditError`) when it cannot be."""
        ...


class Transport(Protocol):
    """How the actor reaches its server (:class:`StdioTransport` or :class:`HttpTransport`)."""

    session_id: str | None
    protocol_version: str | None

    async def open(
        self, deliver: Deliver, spawn: Callable[[Any, str], object], discard: Discard
    ) -> None: ...
    def send(self, frame: bytes, *, expects_reply: bool = False) -> None: ...
    async def close(self) -> None: ...
    def force_kill(self) -> None: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def stderr_tail(self) -> bytes: ...


class CallTool(msgspec.Struct, frozen=True):
    """Forward ``tools/call`` of the upstream's own tool ``name``; reply is the raw result.

    ``progress`` receives the params of each ``notifications/progress`` for this call with
    the upstream's token already replaced by ``progress_token`` (the agent's own).
    ``arguments`` may come already encoded (:class:`msgspec.Raw`, the mediator's canonical
    encoding), and is then written as it is.
    """

    name: str
    arguments: McpObject | msgspec.Raw | None
    progress_token: int | str | None = None
    progress: ProgressSink | None = None


class Forward(msgspec.Struct, frozen=True):
    """Forward any request (``prompts/get``, ``resources/read``, ...); reply is the raw result."""

    method: str
    params: McpObject | None
    progress_token: int | str | None = None
    progress: ProgressSink | None = None


class Notify(msgspec.Struct, frozen=True):
    """Send a notification upstream (``notifications/roots/list_changed``)."""

    method: str
    params: McpObject | None = None


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


def tool_info(raw: McpObject) -> ToolInfo:
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


_ItemsPage = McpObject


def _make_transport(
    upstream_id: str,
    config: UpstreamConfig,
    max_frame_bytes: int,
    process: subprocess.Popen[bytes] | None,
) -> Transport:
    if config.url is not None:
        from glove.mcp._upstream_http import HttpTransport

        http: Transport = HttpTransport(upstream_id, config, max_frame_bytes)
        return http
    from glove.mcp._upstream_stdio import StdioTransport

    return StdioTransport(upstream_id, config, max_frame_bytes, process=process)


class UpstreamActor(Actor):
    """Owns one upstream server (its transport) and every request in flight to it."""

    def __init__(
        self,
        upstream_id: str,
        config: UpstreamConfig,
        *,
        on_tools_changed: ToolsChanged | None = None,
        events: UpstreamEvents | None = None,
        client_capabilities: Mapping[str, McpObject] | None = None,
        max_frame_bytes: int = MAX_UPSTREAM_FRAME_BYTES,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        super().__init__(f"mcp-{upstream_id}")
        self.upstream_id = upstream_id
        self.config = config
        self.era: str | None = None
        self.server_info: McpObject = {}
        #: What the server advertised (``tools``, ``prompts``, ``resources``, ``logging``...).
        self.capabilities: McpObject = {}
        self.tools: list[ToolInfo] = []
        self.prompts: list[McpObject] = []
        self.resources: list[McpObject] = []
        self.templates: list[McpObject] = []
        #: Non-JSON lines and unwanted messages dropped so far, and what was recorded.
        self._lines = DropCounter()
        self._messages = DropCounter()
        #: Audit records being written (shielded from the reader; awaited in on_stop).
        self._writing = TaskOwner(f"mcp-{upstream_id}/audit")
        self._writes: set[asyncio.Future[None]] = set()
        self._on_tools_changed = on_tools_changed
        self._events = events
        self._client_capabilities = dict(client_capabilities or {})
        #: ``process``: a stdio server already started for this actor (it adopts it).
        self._transport = _make_transport(upstream_id, config, max_frame_bytes, process)
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._failure: UpstreamError | None = None
        self._relisting: set[str] = set()
        #: Ids of requests Glove cancelled, oldest first (a late reply to one is expected).
        self._cancelled: dict[int, None] = {}
        self._serving = 0

    # -- life ---------------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Open the transport, complete the handshake and list what the server offers.

        Raises:
            UpstreamTransportError: the server cannot be reached or died during startup.
            UpstreamProtocolError: the handshake or a list was malformed.
        """
        await self._transport.open(self._on_frame_safely, self._spawn, self._discarded)
        try:
            async with asyncio.timeout(self.config.startup_timeout_s):
                await self._handshake()
                await self._list_everything()
        except TimeoutError as exc:
            why = f"no handshake and tool list within {self.config.startup_timeout_s} s"
            if self._lines.count:
                why += f" (it wrote {self._lines.count} lines that are not JSON: see the audit log)"
            raise UpstreamTransportError(self.upstream_id, why) from exc

    @property
    def dropped_lines(self) -> int:
        """Non-JSON lines dropped so far (``stdout = "lenient"``)."""
        return self._lines.count

    @property
    def dropped_messages(self) -> int:
        """JSON-RPC messages from the server dropped so far (see :mod:`._upstream_audit`)."""
        return self._messages.count

    def _spawn(self, coro: Any, name: str) -> object:
        task = self.spawn_task(self._failing(coro), name=name)
        # A task cancelled before its first step (teardown right after a send) never runs
        # ``coro``: close it, or Python warns on stderr that it was never awaited.
        task.add_done_callback(lambda _: coro.close())
        return task

    async def _failing(self, coro: Any) -> None:
        try:
            await coro
        except UpstreamError as exc:
            self._failure = exc
            self._fail_all(exc)
            raise

    async def on_stop(self) -> None:
        """Fail what is pending, write the last audit records (final counts; the failure with
        the server's last stderr lines), then close the transport (stdin EOF, SIGTERM,
        SIGKILL)."""
        self._fail_all(self._failure or UpstreamTransportError(self.upstream_id, "stopped"))
        try:
            async with asyncio.timeout(STOP_AUDIT_S):
                await self._audit_the_end()
        except Exception as exc:  # noqa: BLE001 - teardown goes on; the log says why
            _log.error(
                "upstream %r: its last audit records were not written: %r", self.upstream_id, exc
            )
        await self._transport.close()

    async def _audit_the_end(self) -> None:
        if self._writes:
            await settle(*self._writes)
        for kind, counter in ((OUTPUT_KIND, self._lines), (MESSAGE_KIND, self._messages)):
            count = counter.final()
            if count is not None:
                await self._record_now(final_record(kind, self.upstream_id, counter, count))
        reason = self.exit_reason
        if reason is None or isinstance(reason, asyncio.CancelledError):
            return
        lines = stderr_lines(self.stderr_tail)
        if isinstance(reason, UpstreamError):
            # What the operator reads (Glove's stderr, the session's error) shows the server's
            # own last words; the agents were told only the summary (agent_message).
            reason.add_stderr(lines)
            text = reason.summary
        else:
            text = f"{type(reason).__name__}: {reason}"
        await self._record_now(failure_record(self.upstream_id, text, lines))

    async def _record_now(self, record: Record) -> None:
        if self._events is not None:
            await self._events.record(self.upstream_id, record)

    def force_kill(self) -> None:
        """Kill the server at once (its process group, for a stdio server)."""
        self._transport.force_kill()

    @property
    def pid(self) -> int | None:
        """The server's process id once started (``None`` for an HTTP upstream)."""
        return self._transport.pid

    @property
    def stderr_tail(self) -> bytes:
        """The last bytes the server wrote on stderr (bounded), for diagnostics."""
        return self._transport.stderr_tail

    # -- messages -----------------------------------------------------------------------------

    async def handle(self, msg: object) -> object:
        """Forward a request (a deferred raw result), send a notification, or return the
        cached tool list.

        Raises:
            UpstreamTransportError: the upstream has already failed.
        """
        reply = self.handle_now(msg)
        if reply is NOT_NOW:
            return await super().handle(msg)
        return reply

    def handle_now(self, msg: object) -> object:
        """Every message of this actor is handled without waiting, so an idle upstream
        takes it from the asker's task (the idle fast path, see :mod:`glove.actors`): a
        call's frame is written to the upstream before the asker first waits."""
        if isinstance(msg, CallTool):
            params: McpObject = {"name": msg.name}
            if msg.arguments is not None:
                params["arguments"] = msg.arguments
            return Deferred(
                self._request(
                    "tools/call", params, progress_token=msg.progress_token, progress=msg.progress
                )
            )
        if isinstance(msg, Forward):
            return Deferred(
                self._request(
                    msg.method, msg.params, progress_token=msg.progress_token, progress=msg.progress
                )
            )
        if isinstance(msg, Notify):
            self._write(encode_notification(msg.method, msg.params))
            return None
        if isinstance(msg, ListTools):
            return list(self.tools)
        return NOT_NOW

    # -- requests -----------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        params: McpObject | None,
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
        meta.pop("progressToken", None)
        if progress is not None and progress_token is not None:
            meta["progressToken"] = request_id
        if self.era == MODERN_VERSION or method == "server/discover":
            meta[META_PROTOCOL_VERSION] = MODERN_VERSION
            meta[META_CLIENT_CAPABILITIES] = {}
            meta[META_CLIENT_INFO] = CLIENT_INFO
        if meta:
            params["_meta"] = meta
        else:
            params.pop("_meta", None)
        self._pending[request_id] = _Pending(future, method, progress_token, progress)
        future.add_done_callback(lambda fut: self._settled(request_id, fut))
        self._write(encode_request(request_id, method, params or None), expects_reply=True)
        return future

    def _settled(self, request_id: int, future: asyncio.Future[Any]) -> None:
        pending = self._pending.pop(request_id, None)
        if pending is not None and future.cancelled() and self._failure is None:
            # The caller gave up: tell the server, and forget the id so a late reply drops
            # (quietly: MCP lets a server answer a cancelled request, and says to ignore it).
            self._cancelled[request_id] = None
            if len(self._cancelled) > MAX_CANCELLED_REMEMBERED:
                del self._cancelled[next(iter(self._cancelled))]
            self._write(
                encode_notification(
                    "notifications/cancelled",
                    {"requestId": request_id, "reason": "the caller's deadline passed"},
                )
            )

    def _write(self, frame: bytes, *, expects_reply: bool = False) -> None:
        if self._failure is None:
            self._transport.send(frame, expects_reply=expects_reply)

    async def _call(self, method: str, params: McpObject | None) -> msgspec.Raw:
        return await self._request(method, params)  # type: ignore[no-any-return]

    # -- handshake and lists --------------------------------------------------------------------

    async def _handshake(self) -> None:
        probe: asyncio.Future[Any] | None = None
        if self.config.era in ("auto", MODERN_VERSION):
            probe = self._request("server/discover", {})
            # Its outcome is always retrieved, even when the actor dies while it is pending
            # (the transport then fails it, and nobody awaits it any more).
            probe.add_done_callback(_consume)
            # Wait, never cancel on the deadline: silence may only be a slow start (a server
            # still importing on a loaded host), and then the probe's late answer decides.
            try:
                await asyncio.wait({probe}, timeout=PROBE_TIMEOUT_S)
            except BaseException:
                probe.cancel()
                raise
            if probe.done():
                if self._adopt_modern(probe):
                    return
                probe = None
        if self.config.era == MODERN_VERSION:
            if probe is not None:
                probe.cancel()
            raise UpstreamProtocolError(self.upstream_id, "the server does not speak 2026-07-28")
        init = self._request(
            "initialize",
            {
                "protocolVersion": LATEST_LEGACY_VERSION,
                "capabilities": self._client_capabilities,
                "clientInfo": CLIENT_INFO,
            },
        )
        if probe is not None:
            try:
                if await self._late_modern(probe, init):
                    return
            except BaseException:
                for pending in (probe, init):
                    pending.add_done_callback(_consume)
                    pending.cancel()
                raise
        raw = await init
        try:
            result = msgspec.json.decode(raw, type=InitializeResult)
        except msgspec.DecodeError as exc:
            raise UpstreamProtocolError(self.upstream_id, f"bad initialize result: {exc}") from exc
        if result.protocol_version not in LEGACY_VERSIONS:
            raise UpstreamProtocolError(
                self.upstream_id, f"unsupported protocol version {result.protocol_version!r}"
            )
        self.era = result.protocol_version
        self._transport.protocol_version = result.protocol_version
        self.server_info = result.server_info
        self.capabilities = result.capabilities
        self._write(encode_notification("notifications/initialized"))

    async def _late_modern(self, probe: asyncio.Future[Any], init: asyncio.Future[Any]) -> bool:
        """After a silent probe: whether its late answer says 2026-07-28 (then it is used).

        A server answers in order, so a slow 2026-07-28 server answers the probe first and
        then refuses the ``initialize`` sent after it (a connection serves one era): the
        first answer to arrive decides. A legacy server's initialize result wins otherwise.
        Bounded by the actor's startup deadline, as the whole handshake is.

        Raises:
            UpstreamTransportError: the server died meanwhile.
        """
        await asyncio.wait({probe, init}, return_when=asyncio.FIRST_COMPLETED)
        if not probe.done() and init.exception() is not None:
            await asyncio.wait({probe})  # refused: only the probe's answer can still help
        if probe.done() and self._adopt_modern(probe):
            init.add_done_callback(_consume)
            init.cancel()  # its refusal (or late result) is dropped
            return True
        probe.add_done_callback(_consume)
        probe.cancel()  # not modern: a late answer to it is dropped
        return False

    def _adopt_modern(self, probe: asyncio.Future[Any]) -> bool:
        """Whether the answered probe says 2026-07-28; if so, speak it from now on.

        Raises:
            UpstreamTransportError: the probe failed because the transport did.
        """
        if probe.cancelled():
            return False
        error = probe.exception()
        if isinstance(error, UpstreamTransportError):
            raise error
        if error is not None:
            # Any error means "not modern": the spec forbids keying the fallback to one code.
            return False
        try:
            result = msgspec.json.decode(probe.result(), type=DiscoverResult)
        except msgspec.DecodeError:
            return False
        if MODERN_VERSION not in result.supported_versions:
            return False
        self.era = MODERN_VERSION
        self._transport.protocol_version = MODERN_VERSION
        self.capabilities = result.capabilities
        tools = result.capabilities.get("tools")
        if isinstance(tools, dict) and tools.get("listChanged"):
            # 2026-07-28 delivers list_changed only on a subscriptions/listen stream: open
            # one for the life of the connection; its notifications arrive like any other.
            stream = self._request("subscriptions/listen", {"notifications": LISTEN_FILTER})
            stream.add_done_callback(_consume)
        return True

    def offers(self, capability: str) -> bool:
        """Whether the server advertised ``capability`` (``tools`` is assumed)."""
        return capability == "tools" or isinstance(self.capabilities.get(capability), dict)

    async def _list_everything(self) -> None:
        self.tools = await self._list_all_tools()
        if self.offers("prompts"):
            self.prompts = await self._list_items("prompts/list", "prompts")
        if self.offers("resources"):
            self.resources = await self._list_items("resources/list", "resources")
            self.templates = await self._list_items("resources/templates/list", "resourceTemplates")

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

    async def _list_items(self, method: str, key: str) -> list[McpObject]:
        items: list[McpObject] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            try:
                raw = await self._call(method, None if cursor is None else {"cursor": cursor})
            except UpstreamCallFailed as exc:
                if exc.code == METHOD_NOT_FOUND:
                    return items  # advertised the capability but not this list (templates)
                raise
            try:
                page = msgspec.json.decode(raw, type=_ItemsPage)
            except msgspec.DecodeError as exc:
                raise UpstreamProtocolError(self.upstream_id, f"bad {method}: {exc}") from exc
            found = page.get(key, [])
            if not isinstance(found, list) or not all(isinstance(i, dict) for i in found):
                raise UpstreamProtocolError(self.upstream_id, f"bad {method}: no list of {key}")
            items.extend(found)
            if len(items) > MAX_LISTED_ITEMS:
                raise UpstreamProtocolError(self.upstream_id, f"{method}: over {MAX_LISTED_ITEMS}")
            next_cursor = page.get("nextCursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                return items
            cursor = next_cursor
        raise UpstreamProtocolError(self.upstream_id, f"{method}: more than {MAX_TOOL_PAGES} pages")

    async def _relist(self, kind: str) -> None:
        try:
            if kind == "tools":
                self.tools = await self._list_all_tools()
            elif kind == "prompts":
                self.prompts = await self._list_items("prompts/list", "prompts")
            else:
                self.resources = await self._list_items("resources/list", "resources")
                self.templates = await self._list_items(
                    "resources/templates/list", "resourceTemplates"
                )
        finally:
            self._relisting.discard(kind)
        if kind == "tools" and self._on_tools_changed is not None:
            self._on_tools_changed(self.upstream_id)
        if self._events is not None:
            self._events.list_changed(self.upstream_id, kind)

    # -- reading ------------------------------------------------------------------------------

    def _on_frame_safely(self, frame: bytes) -> Awaitable[None] | None:
        try:
            return self._on_frame(frame)
        except UpstreamError as exc:
            self._failure = exc
            self._fail_all(exc)
            self.crash(exc)
            return None

    def _on_frame(self, frame: bytes) -> Awaitable[None] | None:
        try:
            message = decode_message(frame)
        except FramingError as exc:
            if exc.code == PARSE_ERROR and self.config.stdout == "lenient":
                # Not JSON at all: a stray print, a banner. Dropped and audited; a frame
                # that is JSON but not JSON-RPC stays fatal (the peer is confused).
                http = self.config.url is not None
                return self._discarded(frame, HTTP_DROP_REASON if http else STDOUT_DROP_REASON)
            raise UpstreamTransportError(self.upstream_id, f"wrote garbage: {exc}") from exc
        if isinstance(message, Response | ErrorResponse):
            return self._on_reply(message)
        if isinstance(message, Notification):
            return self._on_notification(message)
        return self._on_server_request(message)

    def _on_reply(self, message: Response | ErrorResponse) -> Awaitable[None] | None:
        if not isinstance(message.id, int):
            return self._dropped(None, f"a reply to id {message.id!r}, which Glove never issued")
        pending = self._pending.get(message.id)
        if pending is None or pending.future.done():
            if message.id in self._cancelled:
                del self._cancelled[message.id]
                return None  # the late reply to a request Glove cancelled: expected
            return self._dropped(
                None,
                f"a reply to request {message.id}, which nothing waits for "
                "(never sent, or answered already)",
            )
        if isinstance(message, Response):
            pending.future.set_result(message.result)
        else:
            pending.future.set_exception(
                UpstreamCallFailed(self.upstream_id, message.error.code, message.error.message)
            )
        return None

    # -- what is dropped, audited ---------------------------------------------------------------

    def _discarded(self, data: bytes, reason: str) -> Awaitable[None] | None:
        """A line (or HTTP message) that is not a frame was dropped: count it, maybe record it."""
        excerpt = excerpt_of(data)
        if not self._lines.drop(excerpt):
            return None
        return self._audit(line_record(self.upstream_id, excerpt, self._lines.count, reason))

    def _dropped(self, method: str | None, reason: str) -> Awaitable[None] | None:
        """A JSON-RPC message was dropped: count it, maybe record it."""
        if not self._messages.drop():
            return None
        return self._audit(message_record(self.upstream_id, method, self._messages.count, reason))

    def _audit(self, record: Record) -> Awaitable[None] | None:
        if self._events is None:
            return None
        # Not a spawn_task: teardown would cancel it and abandon the record half-way. The
        # caller awaits a shield of it; on_stop awaits whatever is still being written.
        # report=False: _written reads how it ended.
        write = self._writing.start(self._events.record(self.upstream_id, record), report=False)
        self._writes.add(write)
        write.add_done_callback(self._written)
        return asyncio.shield(write)

    def _written(self, write: asyncio.Future[None]) -> None:
        self._writes.discard(write)
        if write.cancelled():
            return
        failure = write.exception()
        if failure is not None:
            # A drop that cannot be recorded ends the session: the log's promise is that
            # every one has its record (fail closed).
            self.crash(failure)

    def _on_server_request(self, request: Request) -> Awaitable[None] | None:
        if request.method == "ping":
            self._write(encode_result(request.id, {}))
            return None
        if self._events is None:
            # Nothing to relay to (a bare actor, as `glove mcp tools` starts): refused.
            self._write(
                encode_error(
                    request.id, METHOD_NOT_FOUND, "Glove relays no server-to-client requests"
                )
            )
            return None
        if self._serving >= MAX_SERVER_REQUESTS:
            why = f"more than {MAX_SERVER_REQUESTS} server-to-client requests at once"
            return self._refuse(request, why)
        self._serving += 1
        self.spawn_task(self._serve(request), name="server-request")
        return None

    async def _refuse(self, request: Request, why: str) -> None:
        """Audit a refused server-to-client request, then answer it (audit before refusing)."""
        record: Record = {
            "kind": "mcp.server_request",
            "method": printable(request.method, 64),
            "upstream": self.upstream_id,
            "params_sha256": arguments_digest(request.params or {}),
            "decision": "deny",
            "reason": why,
        }
        write = self._audit(record)
        if write is not None:
            await write
        self._write(encode_error(request.id, OVERLOADED, why))

    async def _serve(self, request: Request) -> None:
        assert self._events is not None
        try:
            async with asyncio.timeout(self.config.call_timeout_s):
                result = await self._events.server_request(
                    self.upstream_id, request.method, request.params
                )
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error answer
            code = getattr(exc, "code", None)
            message = getattr(exc, "message", None) or str(exc) or "request failed"
            frame = encode_error(
                request.id, code if isinstance(code, int) else INTERNAL_ERROR, message[:256]
            )
        else:
            frame = encode_result(request.id, result)
        finally:
            self._serving -= 1
        self._write(frame)

    def _on_notification(self, message: Notification) -> Awaitable[None] | None:
        params = message.params or {}
        method = message.method
        if method == "notifications/progress":
            return self._on_progress(params)
        if method == LISTEN_ACKNOWLEDGED:
            return None  # the server took Glove's own subscriptions/listen: nothing to pass on
        kind = LIST_CHANGED.get(method)
        if kind is not None:
            if self.era is None:
                return self._dropped(method, "before the handshake (the lists are read after it)")
            if kind not in self._relisting:
                self._relisting.add(kind)
                self.spawn_task(self._relist(kind), name=f"relist-{kind}")
            return None
        if self._events is None:
            return None
        why = self._events.notification(self.upstream_id, method, params)
        return None if why is None else self._dropped(method, why)

    def _on_progress(self, params: McpObject) -> Awaitable[None] | None:
        token = params.get("progressToken")
        pending = self._pending.get(token) if isinstance(token, int) else None
        if pending is None or pending.progress is None:
            return self._dropped(
                "notifications/progress", "progress for no request in flight that asked for it"
            )
        pending.progress({**params, "progressToken": pending.progress_token})
        return None

    def _fail_all(self, exc: UpstreamError) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            if not entry.future.done():
                entry.future.set_exception(exc)
