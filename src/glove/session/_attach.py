"""The terminal methods: ``session.attach``, ``input``, ``resize``, ``signal``, ``detach``.

``session.attach`` is a *paced* stream (docs/protocol.md): its events are produced at the
pace the viewer reads, from the viewer's own offset in the transcript, so a slow or absent
viewer costs the agent nothing and loses nothing that the ring still holds. Its events,
tagged by ``kind``::

    attached  {viewer, writer, offset, start, end, evicted, rows, cols, modes, live}  first
    data      {offset, data (base64), end}   bytes [offset, offset + len) ; end - that = lag
    gap       {offset, until, evicted}       bytes [offset, until) were evicted before read
    role      {writer, by}                   this viewer's role changed (another took writing)
    end       {offset, reason}               last: closed | detached | caught_up

Offsets in one stream only grow: each ``data`` starts where the previous ``data`` or
``gap`` ended, so a viewer never sees a byte twice or out of order, and ``offset`` in the
last event is where a later attach resumes (``"from": offset``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from glove.actors import ActorDead, ActorError, Busy, fresh_context, race
from glove.control import CallContext, MethodError, MethodRegistry
from glove.plan import MAX_TERMINAL_CELLS, MIN_TERMINAL_CELLS
from glove.session._escape import TerminalModes
from glove.session._messages import Message, ask_registry, deadline_in
from glove.session._methods import SessionId
from glove.session._pty_drain import PtyDrain
from glove.session._registry import SessionRegistry
from glove.session._sandbox import SendSignal
from glove.session._terminals import (
    Detached,
    Opened,
    RaiseSignal,
    Route,
    SetSize,
    Subscribe,
    Subscribed,
    TerminalOpen,
    TerminalRoute,
    Unsubscribe,
    ViewerAdd,
    ViewerDetach,
    ViewerRemove,
    WriteInput,
)
from glove.session._transcript import RingReader, TranscriptReader, TranscriptSource
from glove.session._viewers import Viewer
from glove.session.errors import InputBusy, NoTerminal, TranscriptCorrupt

#: Bytes per ``data`` event (base64 makes a frame of about 88 KiB, well under 1 MiB).
ATTACH_CHUNK_BYTES: Final = 64 * 1024
#: An attach lasts as long as its session; the client asks again after a day.
ATTACH_DEADLINE_S: Final = 24 * 3600.0
#: input, resize, signal, detach: a few syscalls each.
TERMINAL_DEADLINE_S: Final = 5.0
#: Bytes one ``session.input`` may carry.
MAX_INPUT_BYTES: Final = 64 * 1024
MAX_OFFSET: Final = 2**53 - 1
SIGNALS: Final = {
    "INT": signal.SIGINT,
    "QUIT": signal.SIGQUIT,
    "TSTP": signal.SIGTSTP,
    "TERM": signal.SIGTERM,
    "HUP": signal.SIGHUP,
    "USR1": signal.SIGUSR1,
    "USR2": signal.SIGUSR2,
}

Offset = Annotated[int, Meta(ge=0, le=MAX_OFFSET)]
Cells = Annotated[int, Meta(ge=MIN_TERMINAL_CELLS, le=MAX_TERMINAL_CELLS)]
ViewerId = Annotated[int, Meta(ge=1, le=MAX_OFFSET)]
SignalName = Literal["INT", "QUIT", "TSTP", "TERM", "HUP", "USR1", "USR2"]


class AttachParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.attach``: replay from ``from`` (or the last ``tail`` bytes, or everything
    the ring holds), then follow live unless ``follow`` is false."""

    session_id: SessionId
    mode: Literal["read", "write"] = "read"
    from_: Offset | None = msgspec.field(default=None, name="from")
    tail: Offset | None = None
    follow: bool = True


class InputParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.input``: text (``data``) or base64 bytes (``raw``) for the terminal."""

    session_id: SessionId
    data: Annotated[str, Meta(max_length=MAX_INPUT_BYTES)] | None = None
    raw: Annotated[bytes, Meta(max_length=MAX_INPUT_BYTES)] | None = None
    viewer: ViewerId | None = None


class ResizeParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.resize``: the terminal's new size in character cells."""

    session_id: SessionId
    rows: Cells
    cols: Cells
    viewer: ViewerId | None = None


class SignalParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.signal``: a signal by name."""

    session_id: SessionId
    signal: SignalName


class DetachParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.detach``: end viewer ``viewer``'s attach stream."""

    session_id: SessionId
    viewer: ViewerId


class Attached(msgspec.Struct, frozen=True, tag="attached", tag_field="kind"):
    """The first event: who this viewer is and what the transcript holds now."""

    viewer: int
    writer: bool
    offset: int
    start: int
    end: int
    evicted: int
    rows: int
    cols: int
    modes: TerminalModes
    live: bool


class Output(msgspec.Struct, frozen=True, tag="data", tag_field="kind"):
    """Bytes ``[offset, offset + len(data))``; ``end`` is the transcript's end now."""

    offset: int
    data: bytes
    end: int


class Gap(msgspec.Struct, frozen=True, tag="gap", tag_field="kind"):
    """Bytes ``[offset, until)`` were evicted before this viewer read them."""

    offset: int
    until: int
    evicted: int


class Role(msgspec.Struct, frozen=True, tag="role", tag_field="kind"):
    """This viewer's role changed; ``by`` is the writer now."""

    writer: bool
    by: int | None


class Ended(msgspec.Struct, frozen=True, tag="end", tag_field="kind"):
    """The last event: where this viewer stopped, and why."""

    offset: int
    reason: Literal["closed", "detached", "caught_up"]


AttachEvent = Attached | Output | Gap | Role | Ended


class InputResult(msgspec.Struct, frozen=True):
    """``session.input``: bytes taken, and bytes still queued for the agent."""

    accepted: int
    queued: int


class ResizeResult(msgspec.Struct, frozen=True):
    """``session.resize``: the terminal's size now."""

    rows: int
    cols: int


class SignalResult(msgspec.Struct, frozen=True):
    """``session.signal``: where it went (``foreground``: the terminal's foreground
    process group; ``command``: the command, through the sandbox's init)."""

    signal: str
    to: str


class DetachResult(msgspec.Struct, frozen=True):
    """``session.detach``: the viewer, and the offset its stream had reached."""

    viewer: int
    offset: int


async def read_chunk(
    source: TranscriptSource, ring: RingReader, offset: int, limit: int
) -> tuple[int, bytes]:
    """Up to ``limit`` bytes from ``offset`` (memory, else the ring off the loop), and the
    offset they really start at: later than ``offset`` when bytes were evicted meanwhile."""
    length = min(limit, source.end - offset)
    data = source.cached(offset, length)
    if data is not None:
        return offset, data
    data = await asyncio.to_thread(ring.read, offset, length)
    valid = source.start  # read after the bytes: anything below it may have been overwritten
    if valid > offset:
        return valid, data[valid - offset :]
    return offset, data


def _let_go(registry: SessionRegistry, drain: PtyDrain | None, viewer: Viewer) -> None:
    """Unsubscribe a viewer whose stream ended and remove it (run in a fresh context)."""
    with contextlib.suppress(ActorError):
        if drain is not None:
            drain.tell(Unsubscribe(deadline=deadline_in(), event=viewer.wake))
    with contextlib.suppress(ActorError):
        registry.tell(ViewerRemove(deadline=deadline_in(), viewer=viewer))


