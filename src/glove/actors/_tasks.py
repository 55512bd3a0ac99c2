"""Tasks with an owner: the only place outside the actor runtime's own nodes that makes them.

Every task Glove starts has someone who cancels it and reads how it ended. An actor's helpers
are its :meth:`~glove.actors.Actor.spawn_task`; a supervisor's children are its own. For the
rest there are three shapes, and ``tests/test_tasks_owned.py`` holds the code to them:

- :func:`race`: wait for the first of a few awaitables; the wrappers it made for the others
  are cancelled before it returns (or when it is cancelled itself). :func:`settle`: wait
  for all of them, ``gather(..., return_exceptions=True)`` with an owner.
- :func:`start_node` / :func:`spawn_node`: run a root node (an actor or a supervisor) in a
  task of its own, which the caller awaits when the node stops.
- :class:`TaskOwner`: a small set of tasks that is cancelled as one when it closes; an
  exception a task ends with is reported (logged, or handed to ``report``), never dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

_log = logging.getLogger("glove.actors")


class Node(Protocol):
    """What :func:`start_node` runs: an :class:`~glove.actors.Actor` or a supervisor."""

    name: str
    started: asyncio.Event

    async def run(self) -> None:
        """Run until stopped."""


async def race(*waits: Awaitable[Any]) -> tuple[asyncio.Future[Any], ...]:
    """Wait until one of ``waits`` completes; return one future per wait, in order.

    A future passed in is returned as it is and never cancelled (the caller owns it); a
    coroutine is wrapped in a task that :func:`race` owns: once one wait is done, every
    wrapper still pending is cancelled, and so are all of them if the race itself is.
    """
    futures = tuple(asyncio.ensure_future(w) for w in waits)
    made = [f for f, w in zip(futures, waits, strict=True) if f is not w]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in made:
            future.cancel()
    return futures


async def settle(*waits: Awaitable[T]) -> list[T | BaseException]:
    """Wait until every one of ``waits`` has ended; return each result or exception.

    ``asyncio.gather(..., return_exceptions=True)`` with an owner: a coroutine runs in a
    task :func:`settle` owns. If :func:`settle` is cancelled, every wait is cancelled (a
    future passed in too, as ``gather`` does) and awaited before the cancellation goes
    on. Not a TaskGroup: CPython 3.11.2's leaves a stray cancellation on
    its parent when a child fails while the parent waits in ``__aexit__``.
    """
    owner = TaskOwner("settle")
    futures: list[asyncio.Future[T]] = [
        w if isinstance(w, asyncio.Future) else owner.start(w, report=False) for w in waits
    ]
    try:
        if futures:
            await asyncio.wait(futures)
    except asyncio.CancelledError:
        for future in futures:
            future.cancel()
        await asyncio.wait(futures)
        raise
    return [_outcome(f) for f in futures]


async def _awaited(wait: Awaitable[T]) -> T:
    return await wait


def _outcome(future: asyncio.Future[Any]) -> Any:
    if future.cancelled():
        return asyncio.CancelledError()
    exc = future.exception()
    return exc if exc is not None else future.result()


def start_node(node: Node, *, name: str | None = None) -> asyncio.Task[None]:
    """Run ``node`` in a task of its own, named ``name`` (else for the node); the caller
    awaits it once it stops."""
    return asyncio.get_running_loop().create_task(node.run(), name=name or node.name)


async def spawn_node(node: Node, *, name: str | None = None) -> asyncio.Task[None]:
    """:func:`start_node`, then wait until ``node`` has started or its task has ended.

    The caller tells which from ``task.done()``; a task that ended holds the reason. If
    the caller is cancelled (or the wait fails) meanwhile, the node is stopped (its task
    cancelled and awaited) before that goes on: nothing is left without an owner.
    """
    task = start_node(node, name=name)
    try:
        await race(task, node.started.wait())
    except BaseException:
        task.cancel()
        # Awaited once more even if cancelled again, so the node's teardown is not orphaned.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task})
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the caller goes on with its own reason
        raise
    return task


class TaskOwner:
    """A set of tasks owned as one: cancelled together by :meth:`cancel` / :meth:`close`.

    A task that ends with an exception is reported once, through ``report`` or else the
    log, unless it was started with ``report=False``: its caller reads the result, or lets
    a failure go on purpose.
    After :meth:`cancel` nothing more can be started.
    """

    def __init__(
        self, name: str, *, report: Callable[[str, BaseException], None] | None = None
    ) -> None:
        self.name = name
        self._report = report
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def start(
        self, wait: Awaitable[T], *, name: str | None = None, report: bool = True
    ) -> asyncio.Task[T]:
        """Start ``wait`` (a coroutine, or any awaitable) as a task held until it ends.

        Raises:
            RuntimeError: the owner was cancelled or closed.
        """
        coro = wait if isinstance(wait, Coroutine) else _awaited(wait)
        if self.closed:
            coro.close()
            raise RuntimeError(f"task owner {self.name!r} is closed")
        label = f"{self.name}/{name}" if name is not None else self.name
        task = asyncio.get_running_loop().create_task(coro, name=label)
        self._tasks.add(task)
        task.add_done_callback(self._ended if report else self._read)
        return task

    def _read(self, task: asyncio.Task[Any]) -> None:
        """A task whose caller reads its result: retrieved here, so a failure it lets go
        (as ``gather(..., return_exceptions=True)`` did) is not logged at collection."""
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if self._report is not None:
            self._report(task.get_name(), exc)
        else:
            _log.error("task %s failed", task.get_name(), exc_info=exc)

    def cancel(self) -> None:
        """Cancel every task held (before any await, so a second cancel cannot skip it)."""
        self.closed = True
        for task in self._tasks:
            task.cancel()

    async def join(self) -> None:
        """Wait until every task held has ended (none is cancelled)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self) -> None:
        """Cancel every task held and wait until they have all ended."""
        self.cancel()
        await self.join()
