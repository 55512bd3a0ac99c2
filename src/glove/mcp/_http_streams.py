"""The streams and sessions of the Streamable HTTP front (one event loop, no I/O of its own
beyond writing to the connections it is handed).

A :class:`Stream` is one SSE response (a POST's answer stream, or the session's GET
stream): events carry ids ``<stream>-<n>``, the last :data:`MAX_REPLAY_EVENTS` are kept for a
``Last-Event-ID`` replay. A :class:`Session` routes the frames its agent session emits to the
stream, the JSON waiter, or the GET stream they belong to.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from glove.actors import Actor
from glove.mcp._http import encode_chunk, encode_sse
from glove.mcp._http_checks import HttpOptions
from glove.mcp._messages import RequestId

if TYPE_CHECKING:
    from glove.mcp._agent_session import AgentSession
    from glove.mcp._service import Mediation

#: Messages for no open stream kept until the GET stream opens (oldest dropped beyond).
MAX_BACKLOG: Final = 256
#: Events each stream keeps for a ``Last-Event-ID`` replay, and ended streams kept.
MAX_REPLAY_EVENTS: Final = 256
MAX_ENDED_STREAMS: Final = 32


class Stream:
    """One SSE stream of a session: a POST's answer stream, or the GET stream."""

    def __init__(self, key: str, retry_ms: int) -> None:
        self.key = key
        self._retry_ms = retry_ms
        self._seq = 0
        self.events: deque[tuple[int, bytes]] = deque(maxlen=MAX_REPLAY_EVENTS)
        self.writer: asyncio.StreamWriter | None = None
        self.ended = asyncio.Event()
        self.detached = asyncio.Event()

    def attach(self, writer: asyncio.StreamWriter, *, replay_after: int | None = None) -> None:
        """Write to ``writer`` from now on (after the priming event or a replay)."""
        self.writer = writer
        self.detached.clear()
        if replay_after is None:
            self._write(encode_sse(b"", event_id=f"{self.key}-0", retry_ms=self._retry_ms))
        else:
            for seq, event in self.events:
                if seq > replay_after:
                    self._write(event)

    def send(self, frame: bytes) -> None:
        """Send one JSON-RPC message as an event (kept for replay)."""
        self._seq += 1
        event = encode_sse(frame, event_id=f"{self.key}-{self._seq}")
        self.events.append((self._seq, event))
        self._write(event)

    def end(self) -> None:
        """No more events: finish the response."""
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(encode_chunk(b""))
        self.ended.set()

    def _write(self, event: bytes) -> None:
        writer = self.writer
        if writer is None or writer.is_closing():
            self.writer = None
            self.detached.set()
            return
        writer.write(encode_chunk(event))


class SessionActor(Actor):
    """Owns an HTTP session's in-flight requests (a temporary child of its mediation)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"http-session-{session_id[:8]}")

    async def handle(self, msg: object) -> object:
        """Takes no messages: its tasks are spawned directly."""
        return await super().handle(msg)


@dataclass
class Session:
    """One HTTP session: its mediation, its protocol state, its streams."""

    id: str
    mediation: Mediation
    actor: SessionActor
    options: HttpOptions
    agent: AgentSession | None = None
    streams: dict[RequestId, Stream] = field(default_factory=dict)
    by_key: OrderedDict[str, Stream] = field(default_factory=OrderedDict)
    waiters: dict[RequestId, asyncio.Future[bytes]] = field(default_factory=dict)
    get_stream: Stream | None = None
    backlog: deque[bytes] = field(default_factory=lambda: deque(maxlen=MAX_BACKLOG))
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0

    def emit(self, frame: bytes, related: RequestId | None, final: bool) -> None:
        """Route one frame of the agent session to where its request waits."""
        stream = self.streams.get(related) if related is not None else None
        if stream is not None:
            stream.send(frame)
            if final:
                del self.streams[related]  # type: ignore[arg-type]
                stream.end()
            return
        waiter = self.waiters.get(related) if related is not None else None
        if waiter is not None:
            if final and not waiter.done():
                waiter.set_result(frame)
            return
        if self.get_stream is not None and not self.get_stream.ended.is_set():
            self.get_stream.send(frame)
        else:
            self.backlog.append(frame)

    def cancelled(self, request_id: object) -> None:
        """The agent cancelled ``request_id``: it gets no answer, so its stream ends."""
        if isinstance(request_id, int | str):
            stream = self.streams.pop(request_id, None)
            if stream is not None:
                stream.end()

    def open_stream(self, request_id: RequestId) -> Stream:
        """A new answer stream for ``request_id`` (kept for replay after it ends)."""
        key = secrets.token_hex(6)
        stream = Stream(key, self.options.retry_ms)
        self.streams[request_id] = stream
        self.by_key[key] = stream
        while len(self.by_key) > MAX_ENDED_STREAMS + len(self.streams) + 1:
            self.by_key.popitem(last=False)
        return stream
