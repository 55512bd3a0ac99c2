"""The idle fast path: an ask handled from the asker's task keeps every actor rule."""

from __future__ import annotations

import asyncio
import contextvars

import msgspec
import pytest

from glove.actors import (
    NOT_NOW,
    ActorDead,
    ChildFailed,
    ChildSpec,
    DeadlineExceeded,
    Deferred,
    Supervisor,
    current_deadline,
    running,
)
from tests.actors._helpers import Record, Sleep, Worker, until


class Now(msgspec.Struct, frozen=True):
    """Handled by ``handle_now`` when the actor is idle; replies with the task it ran in."""

    value: str


class NowBoom(msgspec.Struct, frozen=True):
    """Make ``handle_now`` raise."""


class NowLater(msgspec.Struct, frozen=True):
    """Reply from ``handle_now`` with a deferred future the test resolves."""


class NowTellSelf(msgspec.Struct, frozen=True):
    """From ``handle_now``, tell the actor ``Record(value)`` and record what it saw."""

    value: str


class FastWorker(Worker):
    """A worker whose ``Now`` messages may take the fast path."""

    def __init__(self, name: str = "fast") -> None:
        super().__init__(name)
        self.tasks: list[tuple[str, asyncio.Task[object] | None]] = []
        self.seen_busy: list[object] = []
        self.overlap = 0
        self._in_handler = False
        self._sleeping = False

    def handle_now(self, msg: object) -> object:
        where = "mailbox" if self._in_handler else "now"
        if where == "now" and self._sleeping:
            self.overlap += 1  # a fast-path message while a mailbox one is being handled
        match msg:
            case Now(value):
                self.tasks.append((where, asyncio.current_task()))
                self.applied.append(value)
                return value
            case NowBoom():
                raise ValueError("fast path exploded")
            case NowLater():
                self.tasks.append((where, asyncio.current_task()))
                fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
                self.pending.append(fut)
                return Deferred(fut)
            case NowTellSelf(value):
                self.seen_busy.append(self.busy)
                self.tell(Record(value))
                self.applied.append(f"now-{value}")
                return value
        return NOT_NOW

    async def handle(self, msg: object) -> object:
        if isinstance(msg, Now | NowLater | NowTellSelf | NowBoom):
            self._in_handler = True
            try:
                reply = self.handle_now(msg)
            finally:
                self._in_handler = False
            assert reply is not NOT_NOW
            return reply
        self._sleeping = isinstance(msg, Sleep)
        try:
            return await super().handle(msg)
        finally:
            self._sleeping = False


async def test_an_idle_actor_handles_the_ask_in_the_askers_task() -> None:
    """Idle: the handler runs in the caller's own task, no mailbox; the reply is the same."""
    async with running(FastWorker()) as w:
        assert await w.ask(Now("a")) == "a"
        assert w.tasks == [("now", asyncio.current_task())]
        assert w.handled == 1
        assert w.mailbox_depth == 0
        assert w.busy is None


async def test_a_second_ask_in_the_same_loop_iteration_takes_the_mailbox() -> None:
    """Asks that arrive together still queue, so the actor can batch their work."""
    async with running(FastWorker()) as w:
        replies = await asyncio.gather(*(w.ask(Now(str(i))) for i in range(4)))
        assert replies == ["0", "1", "2", "3"]
        assert [where for where, _ in w.tasks] == ["now", "mailbox", "mailbox", "mailbox"]
        assert w.applied == ["0", "1", "2", "3"]
        await asyncio.sleep(0)
        assert await w.ask(Now("later")) == "later"
        assert w.tasks[-1][0] == "now"


async def test_no_fast_path_while_a_mailbox_message_is_being_handled() -> None:
    """One message at a time: an ask while a handler awaits waits in the mailbox."""
    async with running(FastWorker()) as w:
        sleeping = asyncio.ensure_future(w.ask(Sleep(0.05)))
        await until(lambda: w.busy is not None)
        assert await w.ask(Now("queued")) == "queued"
        assert sleeping.done()
        assert w.tasks[0][0] == "mailbox"
        assert w.overlap == 0


