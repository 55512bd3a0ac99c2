"""Supervision: strategies, intensity, escalation, ordered and bounded teardown."""

from __future__ import annotations

import asyncio

import pytest

from glove.actors import Actor, ChildFailed, ChildSpec, Supervisor, running
from tests.actors._helpers import Boom, Record, Worker, until


def _session(log: list[str], names: tuple[str, ...]) -> Supervisor:
    return Supervisor(
        "s1",
        [ChildSpec(n, lambda n=n: Worker(n, log)) for n in names],  # type: ignore[misc]
        strategy="one_for_all",
        intensity=0,
    )


async def test_session_tree_one_strike_tears_down_in_reverse_order() -> None:
    """One failure in a one_for_all, intensity-0 session stops all, latest started first."""
    log: list[str] = []
    sess = _session(log, ("journal", "sandbox", "drain", "mcp"))
    task = asyncio.ensure_future(sess.run())
    await sess.started.wait()
    sess.child("drain").tell(Boom())
    with pytest.raises(ChildFailed) as info:
        async with asyncio.timeout(2):
            await task
    assert info.value.path == "s1/drain"
    assert isinstance(info.value.cause, ValueError)
    assert log == ["drain", "mcp", "sandbox", "journal"]
    assert sess.state == "crashed"


async def test_one_for_one_registry_survives_a_temporary_childs_failure() -> None:
    """A session failing inside the registry is recorded and removed, not restarted."""
    reg = Supervisor("sessions", [], strategy="one_for_one", intensity=3)
    async with running(reg):
        log: list[str] = []
        s1 = reg.start_child(ChildSpec("s1", lambda: _session(log, ("drain",)), "temporary"))
        s2 = reg.start_child(ChildSpec("s2", lambda: _session(log, ("drain",)), "temporary"))
        assert isinstance(s1, Supervisor)
        assert isinstance(s2, Supervisor)
        await s1.started.wait()
        s1.child("drain").tell(Boom())
        await until(lambda: [n for n, _, _ in reg.children()] == ["s2"])
        assert reg.state == "running"
        assert reg.restarts["s1"] == 0
        assert reg.exits[-1].child == "s1"
        assert "ChildFailed" in (reg.exits[-1].reason or "")
        await s2.started.wait()
        assert await s2.child("drain").ask(Record("alive")) == "alive"


async def test_one_for_one_restarts_until_intensity_then_escalates() -> None:
    """A permanent child is restarted with fresh state until intensity is exceeded."""
    sup = Supervisor("sup", [ChildSpec("w", Worker)], strategy="one_for_one", intensity=2)
    task = asyncio.ensure_future(sup.run())
    await sup.started.wait()
    first = sup.child("w")
    await first.ask(Record("state"))
    for expected in (1, 2):
        sup.child("w").tell(Boom())
        await until(lambda e=expected: sup.restarts["w"] == e)  # type: ignore[misc]
    fresh = sup.child("w")
    assert fresh is not first
    assert isinstance(fresh, Worker)
    assert fresh.applied == []
    fresh.tell(Boom())
    with pytest.raises(ChildFailed, match="sup/w"):
        async with asyncio.timeout(2):
            await task


async def test_rest_for_one_restarts_only_later_siblings() -> None:
    """rest_for_one restarts the failed child and those after it, keeps those before."""
    sup = Supervisor(
        "root",
        [ChildSpec(n, lambda n=n: Worker(n)) for n in ("journal", "policy", "control")],  # type: ignore[misc]
        strategy="rest_for_one",
        intensity=1,
    )
    async with running(sup):
        before = {n: node for n, node, _ in sup.children()}
        sup.child("policy").tell(Boom())
        # The restart is counted when it is decided, before the fresh children exist: wait
        # for the fresh control to have started, not only for the count.
        await until(
            lambda: (
                sup.restarts["control"] == 1
                and sup.child("control") is not before["control"]
                and sup.child("control").started.is_set()
            )
        )
        after = {n: node for n, node, _ in sup.children()}
        assert after["journal"] is before["journal"]
        assert after["policy"] is not before["policy"]
        assert after["control"] is not before["control"]
        assert sup.restarts["journal"] == 0


async def test_intensity_zero_escalates_to_the_parent() -> None:
    """A child supervisor past its intensity fails, and its parent sees ChildFailed."""
    parent = Supervisor(
        "gloved",
        [ChildSpec("inner", lambda: Supervisor("inner", [ChildSpec("w", Worker)]))],
        strategy="one_for_one",
        intensity=0,
    )
    task = asyncio.ensure_future(parent.run())
    await parent.started.wait()
    inner = parent.child("inner")
    assert isinstance(inner, Supervisor)
    await inner.started.wait()
    inner.child("w").tell(Boom())
    with pytest.raises(ChildFailed) as info:
        async with asyncio.timeout(2):
            await task
    assert info.value.path == "gloved/inner"
    assert isinstance(info.value.cause, ChildFailed)


