"""The agent-facing MCP protocol of one connection, whatever carries its bytes.

:class:`AgentSession` takes decoded messages from the agent and answers through ``emit``
(one encoded frame, plus the id of the agent request it belongs to, so a Streamable HTTP
transport can put it on that request's stream). The stdio endpoint
(:mod:`._endpoint`) and the HTTP front (:mod:`._http_server`) both drive it.

It speaks the ``initialize`` era (2024-11-05 to 2025-11-25). Requests that reach an
upstream (``tools/call``, ``prompts/get``, ``resources/read``, ``completion/complete``...)
run concurrently (at most :data:`MAX_INFLIGHT_CALLS`), each in a task its owner spawns;
``notifications/cancelled`` from the agent cancels that task, which cancels the upstream
request. Glove's own requests to the agent (relayed sampling, elicitation, roots) carry
ids ``glove-N`` and wait for the agent's answer.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final, TypedDict

import msgspec

from glove._version import __version__
from glove.actors import settle
from glove.mcp._contracts import PendingAudit, Refusal
from glove.mcp._features import ServerCapabilities, page
from glove.mcp._framing import encode_error, encode_notification, encode_request, encode_result
from glove.mcp._messages import (
    ErrorResponse,
    McpObject,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from glove.mcp._upstream import LATEST_LEGACY_VERSION, LEGACY_VERSIONS
from glove.mcp.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    OVERLOADED,
    UPSTREAM_FAILED,
)

if TYPE_CHECKING:
    from glove.mcp._kernel import Mediator

_log = logging.getLogger(__name__)

MAX_INFLIGHT_CALLS: Final = 64
#: Glove's own requests to the agent waiting for an answer at once.
MAX_OUTGOING_REQUESTS: Final = 16
SESSION_ENDED: Final = "the mediation session ended before the call completed"


class ServerInfo(TypedDict):
    """Who answers the agent (``serverInfo``)."""

    name: str
    version: str


SERVER_INFO: Final[ServerInfo] = {"name": "glove", "version": __version__}
INSTRUCTIONS: Final = (
    "Tools, prompts and resources are mediated by Glove: each is checked by policy and "
    "audited; names may carry their server's id (<server>__<name>, <server>+<uri>)."
)
#: Methods answered from the catalog, and the capability each needs.
LISTS: Final = {
    "tools/list": ("tools", "tools", "tools"),
    "prompts/list": ("prompts", "prompts", "prompts"),
    "resources/list": ("resources", "resources", "resources"),
    "resources/templates/list": ("templates", "resourceTemplates", "resources"),
}
#: Methods forwarded upstream in a task, and the capability each needs.
FORWARDED: Final = {
    "tools/call": "tools",
    "prompts/get": "prompts",
    "resources/read": "resources",
    "resources/subscribe": "resources",
    "resources/unsubscribe": "resources",
    "completion/complete": "completions",
    "logging/setLevel": "logging",
}

Emit = Callable[[bytes, RequestId | None, bool], None]
"""``emit(frame, related, final)``: ``related`` is the agent request the frame belongs to;
``final`` says the frame is that request's answer (its stream can end)."""
Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]


class InitializeReply(TypedDict):
    """Glove's ``initialize`` result to the agent."""

    protocolVersion: str
    capabilities: ServerCapabilities
    serverInfo: ServerInfo
    instructions: str


