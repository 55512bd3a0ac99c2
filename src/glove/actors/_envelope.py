"""The envelope a message travels in: payload, absolute deadline, optional reply future."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Deferred:
    """A reply that completes later: the asker awaits ``future`` under its own deadline.

    A handler returns ``Deferred(fut)`` when the work continues outside the actor (an
    upstream request in flight), so the actor can take its next message meanwhile. If the
    asker gives up (deadline, cancellation), ``future`` is cancelled, which the owner can
    observe to cancel the work upstream.
    """

    future: asyncio.Future[Any]


@dataclass(slots=True)
class Envelope:
    """One message in a mailbox."""

    msg: object
    deadline: float
    reply: asyncio.Future[Any] | None = None
    msg_type: str = field(default="")

    def __post_init__(self) -> None:
        if not self.msg_type:
            self.msg_type = type(self.msg).__name__

    @property
    def abandoned(self) -> bool:
        """True when an asker was waiting and has given up."""
        return self.reply is not None and self.reply.done()

    def fail(self, exc: BaseException) -> None:
        """Deliver ``exc`` to the asker, if one is still waiting."""
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(exc)

    def resolve(self, result: object) -> None:
        """Deliver ``result`` to the asker; chain a :class:`Deferred` to its future."""
        reply = self.reply
        if reply is None or reply.done():
            if isinstance(result, Deferred) and reply is not None:
                result.future.cancel()
            return
        if isinstance(result, Deferred):
            _chain(result.future, reply)
        else:
            reply.set_result(result)


def _chain(source: asyncio.Future[Any], reply: asyncio.Future[Any]) -> None:
    def _forward(src: asyncio.Future[Any]) -> None:
        if reply.done():
            return
        if src.cancelled():
            reply.cancel()
        elif (exc := src.exception()) is not None:
            reply.set_exception(exc)
        else:
            reply.set_result(src.result())

    def _backward(rep: asyncio.Future[Any]) -> None:
        # The asker gave up: let the owner of the work know by cancelling its future.
        if rep.cancelled() and not source.done():
            source.cancel()

    source.add_done_callback(_forward)
    reply.add_done_callback(_backward)
