"""The actor: private state, a bounded mailbox, one message at a time.

Rules (DESIGN.md §2):

* A message carries an absolute deadline. A message whose deadline has passed when it
  reaches the head of the mailbox is dropped, never executed; a message whose asker has
  already given up is dropped too.
* Any exception out of a handler crashes the actor: the current asker gets the exception,
  every queued asker gets :class:`ActorDead`, the supervisor gets the exit reason (the
  exception the actor's task ends with). There is no retry and no "return the error and
  carry on".
* A handler that runs past its message's deadline is cancelled and the actor crashes with
  :class:`DeadlineOverrun`: a half-applied handler leaves state nobody can trust.
* Mailboxes are bounded: ``tell``/``ask`` raise :class:`Busy` at once when full, ``send`` and
  ``ask(wait=True)`` wait for space until the deadline (backpressure).
* Blocking work goes to the actor's own single-thread executor (``run_blocking``); background
  tasks belong to the actor (``spawn_task``) and crash it when they fail.

The idle fast path: an actor that overrides :meth:`Actor.handle_now` (a synchronous handler)
has an ask handled straight from the asker's task when it is idle (running, no message being
handled, mailbox empty, no fast-path message yet in this loop iteration): no mailbox, no
wake-up of the actor's task, no reply future. The rules hold as through the mailbox: one
message at a time (the handler is synchronous, and the actor is not idle while a mailbox
message is being handled), a stale deadline drops it, an exception crashes the actor (the
asker gets it, the supervisor gets the exit reason), a :class:`Deferred` is awaited under the
message's deadline and cancelled when the asker gives up. A second ask in the same loop
iteration takes the mailbox, so the work of asks that arrive together is still batched.
The handler sees what a mailbox delivery sees: the actor's own context variables (its run
task's, as ``on_start`` left them) with the message's deadline, never the asker's.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal, TypeVar

from glove.actors._deadline import (
    effective_deadline,
    fresh_context,
    reset_deadline,
    set_deadline,
)
from glove.actors._envelope import Deferred, Envelope
from glove.actors.errors import ActorDead, Busy, DeadlineExceeded, DeadlineOverrun

T = TypeVar("T")

DEFAULT_MAILBOX_SIZE: Final = 256
DEFAULT_TIMEOUT_S: Final = 5.0

ActorState = Literal["new", "starting", "running", "stopping", "stopped", "crashed"]
_DEAD_STATES: Final = frozenset({"stopping", "stopped", "crashed"})


class _NotNow:
    """The type of :data:`NOT_NOW` (a singleton)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_NOW"


NOT_NOW: Final = _NotNow()
"""What :meth:`Actor.handle_now` returns to send a message through the mailbox instead."""


