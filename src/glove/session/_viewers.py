"""Who is attached to which session's terminal: viewers, the one writer, the live drains.

Every ``session.attach`` is a :class:`Viewer`. At most one viewer per session is the
**writer**: its input and resizes are accepted (``session.input``/``session.resize`` naming
its viewer id); a later attach that asks to write takes the role over and the previous
writer is told, in its own stream, that it now only reads (as ``tmux attach -d`` does, but
without detaching it). Calls that name no viewer (a script's ``glove session input``) are
accepted too: every client of the socket is the owner.

The :class:`TerminalHub` is the registry's: it holds the :class:`PtyDrain` of every PTY
session that is not terminal yet, and the viewers of every session that has some.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Final

from glove.session._pty_drain import PtyDrain

#: Viewers of one session at once; more are refused (busy).
MAX_VIEWERS_PER_SESSION: Final = 16


@dataclass(eq=False)
class Viewer:
    """One attached client (a ``session.attach`` stream)."""

    viewer_id: int
    session_id: str
    client: str
    writer: bool
    #: The offset of the next byte its stream will send.
    offset: int = 0
    detached: bool = False
    #: Its role changed since its stream last said so.
    role_changed: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: The viewers of its session (which of them writes now), shared with the registry's
    #: hub: the stream reads it, as it reads the ring (docs/decisions/0050).
    peers: SessionViewers | None = None

    def writer_now(self) -> int | None:
        """The viewer id of its session's writer now, if it has one."""
        return self.peers.writer if self.peers is not None else None


class SessionViewers:
    """The viewers of one session, and which of them is the writer."""

    def __init__(self) -> None:
        self.viewers: dict[int, Viewer] = {}
        self.writer: int | None = None

    def __len__(self) -> int:
        return len(self.viewers)

    def add(self, viewer: Viewer) -> None:
        """Add ``viewer``; if it writes, it becomes the writer (the previous one is told)."""
        self.viewers[viewer.viewer_id] = viewer
        if viewer.writer:
            previous = self.viewers.get(self.writer) if self.writer is not None else None
            if previous is not None:
                previous.writer = False
                previous.role_changed = True
                previous.wake.set()
            self.writer = viewer.viewer_id

    def remove(self, viewer: Viewer) -> None:
        """Forget ``viewer`` (its stream ended)."""
        self.viewers.pop(viewer.viewer_id, None)
        if self.writer == viewer.viewer_id:
            self.writer = None

    def get(self, viewer_id: int) -> Viewer | None:
        """The viewer with that id, if attached."""
        return self.viewers.get(viewer_id)


class TerminalHub:
    """The live PTY drains and the viewers, by session."""

    def __init__(self) -> None:
        self._drains: dict[str, PtyDrain] = {}
        self._ended: dict[str, asyncio.Event] = {}
        self._viewers: dict[str, SessionViewers] = {}
        self._ids = itertools.count(1)

    def opened(self, session_id: str, drain: PtyDrain) -> None:
        """A PTY session's lifecycle began: its drain exists (it may not have started)."""
        self._drains[session_id] = drain
        self._ended[session_id] = asyncio.Event()

    def ended(self, session_id: str) -> None:
        """The session is terminal: its transcript is read from disk from now on."""
        self._drains.pop(session_id, None)
        event = self._ended.pop(session_id, None)
        if event is not None:
            event.set()
        for viewer in self.viewers_of(session_id):
            viewer.wake.set()

    def drain(self, session_id: str) -> PtyDrain | None:
        """The session's live drain, until it is terminal."""
        return self._drains.get(session_id)

    def ended_event(self, session_id: str) -> asyncio.Event | None:
        """Set when the session becomes terminal (None once it is)."""
        return self._ended.get(session_id)

    def new_viewer(self, session_id: str, *, client: str, writer: bool) -> Viewer:
        """A viewer of ``session_id``, added (and made the writer if it asks to write).

        Raises:
            ValueError: the session already has :data:`MAX_VIEWERS_PER_SESSION` viewers.
        """
        viewers = self._viewers.setdefault(session_id, SessionViewers())
        if len(viewers) >= MAX_VIEWERS_PER_SESSION:
            raise ValueError(f"session {session_id} has {len(viewers)} viewers already")
        viewer = Viewer(next(self._ids), session_id, client, writer, peers=viewers)
        viewers.add(viewer)
        return viewer

    def remove(self, viewer: Viewer) -> None:
        """The viewer's stream ended."""
        viewers = self._viewers.get(viewer.session_id)
        if viewers is None:
            return
        viewers.remove(viewer)
        if not viewers.viewers:
            del self._viewers[viewer.session_id]

    def viewer(self, session_id: str, viewer_id: int) -> Viewer | None:
        """An attached viewer of the session."""
        viewers = self._viewers.get(session_id)
        return viewers.get(viewer_id) if viewers is not None else None

    def viewers_of(self, session_id: str) -> list[Viewer]:
        """Every viewer of the session now."""
        viewers = self._viewers.get(session_id)
        return list(viewers.viewers.values()) if viewers is not None else []

    def writer_of(self, session_id: str) -> int | None:
        """The writer's viewer id, if the session has one."""
        viewers = self._viewers.get(session_id)
        return viewers.writer if viewers is not None else None
