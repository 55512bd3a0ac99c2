"""Owned tasks: race, settle, start_node / spawn_node and TaskOwner leave nothing behind."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from glove.actors import Actor, TaskOwner, race, settle, spawn_node, start_node
from tests.actors._helpers import Worker


def _ours() -> set[asyncio.Task[object]]:
    """Every task of the loop but the test's own."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


async def _settled() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_race_returns_when_the_first_completes_and_cancels_its_own_wrappers() -> None:
    fast, slow = asyncio.Event(), asyncio.Event()
    before = _ours()
    fast.set()
    first, second = await race(fast.wait(), slow.wait())
    assert first.done()
    assert not first.cancelled()
    await _settled()
    assert second.cancelled()
    assert _ours() == before  # no wrapper left running


async def test_race_never_cancels_a_future_it_was_given() -> None:
    given: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()
    done.set()
    returned, _ = await race(given, done.wait())
    assert returned is given
    assert not given.done()
    given.set_result(1)


async def test_a_cancelled_race_cancels_every_wrapper_it_made() -> None:
    before = _ours()
    waiter = asyncio.get_running_loop().create_task(race(asyncio.Event().wait(), asyncio.sleep(60)))
    await _settled()
    assert len(_ours()) == len(before) + 3  # the race and its two wrappers
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await _settled()
    assert _ours() == before


async def test_settle_returns_each_result_or_exception_in_order() -> None:
    async def fails() -> int:
        raise ValueError("no")

    async def gives(n: int) -> int:
        await asyncio.sleep(0)
        return n

    results = await settle(gives(1), fails(), gives(3))
    assert results[0] == 1
    assert isinstance(results[1], ValueError)
    assert results[2] == 3


async def test_a_cancelled_settle_cancels_and_awaits_every_wait() -> None:
    ended: list[str] = []

    async def hangs(name: str) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            ended.append(name)

    given = asyncio.get_running_loop().create_task(hangs("given"))
    before = _ours()
    waiter = asyncio.get_running_loop().create_task(settle(hangs("own"), given))
    await _settled()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert sorted(ended) == ["given", "own"]  # both had ended before the cancel went on
    assert given.cancelled()
    assert _ours() <= before


async def test_spawn_node_returns_once_the_node_started() -> None:
    worker = Worker()
    task = await spawn_node(worker)
    assert worker.started.is_set()
    assert not task.done()
    assert task.get_name() == worker.name
    worker.stop()
    await asyncio.wait({task})


class _SlowToStart(Actor):
    """Starts only once ``go`` is set; records that its teardown ran."""

    def __init__(self) -> None:
        super().__init__("slow")
        self.go = asyncio.Event()
        self.stopped = False

    async def on_start(self) -> None:
        await self.go.wait()

    async def on_stop(self) -> None:
        self.stopped = True


async def test_a_cancelled_spawn_node_stops_the_node_it_started() -> None:
    node = _SlowToStart()
    before = _ours()
    waiter = asyncio.get_running_loop().create_task(spawn_node(node))
    await _settled()
    assert len(_ours()) == len(before) + 3  # the spawn, the node, race's wrapper
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert node.stopped  # the node's teardown ran before the cancel went on
    assert _ours() == before


class _FailsToStart(Actor):
    async def on_start(self) -> None:
        raise RuntimeError("no start")


async def test_spawn_node_returns_the_ended_task_when_the_node_cannot_start() -> None:
    node = _FailsToStart("fails")
    task = await spawn_node(node, name="named")
    await asyncio.wait({task})
    assert task.get_name() == "named"
    assert not node.started.is_set()
    assert task.cancelled() or task.exception() is not None


async def test_start_node_names_the_task_for_the_node() -> None:
    worker = Worker()
    task = start_node(worker)
    assert task.get_name() == worker.name
    await worker.started.wait()
    worker.stop()
    await asyncio.wait({task})


async def test_an_owner_cancels_every_task_when_it_closes() -> None:
    owner = TaskOwner("t")
    before = _ours()
    tasks = [owner.start(asyncio.sleep(60), name=str(i)) for i in range(3)]
    assert len(owner) == 3
    assert tasks[0].get_name() == "t/0"
    await owner.close()
    assert all(t.cancelled() for t in tasks)
    assert len(owner) == 0
    assert _ours() == before
    with pytest.raises(RuntimeError, match="closed"):
        owner.start(asyncio.sleep(0))


async def test_an_owner_reports_a_task_failure_once() -> None:
    reported: list[tuple[str, BaseException]] = []
    owner = TaskOwner("t", report=lambda name, exc: reported.append((name, exc)))

    async def fails() -> None:
        raise ValueError("boom")

    owner.start(fails(), name="f")
    owner.start(asyncio.sleep(0), name="ok")
    await owner.join()
    assert [(name, str(exc)) for name, exc in reported] == [("t/f", "boom")]


async def test_an_owner_without_report_logs_the_failure(caplog: pytest.LogCaptureFixture) -> None:
    owner = TaskOwner("t")

    async def fails() -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="glove.actors"):
        owner.start(fails(), name="f")
        await owner.join()
    assert any("t/f" in r.getMessage() and r.exc_info for r in caplog.records)


async def test_report_false_leaves_the_failure_to_the_caller_and_retrieves_it() -> None:
    unretrieved: list[object] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))
    try:
        owner = TaskOwner("t", report=lambda *_: pytest.fail("reported"))

        async def fails() -> None:
            raise ValueError("boom")

        task = owner.start(fails(), report=False)
        await owner.join()
        assert isinstance(task.exception(), ValueError)
        del task
        gc.collect()
        await _settled()
    finally:
        loop.set_exception_handler(None)
    assert unretrieved == []


async def test_an_owner_takes_any_awaitable() -> None:
    owner = TaskOwner("t")
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = owner.start(future, report=False)
    future.set_result(7)
    assert await task == 7
