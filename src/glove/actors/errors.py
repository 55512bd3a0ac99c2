"""Errors of the actor runtime.

::

    GloveError
    └── ActorError
        ├── ActorDead          the actor stopped or crashed before it handled the message
        ├── Busy               the mailbox was full and the sender chose not to wait
        ├── DeadlineExceeded   the message's deadline passed (also a ``TimeoutError``)
        ├── DeadlineOverrun    a handler ran past its message's deadline: the actor crashed
        └── ChildFailed        a supervisor gave up: restart intensity exceeded (escalation)
"""

from __future__ import annotations

from glove.errors import GloveError


class ActorError(GloveError):
    """Base class of actor runtime errors."""


class ActorDead(ActorError):
    """The actor stopped or crashed before it handled this message."""

    def __init__(self, actor: str, why: str = "stopped") -> None:
        super().__init__(f"actor {actor!r} is dead ({why}); the message was not handled")
        self.actor = actor


class Busy(ActorError):
    """The actor's mailbox is full and the sender asked not to wait."""

    def __init__(self, actor: str, capacity: int) -> None:
        super().__init__(f"actor {actor!r} is busy: mailbox full ({capacity} messages)")
        self.actor = actor
        self.capacity = capacity


class DeadlineExceeded(ActorError, TimeoutError):
    """The message's absolute deadline passed before a reply arrived."""

    def __init__(self, actor: str, msg_type: str) -> None:
        super().__init__(f"deadline exceeded for {msg_type} sent to actor {actor!r}")
        self.actor = actor
        self.msg_type = msg_type


class DeadlineOverrun(ActorError):
    """A handler overran its message's deadline; its state can no longer be trusted."""

    def __init__(self, actor: str, msg_type: str) -> None:
        super().__init__(f"actor {actor!r} overran the deadline while handling {msg_type}")
        self.actor = actor
        self.msg_type = msg_type


class ChildFailed(ActorError):
    """A supervisor exceeded its restart intensity and escalates to its parent."""

    def __init__(self, path: str, cause: BaseException | None) -> None:
        super().__init__(f"{path} failed: {cause!r}")
        self.path = path
        self.cause = cause