async def test_stuck_child_teardown_is_bounded_by_its_grace() -> None:
    """A child that ignores cancellation holds teardown for its grace only, then is skipped."""
    log: list[str] = []
    sup = Supervisor(
        "s",
        [
            ChildSpec("first", lambda: Worker("first", log)),
            ChildSpec(
                "stuck",
                lambda: Worker("stuck", log, stop_delay=2.0),
                shutdown_grace=0.1,
            ),
        ],
    )
    task = asyncio.ensure_future(sup.run())
    await sup.started.wait()
    stuck_node = sup.child("stuck")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Teardown is over while the stuck child is still in its 2 s stop (it logs its name at
    # the end): the 0.1 s grace, not the child, bounded it. An event, not a clock: the
    # grace's timer always fires before the child's later one.
    assert log == ["first"]
    assert stuck_node.state != "stopped"
    assert any("stuck after" in (e.reason or "") for e in sup.exits)
    await until(lambda: stuck_node.state == "stopped")


async def test_second_stop_does_not_cut_teardown_short() -> None:
    """stop() during a teardown already under way is ignored: every child still stops."""
    log: list[str] = []
    sup = Supervisor(
        "s",
        [ChildSpec(n, lambda n=n: Worker(n, log, stop_delay=0.05)) for n in ("a", "b", "c")],  # type: ignore[misc]
    )
    task = asyncio.ensure_future(sup.run())
    await sup.started.wait()
    sup.stop()
    await until(lambda: log == ["c"] or sup.state == "stopping")
    sup.stop()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["c", "b", "a"]


async def test_cancel_mid_teardown_still_stops_the_remaining_children() -> None:
    """A parent's cancel during our teardown force-kills the waited child, stops the rest."""
    log: list[str] = []
    sup = Supervisor(
        "s",
        [
            ChildSpec("first", lambda: Worker("first", log)),
            ChildSpec("slow", lambda: Worker("slow", log, stop_delay=0.3), shutdown_grace=2.0),
        ],
    )
    task = asyncio.ensure_future(sup.run())
    await sup.started.wait()
    task.cancel()
    await asyncio.sleep(0.05)
    task.cancel()  # the parent gives up while we wait for "slow"
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "first" in log
    assert sup.child("first").state == "stopped"
    await until(lambda: sup.child("slow").state == "stopped", timeout=3.0)


async def test_children_start_one_after_another() -> None:
    """A child is built only once the one before it has finished starting (OTP init order):
    a later sibling can rely on an earlier one's on_start having run."""
    order: list[str] = []

    class Slow(Actor):
        async def on_start(self) -> None:
            order.append(f"{self.name}:begin")
            await asyncio.sleep(0.05)
            order.append(f"{self.name}:end")

    sup = Supervisor(
        "root",
        [ChildSpec("a", lambda: Slow("a")), ChildSpec("b", lambda: Slow("b"))],
        strategy="rest_for_one",
        intensity=0,
    )
    task = asyncio.create_task(sup.run())
    await sup.started.wait()
    assert order == ["a:begin", "a:end", "b:begin", "b:end"]
    sup.stop()
    await asyncio.wait({task})


async def test_a_child_dying_while_starting_does_not_strand_its_siblings() -> None:
    """one_for_one with restarts allowed: the first child fails its first start; it is
    restarted and the sibling after it is started too."""
    attempts: list[int] = []

    class Flaky(Actor):
        async def on_start(self) -> None:
            attempts.append(1)
            if len(attempts) == 1:
                raise RuntimeError("first start fails")

    sup = Supervisor(
        "root",
        [ChildSpec("flaky", lambda: Flaky("flaky")), ChildSpec("next", lambda: Actor("next"))],
        strategy="one_for_one",
        intensity=3,
    )
    task = asyncio.create_task(sup.run())
    async with asyncio.timeout(5):
        while not any(n == "next" and node.started.is_set() for n, node, _ in sup.children()):
            await asyncio.sleep(0.01)
    assert len(attempts) == 2
    sup.stop()
    await asyncio.wait({task})


async def test_an_earlier_child_dying_while_a_later_one_starts_tears_down() -> None:
    """The second child's on_start waits for something the first provides; the first dies
    instead: the supervisor does not hang in the start sequence, it fails (intensity 0)."""
    never = asyncio.Event()

    class Dies(Actor):
        async def on_start(self) -> None:
            self.spawn_task(self._die(), name="die")

        async def _die(self) -> None:
            await asyncio.sleep(0.02)
            raise RuntimeError("the provider died")

    class Waits(Actor):
        async def on_start(self) -> None:
            await never.wait()

    sup = Supervisor(
        "root",
        [ChildSpec("provider", lambda: Dies("provider")), ChildSpec("user", lambda: Waits("user"))],
        strategy="one_for_all",
        intensity=0,
    )
    with pytest.raises(ChildFailed):
        async with asyncio.timeout(5):
            await sup.run()
