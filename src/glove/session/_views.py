"""What the control methods show of a session: its view, and the watchers of its changes."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import msgspec

from glove.evaluate import Outcome
from glove.records import ReceiptOutcome
from glove.session._store import SessionRecord

#: Events a watcher may fall behind before its stream ends.
MAX_WATCH_BACKLOG: Final = 64


class SessionView(msgspec.Struct, frozen=True):
    """What ``session.status`` shows of one session; a refinement plan's shows its
    ``evaluation`` (``{"verdict": ..., "reasons": [...]}``) once terminal."""

    session_id: str
    state: str
    harness: str
    created_ns: int
    updated_ns: int
    plan_sha256: str
    plan_blake3: str
    receipt_seq: int | None = None
    outcome: ReceiptOutcome | None = None
    launch_binding: str | None = None
    cleaned: bool = False
    #: The plan's terminal: ``pipes`` (``glove session output``) or ``pty`` (``session log``).
    terminal: str = "pipes"
    evaluation: Outcome | None = None


def view_of(record: SessionRecord) -> SessionView:
    """The view of ``record`` as it stands."""
    return SessionView(
        session_id=record.session_id,
        state=record.state,
        harness=str(record.plan.get("harness", "")),
        created_ns=record.created_ns,
        updated_ns=record.state_ns,
        plan_sha256=record.sha256,
        plan_blake3=record.blake3,
        receipt_seq=record.receipt_seq,
        outcome=record.outcome,
        launch_binding=record.launch_binding,
        cleaned=record.cleaned,
        terminal=str(record.plan.get("terminal", "pipes")),
        evaluation=record.evaluation,
    )


class ExposureView(msgspec.Struct, frozen=True, omit_defaults=True):
    """An exposure as the owner sees it."""

    alias: str
    generation: int
    mode: str
    target: str
    path: str | None = None
    revoked: bool = False


WatchQueue = asyncio.Queue[SessionView | None]


class Watchers:
    """Each session's watchers: a bounded queue each, the current view first, then each
    change once durable; None ends a stream (the session is terminal, or gloved stops)."""

    def __init__(self) -> None:
        self._queues: dict[str, set[WatchQueue]] = {}

    def add(self, record: SessionRecord) -> WatchQueue:
        """A new watcher of ``record``'s session."""
        queue: WatchQueue = asyncio.Queue(MAX_WATCH_BACKLOG)
        queue.put_nowait(view_of(record))
        if record.terminal:
            queue.put_nowait(None)
        else:
            self._queues.setdefault(record.session_id, set()).add(queue)
        return queue

    def discard(self, session_id: str, queue: WatchQueue) -> None:
        """Forget a watcher (its stream ended)."""
        self._queues.get(session_id, set()).discard(queue)

    def publish(self, record: SessionRecord) -> None:
        """Show ``record``'s view to its watchers; a watcher too slow to keep up is dropped
        (its stream ends), and every stream ends once the session is terminal."""
        view = view_of(record)
        for queue in list(self._queues.get(record.session_id, ())):
            try:
                queue.put_nowait(view)
            except asyncio.QueueFull:
                self._queues[record.session_id].discard(queue)  # too slow: its stream ends
        if record.terminal:
            for queue in self._queues.pop(record.session_id, set()):
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)

    def end_all(self) -> None:
        """End every stream (gloved stops)."""
        for queues in self._queues.values():
            for queue in queues:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)
