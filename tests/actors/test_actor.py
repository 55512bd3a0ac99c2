"""The rules every actor obeys: deadlines, crashes, bounded mailboxes, owned work."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from glove.actors import (
    Actor,
    ActorDead,
    Busy,
    DeadlineExceeded,
    DeadlineOverrun,
    current_deadline,
    running,
)
from tests.actors._helpers import AskOther, Boom, Later, Record, Sleep, Worker, until


async def test_ask_returns_the_handlers_reply() -> None:
    """An ask gets exactly what the handler returned."""
    async with running(Worker()) as w:
        assert await w.ask(Record("a")) == "a"
        assert w.applied == ["a"]


async def test_stale_message_is_never_applied() -> None:
    """A message whose deadline passes while queued is dropped, never executed late."""
    async with running(Worker()) as w:
        w.tell(Sleep(0.2))
        with pytest.raises(DeadlineExceeded):
            await w.ask(Record("grant"), timeout=0.05)
        w.tell(Record("told-stale"), timeout=0.05)
        assert await w.ask(Record("sync"), timeout=2) == "sync"
        assert w.applied == ["sync"]
        assert "grant" not in w.applied
        assert w.dropped_stale + w.handled >= 2


class _Gated(Actor):
    """Handles its first message by waiting for ``gate``; then replies with the message."""

    def __init__(self, gate: asyncio.Future[None]) -> None:
        super().__init__("gated")
        self.gate = gate
        self.applied: list[object] = []

    async def handle(self, msg: object) -> object:
        if msg == "hold":
            await self.gate
            return None
        self.applied.append(msg)
        return msg


async def test_a_message_dropped_as_stale_as_its_askers_timer_fires_is_deadline_exceeded() -> None:
    """The drop and the asker's own timeout in one loop step: the asker still gets the
    typed ``DeadlineExceeded``, never a bare ``TimeoutError`` (its reply was already set)."""
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()

    def block_then_open() -> None:
        # Past the ask's deadline with the loop blocked; the gate's wake-up of the actor is
        # queued before the asker's timer, which the next step finds due: the actor drops
        # the ask as stale (its reply set), then the timer cancels the asker.
        time.sleep(0.1)
        gate.set_result(None)

    async with running(_Gated(gate)) as actor:
        actor.tell("hold")
        loop.call_later(0.01, block_then_open)
        with pytest.raises(DeadlineExceeded):
            await actor.ask("late", timeout=0.05)
        assert actor.applied == []
        assert actor.dropped_stale == 1


async def test_handler_exception_crashes_actor_and_fails_queued_askers() -> None:
    """The current asker gets the exception, queued askers get ActorDead, state is crashed."""
    async with running(Worker()) as w:
        w.tell(Sleep(0.05))
        current = asyncio.ensure_future(w.ask(Boom()))
        queued = asyncio.ensure_future(w.ask(Record("after")))
        with pytest.raises(ValueError, match="exploded"):
            await current
        with pytest.raises(ActorDead):
            await queued
        assert w.state == "crashed"
        assert isinstance(w.exit_reason, ValueError)
        assert w.applied == []
        with pytest.raises(ActorDead):
            w.tell(Record("late"))


async def test_told_message_that_raises_crashes_the_actor_too() -> None:
    """A tell is not safer than an ask: an exception from its handler kills the actor."""
    async with running(Worker()) as w:
        w.tell(Boom())
        await until(lambda: w.state == "crashed")
        assert isinstance(w.exit_reason, ValueError)


async def test_handler_overrunning_its_deadline_crashes_the_actor() -> None:
    """A handler still running at its message's deadline is cancelled and the actor crashes."""
    async with running(Worker()) as w:
        w.tell(Sleep(5.0), timeout=0.05)
        await until(lambda: w.state == "crashed")
        assert isinstance(w.exit_reason, DeadlineOverrun)


async def test_nested_ask_inherits_the_smaller_deadline() -> None:
    """A 0.1 s outer budget caps an inner ask that asked for 60 s."""
    async with running(Worker("inner")) as inner, running(Worker("outer", other=inner)) as outer:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TimeoutError):
            await outer.ask(AskOther(seconds=30.0, timeout=60.0), timeout=0.1)
        # Far short of the inner handler's 30 s (however loaded the machine).
        assert loop.time() - start < 15.0
        # The inner handler ran under the outer deadline, so it overran and crashed: under
        # its own 60 s deadline its 30 s sleep would have ended normally.
        await until(lambda: inner.state == "crashed")
        assert isinstance(inner.exit_reason, DeadlineOverrun)


