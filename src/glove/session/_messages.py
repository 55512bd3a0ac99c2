"""The registry's messages: one tagged union of msgspec Structs, each with its deadline.

The control methods (``_methods.py``, ``_attach.py``) *ask* the registry with a
:data:`Request`; each session's driver (``_driver.py``) reports its progress with a
:data:`Progress`; the registry's watch on a session tree tells it :class:`SessionExited`.
The registry handles them one at a time (``SessionRegistry.handle``), so two requests never
interleave: what a handler reads it reads whole, what it writes no other handler sees half
done.

Every message carries ``deadline``, the absolute ``loop.time()`` by which its asker wants
the reply (the control request's own deadline, inherited: see
:func:`glove.actors.current_deadline`); the mailbox drops a message whose deadline passed
before it was reached, and a handler overrunning it crashes the registry (DESIGN.md §2).

A refusal the caller expects (no such session, a plan that is invalid here) comes back as
:class:`Refused` and is raised again on the asker's side by :func:`ask_registry`: an
exception out of a handler would crash the registry, and it owns the daemon's durable state.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

import msgspec

from glove.actors import current_deadline
from glove.records import EvaluationEntry, Receipt, ReceiptOutcome, State, StateDetails

if TYPE_CHECKING:
    from glove.actors import Actor

#: The reply deadline when the asker has none of its own (a test, a background task).
DEFAULT_REQUEST_S: Final = 30.0


class Message(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """A message to the registry; ``deadline`` is its asker's (``loop.time()``)."""

    deadline: float


# -- requests: asked by the control methods ------------------------------------------------


class Validate(Message, frozen=True):
    """``plan.validate``: judge a plan's bytes against local policy now."""

    data: bytes


class Create(Message, frozen=True):
    """``session.create``: validate, persist, start the session's driver."""

    data: bytes


class Status(Message, frozen=True):
    """``session.status``: one session's view (cheap: a lookup and a struct)."""

    session_id: str


class List(Message, frozen=True):
    """``session.list``: a page of sessions by id, optionally in one state."""

    state: str | None
    after: str | None
    limit: int


class Watch(Message, frozen=True):
    """``session.watch``: a queue of the session's views (None ends it)."""

    session_id: str


class Unwatch(Message, frozen=True):
    """A watcher's stream ended: forget its queue."""

    session_id: str
    queue: Any


class Stop(Message, frozen=True):
    """``session.stop``: tell the session's driver to stop it."""

    session_id: str


class Cleanup(Message, frozen=True):
    """``session.cleanup``: remove a terminal session's output files."""

    session_id: str


class Cleaned(Message, frozen=True):
    """The registry's own follow-up: a cleanup's files are gone, record it."""

    session_id: str


class ReceiptsPage(Message, frozen=True):
    """``receipts.page``: receipts after ``after``, with their payloads."""

    after: int
    limit: int


class ReceiptsAck(Message, frozen=True):
    """``receipts.ack``: the next receipt was taken."""

    seq: int


class ReceiptsExport(Message, frozen=True):
    """``receipts.export``: the bundle of the session's final receipt."""

    session_id: str


class Expose(Message, frozen=True):
    """``exposure.create``: check a directory (off the registry) and record it."""

    alias: str
    path: str
    mode: str
    target: str | None


class Exposed(Message, frozen=True):
    """The registry's own follow-up: an exposure's checks passed, commit it."""

    candidate: Any


class Revoke(Message, frozen=True):
    """``exposure.revoke``."""

    alias: str


class Exposures(Message, frozen=True):
    """``exposure.list``."""


# -- progress: asked by a session's driver ---------------------------------------------------


class Resolve(Message, frozen=True):
    """The driver prepares: each exposure of the plan resolved through its pinned
    generation (binds, exposures and each one's contents check, to run off the loop)."""

    session_id: str


class Moved(Message, frozen=True):
    """The driver reached ``state``: persist it (``durable=False``: shown once durable)."""

    session_id: str
    state: State
    details: StateDetails | None = None
    durable: bool = True


class DrainOpened(Message, frozen=True):
    """A PTY session's drain exists: its viewers may attach."""

    session_id: str
    drain: Any


class Finish(Message, frozen=True):
    """The driver's last word: the receipt's payload and the outcome it states. The
    registry appends and seals the receipt, then makes the session terminal."""

    session_id: str
    payload: Receipt
    outcome: ReceiptOutcome
    evaluation: EvaluationEntry | None


# -- told by the registry's watch on a session tree ---------------------------------------------


class SessionExited(Message, frozen=True):
    """``session-<id>`` ended; ``reason`` is its exit reason (None: normally)."""

    session_id: str
    reason: Any


Request = (
    Validate
    | Create
    | Status
    | List
    | Watch
    | Unwatch
    | Stop
    | Cleanup
    | Cleaned
    | ReceiptsPage
    | ReceiptsAck
    | ReceiptsExport
    | Expose
    | Exposed
    | Revoke
    | Exposures
)
Progress = Resolve | Moved | DrainOpened | Finish
RegistryMessage = Request | Progress | SessionExited


class Refused(msgspec.Struct, frozen=True):
    """A refusal the asker expects, carried back as the reply (never raised in the
    registry, which it would crash)."""

    error: Any


def deadline_in(timeout: float = DEFAULT_REQUEST_S) -> float:
    """``now + timeout``, capped by the deadline of the request being handled, if any."""
    own = asyncio.get_running_loop().time() + timeout
    inherited = current_deadline()
    return own if inherited is None else min(own, inherited)


async def ask_registry(registry: Actor, msg: Message, *, wait: bool = False) -> Any:
    """Ask the registry ``msg`` under its own deadline; raise what came back refused.

    Raises:
        Exception: the :class:`Refused` error; ``Busy``, ``DeadlineExceeded`` or
            ``ActorDead`` from the mailbox.
    """
    timeout = msg.deadline - asyncio.get_running_loop().time()
    reply = await registry.ask(msg, timeout=max(timeout, 0.0), wait=wait)
    if isinstance(reply, Refused):
        raise reply.error
    return reply
