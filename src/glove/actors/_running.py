"""Run an actor or a supervisor as a task for the length of an ``async with`` block."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final, TypeVar

from glove.actors._actor import Actor
from glove.actors._supervisor import Supervisor

N = TypeVar("N", Actor, Supervisor)

DEFAULT_STOP_GRACE_S: Final = 5.0


@asynccontextmanager
async def running(node: N, *, grace: float = DEFAULT_STOP_GRACE_S) -> AsyncIterator[N]:
    """Start ``node``, yield it once it has started, stop it on exit within ``grace``.

    The node's exit reason, if it crashed, stays on ``node.exit_reason``; this context
    manager does not re-raise it, so a test can crash a node on purpose and then inspect it.

    Raises:
        TimeoutError: the node did not stop within ``grace`` (it is then force-killed).
    """
    task = asyncio.get_running_loop().create_task(node.run(), name=f"running/{node.name}")
    started = asyncio.ensure_future(node.started.wait())
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
    started.cancel()
    try:
        yield node
    finally:
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            node.force_kill()
            raise TimeoutError(f"{node.name} did not stop within {grace}s")
        if not task.cancelled():
            task.exception()  # retrieved: the reason is kept on node.exit_reason
