"""The agent-facing MCP server on one byte stream: bounded newline-delimited JSON-RPC.

Any stock MCP client can talk to it (over this process's stdio, or over the descriptor
``glove run`` hands to the sandbox). The protocol itself is :class:`~._session.AgentSession`;
this actor owns the stream. Malformed input never closes the stream: a frame that is not
JSON, not JSON-RPC, a batch, or over :data:`MAX_AGENT_FRAME_BYTES` gets a typed JSON-RPC
error and the next line is read as usual. A client probing with ``server/discover`` before
``initialize`` gets ``-32601`` and falls back to the handshake.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final

import msgspec

from glove.actors import Actor
from glove.mcp._agent_session import INSTRUCTIONS, MAX_INFLIGHT_CALLS, SERVER_INFO, AgentSession
from glove.mcp._framing import OVERSIZED, LineSplitter, decode_message
from glove.mcp._kernel import Mediator
from glove.mcp._messages import McpObject, RequestId
from glove.mcp.errors import INVALID_REQUEST, FramingError

__all__ = [
    "INSTRUCTIONS",
    "MAX_AGENT_FRAME_BYTES",
    "MAX_INFLIGHT_CALLS",
    "SERVER_INFO",
    "AgentEndpoint",
    "ToolsChanged",
]

_log = logging.getLogger(__name__)

MAX_AGENT_FRAME_BYTES: Final = 4 * 1024 * 1024
READ_CHUNK_BYTES: Final = 256 * 1024
WRITE_HIGH_WATER_BYTES: Final = 1024 * 1024


class AgentEndpoint(Actor):
    """Owns the agent's byte stream; one per agent connection."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        mediator: Mediator,
        *,
        max_frame_bytes: int = MAX_AGENT_FRAME_BYTES,
        on_roots_changed: Callable[[], None] | None = None,
    ) -> None:
        super().__init__("mcp-endpoint")
        self._reader = reader
        self._writer = writer
        self.mediator = mediator
        self._max_frame_bytes = max_frame_bytes
        self.session = AgentSession(
            mediator,
            self._emit,
            self._spawn,
            live=lambda: self.state == "running",
            on_roots_changed=on_roots_changed,
        )
        self.closed_callback: Callable[[AgentEndpoint], None] | None = None

    async def on_start(self) -> None:
        """Start reading the agent's stream."""
        self.spawn_task(self._read(), name="agent-reader")

    async def on_stop(self) -> None:
        """Close the agent's stream."""
        self._writer.close()
        if self.closed_callback is not None:
            self.closed_callback(self)

    async def handle(self, msg: object) -> object:
        """Endpoint messages: :class:`ToolsChanged` and :class:`Notify` reach the agent."""
        if isinstance(msg, ToolsChanged):
            self.session.notify("notifications/tools/list_changed")
            return None
        if isinstance(msg, Notify):
            self.session.notify(msg.method, msg.params)
            return None
        return await super().handle(msg)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return self.spawn_task(coro, name=name)

    # -- reading ------------------------------------------------------------------------------

    async def _read(self) -> None:
        splitter = LineSplitter(self._max_frame_bytes)
        session = self.session
        while chunk := await self._reader.read(READ_CHUNK_BYTES):
            for frame in splitter.feed(chunk):
                if frame is OVERSIZED:
                    await session.malformed(
                        None, INVALID_REQUEST, f"frame over {self._max_frame_bytes} bytes"
                    )
                    continue
                assert isinstance(frame, bytes)
                try:
                    message = decode_message(frame)
                except FramingError as exc:
                    await session.malformed(exc.request_id, exc.code, str(exc))
                    continue
                await session.on_message(message)
            await self._drain()
        # End of stream: the agent is gone; let pending calls finish their audit trail.
        await session.finish()
        self.stop()

    # -- writing ------------------------------------------------------------------------------

    def _emit(self, frame: bytes, related: RequestId | None, final: bool) -> None:
        if not self._writer.is_closing():
            self._writer.write(frame)

    async def _drain(self) -> None:
        # Only the reader drains (one waiter at a time): a slow agent then slows its own
        # input, and the transport's buffer stays bounded by what one batch of frames wrote.
        if self._writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER_BYTES:
            await self._writer.drain()


class ToolsChanged(msgspec.Struct, frozen=True):
    """An upstream's tool list changed: tell the agent to list again."""


class Notify(msgspec.Struct, frozen=True):
    """Send the agent a notification (a list change, a log message, a resource update)."""

    method: str
    params: McpObject | None = None
