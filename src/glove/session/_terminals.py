"""The terminal methods' messages: the registry routes, the PTY drain acts.

A terminal method (``_attach.py``) first *asks the registry* (one of
:data:`TerminalRequest`): the registry checks the session (it exists, it has a terminal, it
is running, the viewer writes) and answers with where to go, waiting on no drain. Then the
method *asks the session's drain* (one of :data:`DrainRequest`): the drain writes the input,
sets the size, raises the signal, or adds a viewer's wake-up. Neither reaches into the
other's state. The one exception, a viewer's stream reading the transcript ring itself,
is docs/decisions/0050-viewers-read-the-ring.md.

Refusals come back as :class:`~glove.session._messages.Refused` and are raised again by
:func:`~glove.session._messages.ask_registry` on the asker's side, so neither actor crashes
on a request it refused; the error codes are the methods' own (``MethodError``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glove.control import MethodError
from glove.session._messages import Message

if TYPE_CHECKING:
    from glove.session._escape import TerminalModes
    from glove.session._pty_drain import PtyDrain
    from glove.session._sandbox import SandboxActor
    from glove.session._store import SessionRecord
    from glove.session._viewers import TerminalHub, Viewer

# -- asked of the registry ---------------------------------------------------------------------


class TerminalOpen(Message, frozen=True):
    """``session.attach`` begins: where the session's transcript is (a PTY session only)."""

    session_id: str


class ViewerAdd(Message, frozen=True):
    """Add a viewer (the writer if it asks to write); the reply is the :class:`Viewer`."""

    session_id: str
    client: str
    writer: bool


class ViewerRemove(Message, frozen=True):
    """A viewer's stream ended (told, not asked)."""

    viewer: Any  # Viewer


class TerminalRoute(Message, frozen=True):
    """Input, resize or signal: the running session's drain (checking ``viewer`` writes);
    with ``any_terminal`` (a signal) a pipes session routes to its sandbox instead."""

    session_id: str
    viewer: int | None = None
    any_terminal: bool = False


class ViewerDetach(Message, frozen=True):
    """``session.detach``: end a viewer's stream; the reply is its :class:`Detached`."""

    session_id: str
    viewer: int


TerminalRequest = TerminalOpen | ViewerAdd | ViewerRemove | TerminalRoute | ViewerDetach


@dataclass(frozen=True)
class Opened:
    """Where ``session.attach`` reads: the session's directory, and its drain and the
    event set when it ends while it is live (both None once it is terminal)."""

    directory: Path
    drain: PtyDrain | None
    ended: asyncio.Event | None


@dataclass(frozen=True)
class Route:
    """Where a terminal request goes: the drain (a PTY session) or the sandbox (pipes)."""

    drain: PtyDrain | None
    sandbox: SandboxActor | None = None


@dataclass(frozen=True)
class Detached:
    """A detached viewer and the offset its stream had reached."""

    viewer: int
    offset: int


# -- asked of the drain -------------------------------------------------------------------------


class WriteInput(Message, frozen=True):
    """Write ``data`` to the terminal; the reply is the bytes still queued."""

    data: bytes


class SetSize(Message, frozen=True):
    """Set the terminal's size."""

    rows: int
    cols: int


class RaiseSignal(Message, frozen=True):
    """Raise ``signum`` for the agent; the reply says where it went."""

    signum: int


class Subscribe(Message, frozen=True):
    """Set ``event`` on every change; the reply is the terminal's :class:`Subscribed`."""

    event: asyncio.Event


class Unsubscribe(Message, frozen=True):
    """Forget a viewer's event (told, not asked)."""

    event: asyncio.Event


DrainRequest = WriteInput | SetSize | RaiseSignal | Subscribe | Unsubscribe


@dataclass(frozen=True)
class Subscribed:
    """The terminal as a new viewer first sees it."""

    rows: int
    cols: int
    modes: TerminalModes


# -- the registry's half ------------------------------------------------------------------------


class TerminalDesk:
    """The registry's handlers of :data:`TerminalRequest`: checks, in the methods' order,
    and routes; each answers at once (none waits on a drain)."""

    def __init__(
        self,
        records: Callable[[], Mapping[str, SessionRecord] | None],
        hub: TerminalHub,
        directory_of: Callable[[str], Path],
        sandbox_of: Callable[[str], SandboxActor | None],
    ) -> None:
        self._records = records
        self._hub = hub
        self._directory_of = directory_of
        self._sandbox_of = sandbox_of

    def handlers(self) -> dict[type, Callable[[Any], Coroutine[Any, Any, object]]]:
        """The registry's handler of each :data:`TerminalRequest`."""
        return {
            TerminalOpen: self._open,
            ViewerAdd: self._add,
            ViewerRemove: self._remove,
            TerminalRoute: self._route,
            ViewerDetach: self._detach,
        }

    def _record(self, session_id: str) -> SessionRecord:
        records = self._records()
        if records is None:
            raise MethodError("session_conflict", "the session registry is not running")
        record = records.get(session_id)
        if record is None:
            raise MethodError("session_not_found", f"no session {session_id!r}")
        return record

    def _pty_record(self, session_id: str) -> SessionRecord:
        record = self._record(session_id)
        terminal = record.plan.get("terminal")
        if terminal != "pty":
            raise MethodError(
                "no_terminal",
                f"session {session_id} has no terminal: its plan says {terminal!r}; its output: "
                f"`glove session output {session_id}` (--stderr for its stderr)",
            )
        return record

    async def _open(self, msg: TerminalOpen) -> Opened:
        self._pty_record(msg.session_id)
        hub = self._hub
        return Opened(
            self._directory_of(msg.session_id),
            hub.drain(msg.session_id),
            hub.ended_event(msg.session_id),
        )

    async def _add(self, msg: ViewerAdd) -> Viewer:
        try:
            return self._hub.new_viewer(msg.session_id, client=msg.client, writer=msg.writer)
        except ValueError as exc:
            raise MethodError("busy", str(exc)) from exc

    async def _remove(self, msg: ViewerRemove) -> None:
        self._hub.remove(msg.viewer)

    async def _route(self, msg: TerminalRoute) -> Route:
        session_id = msg.session_id
        record = self._record(session_id)
        if msg.any_terminal and record.plan.get("terminal") != "pty":
            return Route(None, self._sandbox_of(session_id))
        self._pty_record(session_id)
        drain = self._hub.drain(session_id)
        if drain is None:
            raise MethodError("session_conflict", f"session {session_id} is not running")
        if msg.viewer is not None:
            found = self._hub.viewer(session_id, msg.viewer)
            if found is None or not found.writer:
                writer = self._hub.writer_of(session_id)
                raise MethodError(
                    "not_writer",
                    f"viewer {msg.viewer} is not session {session_id}'s writer"
                    + (f" (viewer {writer} is)" if writer is not None else ""),
                    {"writer": writer},
                )
        return Route(drain)

    async def _detach(self, msg: ViewerDetach) -> Detached:
        self._record(msg.session_id)
        viewer = self._hub.viewer(msg.session_id, msg.viewer)
        if viewer is None:
            raise MethodError(
                "session_conflict",
                f"no viewer {msg.viewer} is attached to session {msg.session_id}",
            )
        viewer.detached = True
        viewer.wake.set()
        return Detached(viewer.viewer_id, viewer.offset)