class AgentSession:
    """One agent's protocol state: handshake, in-flight requests, Glove's own requests."""

    def __init__(
        self,
        mediator: Mediator,
        emit: Emit,
        spawn: Spawn,
        *,
        live: Callable[[], bool],
        on_roots_changed: Callable[[], None] | None = None,
    ) -> None:
        self.mediator = mediator
        self._emit = emit
        self._spawn = spawn
        self._live = live
        self._on_roots_changed = on_roots_changed
        self.initialized = False
        self.protocol_version: str | None = None
        #: The agent's declared client capabilities (``sampling``, ``elicitation``, ``roots``).
        self.client_capabilities: McpObject = {}
        self.capabilities: ServerCapabilities = {}
        self._calls: dict[RequestId, asyncio.Task[None]] = {}
        #: In-flight agent request -> the upstream it went to (for relating relays).
        self._targets: dict[RequestId, str | None] = {}
        self._outgoing: dict[str, asyncio.Future[msgspec.Raw]] = {}
        self._ids = itertools.count(1)
        #: Frames that are not answers, waiting for the decisions written before them.
        self._held: collections.deque[tuple[PendingAudit | None, bytes, RequestId | None]] = (
            collections.deque()
        )

    def _reply(self, request_id: RequestId | None, frame: bytes) -> None:
        self._emit(frame, request_id, True)

    def _emit_after_records(self, frame: bytes, related: RequestId | None) -> None:
        """Send a frame that is not an answer once every decision written before it is
        durable, in order (decision 0046): a call's progress, or an upstream's notification
        its call caused, must not reach the agent before the call's record is durable. An
        answer needs no such wait: the kernel waits for its own record first."""
        barrier = self.mediator.undurable()
        if barrier is None and not self._held:
            self._emit(frame, related, False)
            return
        self._held.append((barrier, frame, related))
        if barrier is not None:
            barrier.add_done_callback(self._release_held)

    def _release_held(self) -> None:
        while self._held:
            barrier, frame, related = self._held[0]
            if barrier is not None and not barrier.done:
                return
            self._held.popleft()
            self._emit(frame, related, False)

    # -- input ---------------------------------------------------------------------------------

    async def on_message(self, message: Message) -> None:
        """Handle one decoded message from the agent."""
        if isinstance(message, Request):
            await self._on_request(message)
        elif isinstance(message, Notification):
            self._on_notification(message)
        elif isinstance(message, Response | ErrorResponse):
            self._on_response(message)

    async def malformed(self, request_id: RequestId | None, code: int, why: str) -> None:
        """Audit a malformed frame and answer it."""
        try:
            await self.mediator.malformed(request_id, code, why)
        except Refusal as refusal:
            self._reply(request_id, encode_error(request_id, refusal.code, refusal.message))
            return
        self._reply(request_id, encode_error(request_id, code, why[:256]))

    async def _on_request(self, request: Request) -> None:
        method = request.method
        if method == "initialize":
            self._reply(request.id, encode_result(request.id, self._initialize(request.params)))
            self.initialized = True
        elif method == "ping":
            self._reply(request.id, encode_result(request.id, {}))
        elif not self.initialized:
            if method == "server/discover":
                error = "server/discover is not served: use the initialize handshake"
                self._reply(request.id, encode_error(request.id, METHOD_NOT_FOUND, error))
            else:
                await self.malformed(
                    request.id, INVALID_REQUEST, f"{method[:64]} before initialize"
                )
        elif method in LISTS:
            self._list(request)
        elif isinstance((request.params or {}).get("task"), dict):
            # Task augmentation (2025-11-25 tasks): refused for the same reason as tasks/*.
            error = "Glove does not mediate tasks: send the request without `task`"
            self._reply(request.id, encode_error(request.id, INVALID_PARAMS, error))
        elif method in FORWARDED and FORWARDED[method] in self.capabilities:
            self._start(request)
        elif method.startswith("tasks/"):
            # The 2025-11-25 tasks utility and the 2026-07-28 tasks extension are refused:
            # Glove cannot audit or bound work that outlives the request it belongs to.
            error = "Glove does not mediate tasks: call tools without task augmentation"
            self._reply(request.id, encode_error(request.id, METHOD_NOT_FOUND, error))
        else:
            error = f"method not found: {method[:64]}"
            self._reply(request.id, encode_error(request.id, METHOD_NOT_FOUND, error))

    def _initialize(self, params: McpObject | None) -> InitializeReply:
        params = params or {}
        asked = params.get("protocolVersion")
        self.protocol_version = asked if asked in LEGACY_VERSIONS else LATEST_LEGACY_VERSION
        caps = params.get("capabilities")
        self.client_capabilities = dict(caps) if isinstance(caps, dict) else {}
        self.capabilities = self.mediator.agent_capabilities()
        return {
            "protocolVersion": self.protocol_version,
            "capabilities": self.capabilities,
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }

    def _list(self, request: Request) -> None:
        kind, key, capability = LISTS[request.method]
        if capability not in self.capabilities:
            error = f"method not found: {request.method}"
            self._reply(request.id, encode_error(request.id, METHOD_NOT_FOUND, error))
            return
        mediator = self.mediator
        items = {
            "tools": mediator.visible_tools,
            "prompts": mediator.visible_prompts,
            "resources": mediator.visible_resources,
            "templates": mediator.visible_templates,
        }[kind]()
        try:
            result = page(kind, key, items, request.params)
        except Refusal as refusal:
            self._reply(request.id, encode_error(request.id, refusal.code, refusal.message))
            return
        self._reply(request.id, encode_result(request.id, result))

    def _on_notification(self, note: Notification) -> None:
        if note.method == "notifications/cancelled":
            request_id = (note.params or {}).get("requestId")
            task = self._calls.get(request_id) if isinstance(request_id, int | str) else None
            if task is not None:
                task.cancel()
        elif note.method == "notifications/roots/list_changed" and self._on_roots_changed:
            self._on_roots_changed()

    def _on_response(self, message: Response | ErrorResponse) -> None:
        future = self._outgoing.get(message.id) if isinstance(message.id, str) else None
        if future is None or future.done():
            return  # not an answer to a request Glove sent (or a late one): dropped
        if isinstance(message, Response):
            future.set_result(message.result)
        else:
            future.set_exception(Refusal(message.error.code, message.error.message))

    # -- requests that reach an upstream ---------------------------------------------------------

    def _start(self, request: Request) -> None:
        if request.id in self._calls:
            error = "request id already in use"
            self._reply(request.id, encode_error(request.id, INVALID_REQUEST, error))
            return
        if len(self._calls) >= MAX_INFLIGHT_CALLS:
            self._reply(
                request.id, encode_error(request.id, OVERLOADED, "too many calls in flight")
            )
            return
        self._targets[request.id] = self._target_of(request)
        task = self._spawn(self._run(request), "call")
        self._calls[request.id] = task

        def forget(_: object) -> None:
            self._calls.pop(request.id, None)
            self._targets.pop(request.id, None)

        task.add_done_callback(forget)

    def _target_of(self, request: Request) -> str | None:
        params = request.params or {}
        catalog = self.mediator.catalog
        if request.method == "tools/call":
            tool = catalog.tools.lookup(str(params.get("name")))
            return None if tool is None else tool.upstream_id
        if request.method == "prompts/get":
            prompt = catalog.resolve_prompt(str(params.get("name")))
            return None if prompt is None else prompt.upstream_id
        if request.method.startswith("resources/"):
            target = catalog.resolve_uri(str(params.get("uri")))
            return None if target is None else target[0]
        return None

    def related_for(self, upstream_id: str) -> RequestId | None:
        """The most recent in-flight agent request that went to ``upstream_id``, if any."""
        related = None
        for request_id, target in self._targets.items():
            if target == upstream_id:
                related = request_id
        return related

    def busy_with(self, upstream_id: str) -> bool:
        """Whether a request of this agent to ``upstream_id`` is in flight."""
        return upstream_id in self._targets.values()

    async def _run(self, request: Request) -> None:
        try:
            result = await self._dispatch(request)
        except Refusal as refusal:
            frame = encode_error(request.id, refusal.code, refusal.message, refusal.data)
            self._reply(request.id, frame)
        except asyncio.CancelledError:
            if self._live():
                return  # cancelled by the agent: MCP says a cancelled request gets no answer
            # The session is ending (an upstream or the audit log failed): every request
            # still pending gets an answer before the stream closes, never silence.
            self._reply(request.id, encode_error(request.id, UPSTREAM_FAILED, SESSION_ENDED))
            raise
        else:
            self._reply(request.id, encode_result(request.id, result))

    def _dispatch(self, request: Request) -> Awaitable[Any]:
        mediator = self.mediator
        method = request.method
        params = request.params
        if method == "tools/call":
            return mediator.call_tool(request.id, params, self._progress_sink(request))
        if method == "prompts/get":
            return mediator.get_prompt(request.id, params)
        if method == "completion/complete":
            return mediator.complete(request.id, params)
        if method == "logging/setLevel":
            return mediator.set_level(request.id, params)
        return mediator.resource_request(request.id, method, params)

    def _progress_sink(self, request: Request) -> Callable[[McpObject], None] | None:
        meta = (request.params or {}).get("_meta")
        if not isinstance(meta, dict) or meta.get("progressToken") is None:
            return None

        def progress(params: McpObject) -> None:
            if request.id in self._calls:
                frame = encode_notification("notifications/progress", params)
                self._emit_after_records(frame, request.id)

        return progress

    # -- Glove's own traffic to the agent ---------------------------------------------------------

    def notify(
        self, method: str, params: McpObject | None = None, *, related: RequestId | None = None
    ) -> None:
        """Send the agent a notification (once it has initialized)."""
        if self.initialized:
            self._emit_after_records(encode_notification(method, params), related)

    async def request(
        self, method: str, params: McpObject | None, *, related: RequestId | None = None
    ) -> msgspec.Raw:
        """Send the agent a request (a relayed sampling, elicitation or roots request) and
        wait for its answer.

        Raises:
            Refusal: the agent answered with an error, or too many requests are waiting.
        """
        if len(self._outgoing) >= MAX_OUTGOING_REQUESTS:
            raise Refusal(OVERLOADED, "too many requests waiting for the agent")
        request_id = f"glove-{next(self._ids)}"
        future: asyncio.Future[msgspec.Raw] = asyncio.get_running_loop().create_future()
        self._outgoing[request_id] = future
        try:
            self._emit_after_records(encode_request(request_id, method, params), related)
            return await future
        except asyncio.CancelledError:
            # The upstream gave up (or the session ends): tell the agent, as MCP asks.
            self.notify("notifications/cancelled", {"requestId": request_id}, related=related)
            raise
        finally:
            self._outgoing.pop(request_id, None)

    async def finish(self) -> None:
        """Let the requests in flight finish their audit trail (the agent hung up)."""
        if self._calls:
            await settle(*self._calls.values())
        for future in self._outgoing.values():
            if not future.done():
                future.set_exception(Refusal(UPSTREAM_FAILED, "the agent hung up"))