class TerminalMethods:
    """The handlers, bound to the registry they drive."""

    def __init__(self, registry: Callable[[], SessionRegistry | None]) -> None:
        self._registry = registry

    def register(self, methods: MethodRegistry) -> None:
        """Add the terminal methods, gated on the lifecycle.

        Raises:
            RegistryError: a name is already registered.
        """
        methods.stream(
            "session.attach",
            AttachParams,
            self.attach,
            deadline_s=ATTACH_DEADLINE_S,
            gated=True,
            paced=True,
        )
        unary: list[tuple[str, type[msgspec.Struct], Any]] = [
            ("session.input", InputParams, self.input),
            ("session.resize", ResizeParams, self.resize),
            ("session.signal", SignalParams, self.signal),
            ("session.detach", DetachParams, self.detach),
        ]
        for name, params, handler in unary:
            methods.unary(name, params, handler, deadline_s=TERMINAL_DEADLINE_S, gated=True)

    # -- asking the registry, then the drain --------------------------------------------------

    def _live(self) -> SessionRegistry:
        registry = self._registry()
        if registry is None or registry.store is None:
            raise MethodError("session_conflict", "the session registry is not running")
        return registry

    @staticmethod
    async def _ask_drain(drain: PtyDrain, msg: Message, session_id: str) -> Any:
        """Ask the drain; a drain that stopped meanwhile is a session that is not running.
        One that has not started yet has no terminal yet (asked, it would answer only
        then): refused at once, as its closed input side says it."""
        if not drain.started.is_set():
            raise MethodError("session_conflict", "the session's terminal is not open yet")
        try:
            return await ask_registry(drain, msg, wait=True)
        except ActorDead as exc:
            raise MethodError("session_conflict", f"session {session_id} is not running") from exc

    @staticmethod
    async def _open_source(
        opened: Opened, session_id: str
    ) -> tuple[TranscriptSource, RingReader, PtyDrain | None]:
        """The live transcript (waiting for it to exist), or the one on disk."""
        directory, drain, ended = opened.directory, opened.drain, opened.ended
        if drain is not None and drain.transcript is None and ended is not None:
            await race(drain.started.wait(), ended.wait())
        try:
            if drain is not None and drain.transcript is not None:
                ring = await asyncio.to_thread(RingReader.open, directory, drain.capacity)
                return drain.transcript, ring, drain
            reader = await asyncio.to_thread(TranscriptReader.open, directory)
        except NoTerminal as exc:
            raise MethodError(
                "no_terminal", f"session {session_id} has no transcript: {exc}"
            ) from exc
        except TranscriptCorrupt as exc:
            raise MethodError("transcript_corrupt", str(exc)) from exc
        return reader, reader.ring, None

    @staticmethod
    def _first_offset(params: AttachParams, source: TranscriptSource) -> int:
        if params.tail is not None:
            return max(source.start, source.end - params.tail)
        if params.from_ is None:
            return source.start
        if params.from_ > source.end:
            raise MethodError(
                "session_conflict",
                f"offset {params.from_} is beyond the transcript's end {source.end}",
                {"end": source.end},
            )
        return params.from_

    # -- the stream -----------------------------------------------------------------------------

    async def attach(self, params: AttachParams, call: CallContext) -> AsyncIterator[AttachEvent]:
        """Replay the transcript from an offset, then follow it live (see the module)."""
        registry = self._live()
        session_id = params.session_id
        opened: Opened = await ask_registry(
            registry, TerminalOpen(deadline=deadline_in(), session_id=session_id)
        )
        if params.from_ is not None and params.tail is not None:
            raise MethodError(
                "invalid_params", "give from or tail, not both", {"path": "$.params.tail"}
            )
        source, ring, drain = await self._open_source(opened, session_id)
        try:
            offset = self._first_offset(params, source)
            live = drain is not None and not source.closed
            viewer: Viewer = await ask_registry(
                registry,
                ViewerAdd(
                    deadline=deadline_in(),
                    session_id=session_id,
                    client=call.client,
                    writer=live and params.mode == "write",
                ),
            )
        except BaseException:
            ring.close()
            raise
        try:
            terminal = Subscribed(0, 0, TerminalModes())
            if drain is not None:
                try:
                    terminal = await ask_registry(
                        drain, Subscribe(deadline=deadline_in(), event=viewer.wake), wait=True
                    )
                except ActorDead:  # it stopped meanwhile: the terminal as it was left
                    rows, cols = drain.size
                    terminal = Subscribed(rows, cols, drain.modes)
            yield Attached(
                viewer=viewer.viewer_id,
                writer=viewer.writer,
                offset=offset,
                start=source.start,
                end=source.end,
                evicted=source.start,
                rows=terminal.rows,
                cols=terminal.cols,
                modes=terminal.modes,
                live=live,
            )
            async for event in self._follow(params, source, ring, viewer, offset):
                yield event
        finally:
            # Under deadlines of their own: the stream may end because its deadline passed,
            # and messages capped by it would be dropped as stale (a ghost viewer).
            fresh_context().run(_let_go, registry, drain, viewer)
            ring.close()

    @staticmethod
    async def _follow(
        params: AttachParams,
        source: TranscriptSource,
        ring: RingReader,
        viewer: Viewer,
        offset: int,
    ) -> AsyncIterator[AttachEvent]:
        while True:
            viewer.offset = offset
            if viewer.detached:
                yield Ended(offset, "detached")
                return
            if viewer.role_changed:
                viewer.role_changed = False
                yield Role(viewer.writer, viewer.writer_now())
                continue
            start = source.start
            if offset < start:
                yield Gap(offset, start, start)
                offset = start
                continue
            if offset < source.end:
                at, data = await read_chunk(source, ring, offset, ATTACH_CHUNK_BYTES)
                if at > offset:
                    yield Gap(offset, at, at)
                    offset = at
                if data:
                    yield Output(offset, data, source.end)
                    offset += len(data)
                continue
            if source.closed:
                yield Ended(offset, "closed")
                return
            if not params.follow:
                yield Ended(offset, "caught_up")
                return
            viewer.wake.clear()
            if offset < source.end or source.closed or viewer.detached or viewer.role_changed:
                continue
            await viewer.wake.wait()

    # -- unary ----------------------------------------------------------------------------------

    @staticmethod
    async def _route(registry: SessionRegistry, msg: TerminalRoute) -> Route:
        return await ask_registry(registry, msg)  # type: ignore[no-any-return]

    async def input(self, params: InputParams, _call: CallContext) -> InputResult:
        """Type into the session's terminal (the writer's viewer id, or none: a script)."""
        if (params.data is None) == (params.raw is None):
            raise MethodError(
                "invalid_params",
                "give exactly one of data (text) and raw (base64 bytes)",
                {"path": "$.params.data"},
            )
        payload = params.raw if params.raw is not None else (params.data or "").encode()
        if len(payload) > MAX_INPUT_BYTES:
            raise MethodError(
                "invalid_params",
                f"input is {len(payload)} bytes encoded; at most {MAX_INPUT_BYTES}",
                {"path": "$.params.data"},
            )
        session_id = params.session_id
        route = await self._route(
            self._live(),
            TerminalRoute(deadline=deadline_in(), session_id=session_id, viewer=params.viewer),
        )
        assert route.drain is not None
        try:
            queued = await self._ask_drain(
                route.drain, WriteInput(deadline=deadline_in(), data=payload), session_id
            )
        except InputBusy as exc:
            raise MethodError("busy", str(exc)) from exc
        except NoTerminal as exc:
            raise MethodError("session_conflict", str(exc)) from exc
        return InputResult(len(payload), queued)

    async def resize(self, params: ResizeParams, _call: CallContext) -> ResizeResult:
        """Resize the session's terminal (SIGWINCH reaches the agent when it changed)."""
        session_id = params.session_id
        route = await self._route(
            self._live(),
            TerminalRoute(deadline=deadline_in(), session_id=session_id, viewer=params.viewer),
        )
        assert route.drain is not None
        try:
            await self._ask_drain(
                route.drain,
                SetSize(deadline=deadline_in(), rows=params.rows, cols=params.cols),
                session_id,
            )
        except NoTerminal as exc:
            raise MethodError("session_conflict", str(exc)) from exc
        return ResizeResult(params.rows, params.cols)

    async def signal(self, params: SignalParams, _call: CallContext) -> SignalResult:
        """Signal the agent: INT, QUIT, TSTP go to a terminal's foreground process group,
        the others (and every signal of a pipes session) to the command."""
        session_id = params.session_id
        route = await self._route(
            self._live(),
            TerminalRoute(deadline=deadline_in(), session_id=session_id, any_terminal=True),
        )
        signum = SIGNALS[params.signal]
        if route.drain is not None:
            try:
                to = await self._ask_drain(
                    route.drain, RaiseSignal(deadline=deadline_in(), signum=signum), session_id
                )
            except NoTerminal as exc:
                raise MethodError("session_conflict", str(exc)) from exc
            return SignalResult(params.signal, to)
        if signum == signal.SIGTSTP:
            raise MethodError("no_terminal", "TSTP needs a terminal; this session has pipes")
        sandbox = route.sandbox
        if sandbox is None or sandbox.box is None:
            raise MethodError("session_conflict", f"session {session_id} is not running")
        try:
            sandbox.tell(SendSignal(signum))
        except (ActorDead, Busy) as exc:
            raise MethodError("session_conflict", f"the sandbox cannot take it: {exc}") from exc
        return SignalResult(params.signal, "command")

    async def detach(self, params: DetachParams, _call: CallContext) -> DetachResult:
        """End a viewer's attach stream (it says ``end``, ``detached``, with its offset)."""
        msg = ViewerDetach(
            deadline=deadline_in(), session_id=params.session_id, viewer=params.viewer
        )
        detached: Detached = await ask_registry(self._live(), msg)
        return DetachResult(detached.viewer, detached.offset)