async def test_a_fast_path_message_is_busy_and_not_reentrant() -> None:
    """While ``handle_now`` runs the actor is busy; what it sends itself is handled after."""
    async with running(FastWorker()) as w:
        assert await w.ask(NowTellSelf("x")) == "x"
        busy = w.seen_busy[0]
        assert isinstance(busy, tuple)
        assert busy[0] == "NowTellSelf"
        await until(lambda: "x" in w.applied)
        assert w.applied == ["now-x", "x"]


async def test_a_stale_deadline_drops_the_message_unhandled() -> None:
    """A message whose deadline has passed is never handled, on the fast path too."""
    async with running(FastWorker()) as w:
        with pytest.raises(DeadlineExceeded):
            await w.ask(Now("stale"), timeout=-1)
        assert w.applied == []
        assert w.dropped_stale == 1
        assert await w.ask(Now("fresh")) == "fresh"


async def test_a_deferred_reply_is_awaited_under_the_deadline_and_cancelled_after() -> None:
    """The asker waits for the deferred work within its deadline; giving up cancels it."""
    async with running(FastWorker()) as w:
        with pytest.raises(DeadlineExceeded):
            await w.ask(NowLater(), timeout=0.05)
        assert [where for where, _ in w.tasks] == ["now"]
        assert w.pending[0].cancelled()
        waiting = asyncio.ensure_future(w.ask(NowLater()))
        await until(lambda: len(w.pending) == 2)
        w.pending[1].set_result("done")
        assert await waiting == "done"
        assert w.state == "running"


async def test_an_exception_in_the_fast_path_crashes_the_actor() -> None:
    """The asker gets the exception, the actor crashes with it, later asks get ActorDead."""
    async with running(FastWorker()) as w:
        with pytest.raises(ValueError, match="fast path exploded"):
            await w.ask(NowBoom())
        with pytest.raises(ActorDead):
            await w.ask(Now("after"))
        await until(lambda: w.state == "crashed")
        assert isinstance(w.exit_reason, ValueError)
        assert w.applied == []


async def test_a_fast_path_crash_is_a_strike_to_the_supervisor() -> None:
    """The supervisor sees the crash exactly as one from the mailbox: one strike."""
    sup = Supervisor("sup", [ChildSpec("w", FastWorker)], strategy="one_for_all", intensity=0)
    task = asyncio.ensure_future(sup.run())
    await sup.started.wait()
    with pytest.raises(ValueError, match="fast path exploded"):
        await sup.child("w").ask(NowBoom())
    with pytest.raises(ChildFailed) as info:
        async with asyncio.timeout(5):
            await task
    assert info.value.path == "sup/w"
    assert isinstance(info.value.cause, ValueError)


_WHO: contextvars.ContextVar[str] = contextvars.ContextVar("test_fast_path_who", default="unset")


class Context(msgspec.Struct, frozen=True):
    """Reply with what the handler sees: ``_WHO`` and its deadline."""


class ContextWorker(Worker):
    """Sets ``_WHO`` in its own context as it starts; answers :class:`Context` either way."""

    def __init__(self) -> None:
        super().__init__("context")
        self.where: list[str] = []

    async def on_start(self) -> None:
        _WHO.set("actor")

    def handle_now(self, msg: object) -> object:
        if isinstance(msg, Context):
            self.where.append("now")
            return (_WHO.get(), current_deadline())
        return NOT_NOW

    async def handle(self, msg: object) -> object:
        if isinstance(msg, Context):
            self.where.append("mailbox")
            return (_WHO.get(), current_deadline())
        return await super().handle(msg)


async def test_the_fast_path_runs_in_the_actors_context_with_the_messages_deadline() -> None:
    """``handle_now`` sees what a mailbox delivery sees: the actor's own context variables
    and the message's deadline, not the asker's variables."""
    async with running(ContextWorker()) as w:
        _WHO.set("asker")
        loop = asyncio.get_running_loop()
        before = loop.time()
        fast = await w.ask(Context(), timeout=30)
        queued = await asyncio.gather(w.ask(Context(), timeout=30), w.ask(Context(), timeout=30))
        assert w.where == ["now", "now", "mailbox"]
        for who, deadline in (fast, *queued):
            assert who == "actor"
            assert deadline is not None
            assert before + 30 <= deadline <= loop.time() + 30
        assert _WHO.get() == "asker"  # the asker's own context is untouched
        assert current_deadline() is None