class Actor:
    """Base class of every actor. Subclasses override :meth:`handle` and the hooks.

    The actor's life is the coroutine :meth:`run`, normally started by a
    :class:`~glove.actors.Supervisor` or by :func:`~glove.actors.running`.
    """

    def __init__(self, name: str, *, mailbox_size: int = DEFAULT_MAILBOX_SIZE) -> None:
        if mailbox_size <= 0:
            raise ValueError("an actor's mailbox must be bounded: mailbox_size > 0")
        self.name = name
        self.state: ActorState = "new"
        self.exit_reason: BaseException | None = None
        self.started = asyncio.Event()
        self.handled = 0
        self.dropped_stale = 0
        self._actor_mailbox: asyncio.Queue[Envelope] = asyncio.Queue(mailbox_size)
        self._actor_capacity = mailbox_size
        self._actor_busy: tuple[str, float] | None = None
        self._actor_executor: ThreadPoolExecutor | None = None
        self._actor_tasks: set[asyncio.Task[Any]] = set()
        self._actor_main: asyncio.Task[None] | None = None
        self._actor_crash: BaseException | None = None
        self._actor_fast = type(self).handle_now is not Actor.handle_now
        self._actor_turn = False  # a fast-path message was handled in this loop iteration
        #: The run task's context as ``on_start`` left it: ``handle_now`` runs in it.
        self._actor_context: contextvars.Context | None = None

    # -- hooks -----------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Acquire what the actor owns (fds, processes). An exception here crashes it."""

    async def on_stop(self) -> None:
        """Release what the actor owns. Always runs, after a crash too; keep it short."""

    async def handle(self, msg: object) -> object:
        """Handle one message and return the reply (or a :class:`Deferred`).

        Raises:
            Exception: any exception crashes the actor.
        """
        raise NotImplementedError(f"{type(self).__name__} does not handle {type(msg).__name__}")

    def handle_now(self, msg: object) -> object:
        """Handle one message synchronously, from the asker's task, if the actor is idle.

        Called instead of the mailbox only when nothing else is being handled; return the
        reply (or a :class:`Deferred`), or :data:`NOT_NOW` having changed nothing, to have
        the message queued and handled by :meth:`handle` as usual. The default declines
        everything.

        Raises:
            Exception: any exception crashes the actor, as out of :meth:`handle`.
        """
        return NOT_NOW

    def force_kill(self) -> None:
        """Last resort when teardown overran its grace: kill what the actor owns, now.

        Called synchronously by the supervisor; the default does nothing. Actors that own
        processes override it (``SIGKILL`` the process group, ``cgroup.kill``).
        """

    # -- sending -----------------------------------------------------------------------------

    def tell(self, msg: object, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Queue ``msg`` without waiting for a reply.

        Raises:
            Busy: the mailbox is full.
            ActorDead: the actor has stopped or crashed.
        """
        self._actor_put_nowait(Envelope(msg, effective_deadline(timeout)))

    async def send(self, msg: object, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Queue ``msg``, waiting for mailbox space until the deadline (backpressure).

        Raises:
            DeadlineExceeded: no space freed up before the deadline.
            ActorDead: the actor has stopped or crashed.
        """
        env = Envelope(msg, effective_deadline(timeout))
        await self._actor_put_wait(env)

    async def ask(
        self, msg: object, *, timeout: float = DEFAULT_TIMEOUT_S, wait: bool = False
    ) -> Any:
        """Send ``msg`` and await the reply under an absolute deadline.

        The deadline is ``now + timeout``, capped by the deadline of the message the caller
        is itself handling, if any.

        Raises:
            Busy: the mailbox is full and ``wait`` is false.
            DeadlineExceeded: no reply before the deadline (the message, if still queued,
                will be dropped, never executed).
            ActorDead: the actor died before handling the message.
            Exception: whatever the handler raised (the actor crashed).
        """
        loop = asyncio.get_running_loop()
        deadline = effective_deadline(timeout)
        if self._actor_fast and self._actor_idle():
            result = self._actor_now(msg, deadline, loop)
            if result is not NOT_NOW:
                if isinstance(result, Deferred):
                    return await self._actor_await_deferred(result.future, deadline, msg)
                return result
        env = Envelope(msg, deadline, loop.create_future())
        assert env.reply is not None
        if wait:
            await self._actor_put_wait(env)
        else:
            self._actor_put_nowait(env)
        try:
            async with asyncio.timeout_at(env.deadline):
                return await env.reply
        except TimeoutError as exc:
            if env.reply.done() and not env.reply.cancelled():
                # The reply was set before the timer cancelled this wait (in the same loop
                # step: a drop as stale, an answer just in time) or is itself a
                # TimeoutError the handler raised: it is the answer.
                return env.reply.result()
            raise DeadlineExceeded(self.name, env.msg_type) from exc

    def _actor_idle(self) -> bool:
        return (
            self.state == "running"
            and self._actor_busy is None
            and self._actor_crash is None
            and not self._actor_turn
            and self._actor_mailbox.empty()
        )

    def _actor_now(self, msg: object, deadline: float, loop: asyncio.AbstractEventLoop) -> object:
        """Handle ``msg`` with :meth:`handle_now`, under the actor's rules (see the module)."""
        msg_type = type(msg).__name__
        now = loop.time()
        if now >= deadline:
            self.dropped_stale += 1
            raise DeadlineExceeded(self.name, msg_type)
        self._actor_busy = (msg_type, now)
        context = self._actor_context
        assert context is not None  # set before the actor is running
        try:
            # A copy of the run task's context, entered only here: a synchronous handler
            # cannot come back into it.
            result = context.run(self._actor_now_in, msg, deadline)
        except BaseException as exc:
            self.crash(exc)
            raise
        finally:
            self._actor_busy = None
        if result is not NOT_NOW:
            self.handled += 1
            self._actor_turn = True
            loop.call_soon(self._actor_turn_over)
        return result

    def _actor_now_in(self, msg: object, deadline: float) -> object:
        token = set_deadline(deadline)
        try:
            return self.handle_now(msg)
        finally:
            reset_deadline(token)

    def _actor_turn_over(self) -> None:
        self._actor_turn = False

    async def _actor_await_deferred(
        self, future: asyncio.Future[Any], deadline: float, msg: object
    ) -> Any:
        if future.done():
            return future.result()
        try:
            # Awaited directly: an asker that gives up (deadline, cancellation) cancels the
            # future, which tells its owner, as a mailbox reply chained to it would.
            async with asyncio.timeout_at(deadline):
                return await future
        except TimeoutError as exc:
            if future.done() and not future.cancelled():
                # Set before the timer cancelled this wait, or a TimeoutError of the work
                # itself: it is the answer, as in :meth:`ask`.
                return future.result()
            raise DeadlineExceeded(self.name, type(msg).__name__) from exc

    def _actor_check_alive(self) -> None:
        if self.state in _DEAD_STATES:
            raise ActorDead(self.name, self.state)

    def _actor_put_nowait(self, env: Envelope) -> None:
        self._actor_check_alive()
        try:
            self._actor_mailbox.put_nowait(env)
        except asyncio.QueueFull:
            raise Busy(self.name, self._actor_capacity) from None

    async def _actor_put_wait(self, env: Envelope) -> None:
        self._actor_check_alive()
        try:
            async with asyncio.timeout_at(env.deadline):
                await self._actor_mailbox.put(env)
        except TimeoutError as exc:
            raise DeadlineExceeded(self.name, env.msg_type) from exc
        if self.state in _DEAD_STATES:
            # Died while we waited for space: nobody will ever drain the mailbox again.
            env.fail(ActorDead(self.name, self.state))

    # -- owned resources ------------------------------------------------------------------------

    @property
    def executor(self) -> ThreadPoolExecutor:
        """This actor's own single-thread executor (made on first use; shut down at stop)."""
        if self._actor_executor is None:
            self._actor_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        return self._actor_executor

    async def run_blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking ``fn`` in this actor's own single-thread executor.

        Calls are serialized in submission order. An exception propagates to the caller;
        raised out of a handler it crashes the actor like any other.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    def spawn_task(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """Start a background task owned by this actor.

        The task runs without any inherited message deadline, is cancelled when the actor
        stops, and crashes the actor if it raises.
        """
        task = asyncio.get_running_loop().create_task(
            coro, name=f"{self.name}/{name}", context=fresh_context()
        )
        self._actor_tasks.add(task)
        task.add_done_callback(self._actor_owned_task_done)
        return task

    def _actor_owned_task_done(self, task: asyncio.Task[Any]) -> None:
        self._actor_tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.crash(exc)

    def crash(self, exc: BaseException) -> None:
        """Crash the actor with ``exc`` as its exit reason (safe from callbacks)."""
        if self._actor_crash is None and self.state not in _DEAD_STATES:
            self._actor_crash = exc
            if self._actor_main is not None and not self._actor_main.done():
                self._actor_main.cancel()

    def stop(self) -> None:
        """Ask the actor to stop normally (cancels its run loop; ``on_stop`` runs).

        A no-op once the actor is stopping or crashed, so ``on_stop`` is not cut short.
        """
        if self.state in _DEAD_STATES:
            return
        if self._actor_main is not None and not self._actor_main.done():
            self._actor_main.cancel()

    # -- introspection --------------------------------------------------------------------------

    @property
    def mailbox_depth(self) -> int:
        """Messages waiting in the mailbox."""
        return self._actor_mailbox.qsize()

    @property
    def mailbox_capacity(self) -> int:
        """The mailbox bound."""
        return self._actor_capacity

    @property
    def busy(self) -> tuple[str, float] | None:
        """``(message type name, loop time it started)`` while a handler runs, else None."""
        return self._actor_busy

    # -- the run loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """The actor's life: start, handle messages one at a time, stop.

        Raises:
            Exception: the crash reason, for the supervisor.
        """
        self._actor_main = asyncio.current_task()
        loop = asyncio.get_running_loop()
        try:
            self.state = "starting"
            await self.on_start()
            self._actor_context = contextvars.copy_context()
            self.state = "running"
            self.started.set()
            while True:
                env = await self._actor_mailbox.get()
                if env.abandoned:
                    continue
                if loop.time() >= env.deadline:
                    self.dropped_stale += 1
                    env.fail(DeadlineExceeded(self.name, env.msg_type))
                    continue
                result = await self._actor_dispatch(env, loop)
                self.handled += 1
                env.resolve(result)
        except asyncio.CancelledError as exc:
            reason = self._actor_crash
            if reason is None:
                self.state = "stopping"
                raise
            self.exit_reason = reason
            self.state = "crashed"
            raise reason from exc
        except BaseException as exc:
            self.exit_reason = exc
            self.state = "crashed"
            raise
        finally:
            await self._actor_teardown()

    async def _actor_dispatch(self, env: Envelope, loop: asyncio.AbstractEventLoop) -> object:
        self._actor_busy = (env.msg_type, loop.time())
        token = set_deadline(env.deadline)
        try:
            timeout = asyncio.timeout_at(env.deadline)
            try:
                async with timeout:
                    return await self.handle(env.msg)
            except TimeoutError as exc:
                if timeout.expired():
                    raise DeadlineOverrun(self.name, env.msg_type) from exc
                raise
        except asyncio.CancelledError:
            env.fail(self._actor_crash or ActorDead(self.name, "stopped while handling it"))
            raise
        except Exception as exc:
            env.fail(exc)
            raise
        finally:
            reset_deadline(token)
            self._actor_busy = None

    async def _actor_teardown(self) -> None:
        if self.state not in ("crashed", "stopping"):
            self.state = "stopping"
        crashed = self.state == "crashed"
        while not self._actor_mailbox.empty():
            self._actor_mailbox.get_nowait().fail(ActorDead(self.name, self.state))
        for task in list(self._actor_tasks):
            task.cancel()
        if self._actor_tasks:
            await asyncio.gather(*self._actor_tasks, return_exceptions=True)
        try:
            await self.on_stop()
        finally:
            if self._actor_executor is not None:
                self._actor_executor.shutdown(wait=False, cancel_futures=True)
                self._actor_executor = None
            self.state = "crashed" if crashed else "stopped"
