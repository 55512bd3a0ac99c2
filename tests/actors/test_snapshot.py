"""Diagnostics: a consistent snapshot of the live tree, names only, and loop lag."""

from __future__ import annotations

import time

import msgspec

from glove.actors import ChildSpec, LoopLagMonitor, Supervisor, render_tree, running, snapshot
from tests.actors._helpers import Boom, Record, Sleep, Worker, until


class Secret(msgspec.Struct, frozen=True):
    """A message whose payload must never appear in diagnostics."""

    token: str


async def test_snapshot_shows_busy_actor_without_touching_its_mailbox() -> None:
    """A busy actor is reported with its message type and depth; payloads never appear."""
    root = Supervisor(
        "gloved",
        [ChildSpec("lag", lambda: LoopLagMonitor(interval=0.01)), ChildSpec("w", Worker)],
        strategy="rest_for_one",
    )
    async with running(root):
        w = root.child("w")
        w.tell(Sleep(0.3))
        w.tell(Record("hunter2-payload"))
        await until(lambda: w.busy is not None)
        monitor = root.child("lag")
        assert isinstance(monitor, LoopLagMonitor)
        await until(lambda: monitor.stats() is not None)
        tree = snapshot(root)
        wsnap = tree.root.children[1]
        assert wsnap.busy_with == "Sleep"
        assert wsnap.mailbox_depth == 1
        assert wsnap.mailbox_capacity == 8
        encoded = msgspec.json.encode(tree)
        assert b"hunter2" not in encoded
        assert tree.loop_lag is not None
        assert "busy Sleep" in render_tree(tree)


async def test_snapshot_records_restarts_and_exit_reasons() -> None:
    """Restarts and the last exit reasons of children show in the snapshot."""
    sup = Supervisor("sessions", [ChildSpec("w", Worker)], strategy="one_for_one", intensity=5)
    async with running(sup):
        sup.child("w").tell(Boom())
        await until(lambda: sup.restarts["w"] == 1)
        tree = snapshot(sup)
        assert tree.root.children[0].restarts == 1
        assert "exploded" in (tree.root.exits[-1].reason or "")
        assert "exploded" in render_tree(tree)


async def test_loop_lag_monitor_sees_a_blocking_call() -> None:
    """A blocking call on the loop shows up as lag."""
    async with running(LoopLagMonitor(interval=0.01)) as mon:
        await until(lambda: mon.stats() is not None)
        time.sleep(0.15)  # deliberately block the loop
        await until(lambda: (s := mon.stats()) is not None and s.max_ms >= 100)


async def test_secret_payload_type_name_only() -> None:
    """Only the message's type name reaches the snapshot."""
    async with running(Worker()) as w:
        w.tell(Sleep(0.2))
        w.tell(Secret("sk-live-123"))
        await until(lambda: w.busy is not None)
        assert b"sk-live" not in msgspec.json.encode(snapshot(w))
