"""Absolute deadlines carried by messages and inherited by nested asks.

A handler runs with the deadline of the message it handles in a context variable; an ask
made from inside it can only shrink that deadline, never extend it (like gRPC deadline
propagation). Deadlines are ``loop.time()`` values.
"""

from __future__ import annotations

import asyncio
import contextvars

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "glove_actor_deadline", default=None
)


def current_deadline() -> float | None:
    """Return the absolute deadline (``loop.time()``) of the message being handled, if any."""
    return _DEADLINE.get()


def effective_deadline(timeout: float) -> float:
    """Return ``now + timeout``, capped by the deadline inherited from the current handler."""
    own = asyncio.get_running_loop().time() + timeout
    inherited = _DEADLINE.get()
    return own if inherited is None else min(own, inherited)


def fresh_context() -> contextvars.Context:
    """Return a copy of the current context with no inherited deadline.

    Background tasks an actor owns must not inherit the deadline of whatever message was
    being handled when they were spawned.
    """
    ctx = contextvars.copy_context()
    ctx.run(_DEADLINE.set, None)
    return ctx


def set_deadline(deadline: float) -> contextvars.Token[float | None]:
    """Set the current handler deadline; return the token to reset it."""
    return _DEADLINE.set(deadline)


def reset_deadline(token: contextvars.Token[float | None]) -> None:
    """Undo :func:`set_deadline`."""
    _DEADLINE.reset(token)
