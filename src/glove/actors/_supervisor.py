"""OTP-style supervisors: restart strategies, restart intensity, ordered teardown.

* ``one_for_one``: only the failed child is restarted.
* ``one_for_all``: every child is stopped (reverse start order) and all are restarted.
* ``rest_for_one``: the failed child and those started after it are restarted.

A ``permanent`` child is restarted whenever it exits; a ``temporary`` child never is (it is
removed and its exit recorded). More than ``intensity`` restarts within ``period`` seconds
makes the supervisor give up: it tears its remaining children down in reverse start order
and fails with :class:`ChildFailed`, escalating to its own parent. ``intensity=0`` is the
one-strike rule: the first failure tears the whole tree down.

A child being torn down gets its ``shutdown_grace``; a child still running after that is
force-killed (:meth:`Actor.force_kill`) and recorded as stuck, and teardown moves on, so a
wedged child cannot hold its siblings or its parent hostage.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from glove.actors._actor import Actor, ActorState
from glove.actors.errors import ChildFailed

_log = logging.getLogger(__name__)

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
Restart = Literal["permanent", "temporary"]

DEFAULT_SHUTDOWN_GRACE_S: Final = 5.0
MAX_EXIT_RECORDS: Final = 16


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """How to start a child and what to do when it exits.

    ``start`` builds a fresh node each time (state is never reused across restarts).
    A ``significant`` child's exit ends its supervisor (OTP's ``auto_shutdown``): normally
    when the child exited normally (it stopped, or was cancelled), with
    :class:`ChildFailed` when it failed; it is never restarted.
    """

    name: str
    start: Callable[[], Actor | Supervisor]
    restart: Restart = "permanent"
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE_S
    significant: bool = False


@dataclass(frozen=True, slots=True)
class ExitRecord:
    """One recorded child exit: wall time, child name, reason (``None`` is a normal exit)."""

    at: float
    child: str
    reason: str | None


class Supervisor:
    """A node that starts, watches and restarts its children."""

    def __init__(
        self,
        name: str,
        children: list[ChildSpec] | None = None,
        *,
        strategy: Strategy = "one_for_all",
        intensity: int = 0,
        period: float = 5.0,
    ) -> None:
        if intensity < 0 or period <= 0:
            raise ValueError("restart intensity must be >= 0 and period > 0")
        self.name = name
        self.strategy: Strategy = strategy
        self.intensity = intensity
        self.period = period
        self.state: ActorState = "new"
        self.exit_reason: BaseException | None = None
        self.started = asyncio.Event()
        self.restarts: Counter[str] = Counter()
        self.exits: deque[ExitRecord] = deque(maxlen=MAX_EXIT_RECORDS)
        self._specs: dict[str, ChildSpec] = {}
        self._order: list[str] = []
        self._nodes: dict[str, Actor | Supervisor] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._recent: list[float] = []
        self._events: asyncio.Queue[tuple[str, asyncio.Task[None]]] = asyncio.Queue()
        self._sup_main: asyncio.Task[None] | None = None
        for spec in children or []:
            self._add_spec(spec)

    # -- children -------------------------------------------------------------------------------

    def _add_spec(self, spec: ChildSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"supervisor {self.name!r} already has a child {spec.name!r}")
        self._specs[spec.name] = spec
        self._order.append(spec.name)

    def child(self, name: str) -> Actor | Supervisor:
        """Return the live node of child ``name``.

        Raises:
            KeyError: no such child.
        """
        return self._nodes[name]

    def children(self) -> list[tuple[str, Actor | Supervisor, bool]]:
        """``(name, node, alive)`` for each child with a node, in start order."""
        return [(n, self._nodes[n], n in self._tasks) for n in self._order if n in self._nodes]

    def child_task(self, name: str) -> asyncio.Task[None] | None:
        """The task running child ``name``, while it runs (None once it has exited)."""
        return self._tasks.get(name)

    def start_child(self, spec: ChildSpec) -> Actor | Supervisor:
        """Add and start a child dynamically (after the ones already there).

        Raises:
            ValueError: a child of that name exists.
            RuntimeError: the supervisor is not running.
        """
        if self.state != "running":
            raise RuntimeError(f"supervisor {self.name!r} is {self.state}, cannot start children")
        self._add_spec(spec)
        return self._start(spec)

    async def terminate_child(self, name: str) -> None:
        """Stop child ``name`` within its grace and forget it (no restart)."""
        if name in self._specs:
            await self._stop([name])
            self._forget(name)

    def _forget(self, name: str) -> None:
        self._specs.pop(name, None)
        self._nodes.pop(name, None)
        if name in self._order:
            self._order.remove(name)

    def watch(self, name: str, on_exit: Callable[[BaseException | None], None]) -> None:
        """Call ``on_exit`` with child ``name``'s exit reason once it exits (None: it
        exited normally, or was cancelled), from a loop callback: it must not block.

        Raises:
            KeyError: the child is not running.
        """
        task = self._tasks[name]

        def exited(done: asyncio.Task[None]) -> None:
            on_exit(None if done.cancelled() else done.exception())

        task.add_done_callback(exited)

    def _start(self, spec: ChildSpec) -> Actor | Supervisor:
        node = spec.start()
        self._nodes[spec.name] = node
        task = asyncio.get_running_loop().create_task(node.run(), name=f"{self.name}/{spec.name}")
        self._tasks[spec.name] = task
        task.add_done_callback(functools.partial(self._on_child_done, spec.name))
        return node

    async def _start_in_order(self, names: list[str]) -> None:
        """Start ``names`` one after another: each has finished starting (its ``on_start``
        returned, or a supervisor started its own children) before the next is built, so a
        later sibling may rely on an earlier one's state (OTP's ``init`` order). A child that
        dies while starting, or an earlier one dying while a later one starts (which may be
        waiting on it), stops the sequence; its exit is handled as any exit is (a restart
        also starts the siblings that never started)."""
        for name in names:
            node = self._start(self._specs[name])
            waiter = asyncio.ensure_future(node.started.wait())
            try:
                # Any child's exit (this one, or an earlier one dying while a later one waits
                # on it) ends the sequence: the exit is then handled by the strategy.
                await asyncio.wait(
                    {waiter, *self._tasks.values()}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                waiter.cancel()
            if any(task.done() for task in self._tasks.values()):
                return

    def _on_child_done(self, name: str, task: asyncio.Task[None]) -> None:
        self._events.put_nowait((name, task))

    # -- life -----------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the supervisor to stop: its children are torn down in reverse start order.

        A no-op once teardown has begun (after a failure or an earlier stop), so a second
        request cannot cut the first teardown short.
        """
        if self.state == "running" and self._sup_main is not None and not self._sup_main.done():
            self._sup_main.cancel()

    def force_kill(self) -> None:
        """Force-kill every live descendant (teardown overran its grace)."""
        for name in reversed(self._order):
            if name in self._tasks:
                self._nodes[name].force_kill()

    async def run(self) -> None:
        """Start the children in order, then supervise them until failure or stop.

        Raises:
            ChildFailed: restart intensity was exceeded.
        """
        self._sup_main = asyncio.current_task()
        self.state = "running"
        try:
            await self._start_in_order(list(self._order))
            self.started.set()
            while True:
                name, task = await self._events.get()
                if self._tasks.get(name) is not task:
                    continue  # we stopped it ourselves: not an exit to react to
                del self._tasks[name]
                if await self._child_exited(name, task):
                    return  # a significant child ended normally: so does this supervisor
        except asyncio.CancelledError:
            self.state = "stopping"
            raise
        except BaseException as exc:
            self.exit_reason = exc
            self.state = "crashed"
            raise
        finally:
            await self._stop(list(self._order))
            if self.state != "crashed":
                self.state = "stopped"

    async def _child_exited(self, name: str, task: asyncio.Task[None]) -> bool:
        """React to a child's exit; True when this supervisor ends normally with it."""
        reason: BaseException | None = (
            asyncio.CancelledError("cancelled") if task.cancelled() else task.exception()
        )
        # A child stopped by a cancel (a session tree's stop, its own end) exited normally:
        # the record says so rather than showing ``CancelledError`` as if it had failed.
        shown = None if reason is None or task.cancelled() else repr(reason)
        self.exits.append(ExitRecord(time.time(), name, shown))
        spec = self._specs[name]
        if spec.significant:
            if shown is None:
                return True
            raise ChildFailed(f"{self.name}/{name}", reason)
        if spec.restart == "temporary":
            self._forget(name)
            return False
        now = time.monotonic()
        self._recent = [t for t in self._recent if now - t < self.period]
        self._recent.append(now)
        if len(self._recent) > self.intensity:
            raise ChildFailed(f"{self.name}/{name}", reason)
        index = self._order.index(name)
        hit = {
            "one_for_one": [name],
            "one_for_all": list(self._order),
            "rest_for_one": self._order[index:],
        }[self.strategy]
        await self._stop(hit)
        for child in hit:
            self.restarts[child] += 1
        # The hit children, and any that never started because this one died starting.
        await self._start_in_order([n for n in self._order if n not in self._tasks])
        return False

    async def _stop(self, names: list[str]) -> None:
        """Stop the named children in reverse start order, each within its grace.

        A cancellation arriving mid-teardown (the parent giving up on us) does not abandon
        the remaining children: the child being waited for is force-killed, the rest are
        still cancelled and waited for, and the cancellation is re-raised at the end.
        """
        interrupted = False
        for name in reversed(self._order):
            if name not in names or name not in self._tasks:
                continue
            task = self._tasks.pop(name)
            task.cancel()
            grace = self._specs[name].shutdown_grace
            try:
                done, _ = await asyncio.wait({task}, timeout=grace)
            except asyncio.CancelledError:
                interrupted = True
                done = {task} if task.done() else set()
            if not done:
                _log.error("child %s/%s still running after %.1fs grace", self.name, name, grace)
                self.exits.append(ExitRecord(time.time(), name, f"stuck after {grace}s grace"))
                self._nodes[name].force_kill()
        if interrupted:
            raise asyncio.CancelledError
