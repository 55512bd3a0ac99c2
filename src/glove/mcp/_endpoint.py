"""The agent-facing MCP server: bounded newline-delimited JSON-RPC on one byte stream.

Any stock MCP client can talk to it (over this process's stdio, or over the descriptor
``glove run`` hands to the sandbox). It speaks the ``initialize`` era (2024-11-05 to
2025-11-25). Malformed input never closes the stream: a frame that is not JSON, not
JSON-RPC, a batch, or over :data:`MAX_AGENT_FRAME_BYTES` gets a typed JSON-RPC error and
the next line is read as usual. A client probing with ``server/discover`` before
``initialize`` gets ``-32601`` and falls back to the handshake.

Tool calls run concurrently (at most :data:`MAX_INFLIGHT_CALLS`), each in a task the
endpoint owns; ``notifications/cancelled`` from the agent cancels its task, which cancels
the upstream request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

import msgspec

from glove._version import __version__
from glove.actors import Actor
from glove.mcp._framing import (
    OVERSIZED,
    LineSplitter,
    decode_message,
    encode_error,
    encode_notification,
    encode_result,
)
from glove.mcp._kernel import Mediator, Refusal
from glove.mcp._messages import Notification, Request
from glove.mcp._upstream import LATEST_LEGACY_VERSION, LEGACY_VERSIONS
from glove.mcp.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    OVERLOADED,
    UPSTREAM_FAILED,
    FramingError,
)

_log = logging.getLogger(__name__)

MAX_AGENT_FRAME_BYTES: Final = 4 * 1024 * 1024
READ_CHUNK_BYTES: Final = 256 * 1024
MAX_INFLIGHT_CALLS: Final = 64
WRITE_HIGH_WATER_BYTES: Final = 1024 * 1024

SESSION_ENDED: Final = "the mediation session ended before the call completed"
SERVER_INFO: Final = {"name": "glove", "version": __version__}
INSTRUCTIONS: Final = (
    "Tools are mediated by Glove: each is named <server>__<tool>; calls are checked by "
    "policy and audited."
)


class AgentEndpoint(Actor):
    """Owns the agent's byte stream; one per agent connection."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        mediator: Mediator,
        *,
        max_frame_bytes: int = MAX_AGENT_FRAME_BYTES,
    ) -> None:
        super().__init__("mcp-endpoint")
        self._reader = reader
        self._writer = writer
        self.mediator = mediator
        self._max_frame_bytes = max_frame_bytes
        self._initialized = False
        self._calls: dict[int | str, asyncio.Task[None]] = {}
        self.closed = asyncio.Event()
        self.closed_callback: Callable[[AgentEndpoint], None] | None = None

    async def on_start(self) -> None:
        """Start reading the agent's stream."""
        self.spawn_task(self._read(), name="agent-reader")

    async def on_stop(self) -> None:
        """Close the agent's stream."""
        self._writer.close()
        self.closed.set()
        if self.closed_callback is not None:
            self.closed_callback(self)

    async def handle(self, msg: object) -> object:
        """Endpoint messages: :class:`ToolsChanged` notifies the agent."""
        if isinstance(msg, ToolsChanged):
            if self._initialized:
                self._send(encode_notification("notifications/tools/list_changed"))
            return None
        return await super().handle(msg)

    # -- reading ------------------------------------------------------------------------------

    async def _read(self) -> None:
        splitter = LineSplitter(self._max_frame_bytes)
        while chunk := await self._reader.read(READ_CHUNK_BYTES):
            for frame in splitter.feed(chunk):
                if frame is OVERSIZED:
                    await self._refuse_malformed(
                        None, INVALID_REQUEST, f"frame over {self._max_frame_bytes} bytes"
                    )
                    continue
                assert isinstance(frame, bytes)
                try:
                    message = decode_message(frame)
                except FramingError as exc:
                    await self._refuse_malformed(exc.request_id, exc.code, str(exc))
                    continue
                if isinstance(message, Request):
                    await self._on_request(message)
                elif isinstance(message, Notification):
                    self._on_notification(message)
                # Responses: Glove sends the agent no requests, so there is nothing to match.
            await self._drain()
        # End of stream: the agent is gone; let pending calls finish their audit trail.
        if self._calls:
            await asyncio.gather(*self._calls.values(), return_exceptions=True)
        self.stop()

    async def _refuse_malformed(self, request_id: int | str | None, code: int, why: str) -> None:
        try:
            await self.mediator.malformed(request_id, code, why)
        except Refusal as refusal:
            self._send(encode_error(request_id, refusal.code, refusal.message))
            return
        self._send(encode_error(request_id, code, why[:256]))

    async def _on_request(self, request: Request) -> None:
        method = request.method
        if method == "initialize":
            self._send(encode_result(request.id, self._initialize_result(request.params)))
            self._initialized = True
        elif method == "ping":
            self._send(encode_result(request.id, {}))
        elif not self._initialized:
            if method == "server/discover":
                self._send(
                    encode_error(
                        request.id,
                        METHOD_NOT_FOUND,
                        "server/discover is not served: use the initialize handshake",
                    )
                )
            else:
                await self._refuse_malformed(
                    request.id, INVALID_REQUEST, f"{method[:64]} before initialize"
                )
        elif method == "tools/list":
            self._list_tools(request)
        elif method == "tools/call":
            self._start_call(request)
        else:
            self._send(
                encode_error(request.id, METHOD_NOT_FOUND, f"method not found: {method[:64]}")
            )

    def _on_notification(self, note: Notification) -> None:
        if note.method == "notifications/cancelled":
            request_id = (note.params or {}).get("requestId")
            task = self._calls.get(request_id) if isinstance(request_id, int | str) else None
            if task is not None:
                task.cancel()

    def _initialize_result(self, params: dict[str, Any] | None) -> dict[str, Any]:
        asked = (params or {}).get("protocolVersion")
        version = asked if asked in LEGACY_VERSIONS else LATEST_LEGACY_VERSION
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }

    def _list_tools(self, request: Request) -> None:
        if (request.params or {}).get("cursor") is not None:
            # Glove lists everything in one page, so no cursor it could have issued exists.
            self._send(encode_error(request.id, INVALID_PARAMS, "invalid cursor"))
            return
        self._send(encode_result(request.id, {"tools": self.mediator.visible_tools()}))

    def _start_call(self, request: Request) -> None:
        if request.id in self._calls:
            self._send(encode_error(request.id, INVALID_REQUEST, "request id already in use"))
            return
        if len(self._calls) >= MAX_INFLIGHT_CALLS:
            self._send(encode_error(request.id, OVERLOADED, "too many calls in flight"))
            return
        task = self.spawn_task(self._call(request), name="call")
        self._calls[request.id] = task
        task.add_done_callback(lambda _: self._calls.pop(request.id, None))

    async def _call(self, request: Request) -> None:
        meta = (request.params or {}).get("_meta")
        agent_token = meta.get("progressToken") if isinstance(meta, dict) else None

        def progress(params: dict[str, Any]) -> None:
            if request.id in self._calls:
                self._send(encode_notification("notifications/progress", params))

        try:
            raw = await self.mediator.call_tool(
                request.id, request.params, progress if agent_token is not None else None
            )
        except Refusal as refusal:
            self._send(encode_error(request.id, refusal.code, refusal.message, refusal.data))
        except asyncio.CancelledError:
            if self.state == "running":
                return  # cancelled by the agent: MCP says a cancelled request gets no answer
            # The session is ending (an upstream or the audit log failed): every request
            # still pending gets an answer before the stream closes, never silence.
            self._send(encode_error(request.id, UPSTREAM_FAILED, SESSION_ENDED))
            raise
        else:
            self._send(encode_result(request.id, raw))
        await self._drain()

    # -- writing ------------------------------------------------------------------------------

    def _send(self, frame: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(frame)

    async def _drain(self) -> None:
        if self._writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER_BYTES:
            await self._writer.drain()


class ToolsChanged(msgspec.Struct, frozen=True):
    """An upstream's tool list changed: tell the agent to list again."""