async def test_current_deadline_is_visible_inside_a_handler_only() -> None:
    """Handlers see their message's deadline; code outside a handler sees none."""
    seen: list[float | None] = []

    class Peek(Actor):
        async def handle(self, msg: object) -> object:
            seen.append(current_deadline())
            return None

    assert current_deadline() is None
    async with running(Peek("peek")) as p:
        loop = asyncio.get_running_loop()
        before = loop.time()
        await p.ask("x", timeout=3.0)
        assert seen[0] is not None
        assert before + 2.9 < seen[0] <= loop.time() + 3.0


async def test_full_mailbox_fails_fast_with_busy() -> None:
    """With the mailbox full, tell and ask raise Busy at once instead of queueing."""
    async with running(Worker(mailbox_size=2)) as w:
        w.tell(Sleep(0.3))
        await until(lambda: w.busy is not None)
        w.tell(Record("1"))
        w.tell(Record("2"))
        with pytest.raises(Busy):
            w.tell(Record("3"))
        with pytest.raises(Busy):
            await w.ask(Record("4"))
        assert w.mailbox_depth == 2


async def test_send_waits_for_space_instead_of_dropping() -> None:
    """Backpressure: send blocks until the mailbox has room, then the message is applied."""
    async with running(Worker(mailbox_size=1)) as w:
        w.tell(Sleep(0.1))
        await until(lambda: w.busy is not None)
        w.tell(Record("first"))
        await w.send(Record("second"), timeout=2.0)
        assert await w.ask(Record("sync"), wait=True, timeout=2.0) == "sync"
        assert w.applied == ["first", "second", "sync"]


async def test_send_gives_up_at_its_deadline() -> None:
    """A sender waiting for space gets DeadlineExceeded if none frees up in time."""
    async with running(Worker(mailbox_size=1)) as w:
        w.tell(Sleep(0.5))
        await until(lambda: w.busy is not None)
        w.tell(Record("fills"))
        with pytest.raises(DeadlineExceeded):
            await w.send(Record("never"), timeout=0.05)


async def test_run_blocking_uses_one_owned_thread_and_failures_crash() -> None:
    """Blocking work runs on the actor's single executor thread; its exception crashes it."""
    threads: set[str] = set()

    def blocking(fail: bool) -> str:
        threads.add(threading.current_thread().name)
        if fail:
            raise OSError(5, "EIO from fsync")
        return "ok"

    class Syncer(Actor):
        async def handle(self, msg: object) -> object:
            return await self.run_blocking(blocking, bool(msg))

    async with running(Syncer("syncer")) as s:
        assert await s.ask(False) == "ok"
        assert await s.ask(False) == "ok"
        with pytest.raises(OSError, match="EIO"):
            await s.ask(True)
        assert s.state == "crashed"
    assert len(threads) == 1
    assert next(iter(threads)).startswith("syncer")


async def test_owned_task_failure_crashes_the_actor() -> None:
    """A background task that belongs to an actor crashes it when it raises."""

    class Reader(Actor):
        async def on_start(self) -> None:
            self.spawn_task(self._read(), name="reader")

        async def _read(self) -> None:
            await asyncio.sleep(0.02)
            raise ConnectionResetError("upstream went away")

    async with running(Reader("reader")) as r:
        await until(lambda: r.state == "crashed")
        assert isinstance(r.exit_reason, ConnectionResetError)


async def test_deferred_reply_frees_the_actor_and_cancels_when_asker_gives_up() -> None:
    """A Deferred lets the actor take the next message; an abandoned one is cancelled."""
    async with running(Worker()) as w:
        first = asyncio.ensure_future(w.ask(Later(), timeout=2.0))
        assert await w.ask(Record("meanwhile")) == "meanwhile"
        w.pending[0].set_result("done later")
        assert await first == "done later"
        with pytest.raises(DeadlineExceeded):
            await w.ask(Later(), timeout=0.05)
        await until(w.pending[1].cancelled)
        assert w.state == "running"


async def test_stop_runs_on_stop_and_fails_queued_asks() -> None:
    """A normal stop runs on_stop, leaves state stopped and fails what was queued."""
    log: list[str] = []
    w = Worker(log=log)
    async with running(w):
        w.tell(Sleep(0.2))
        queued = asyncio.ensure_future(w.ask(Record("x")))
        await until(lambda: w.busy is not None)
    assert w.state == "stopped"
    assert log == ["worker"]
    with pytest.raises(ActorDead):
        await queued
