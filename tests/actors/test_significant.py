"""Significant children (OTP's auto_shutdown) and watching a child's exit."""

from __future__ import annotations

import asyncio

import pytest

from glove.actors import ChildFailed, ChildSpec, Supervisor
from tests.actors._helpers import Boom, Worker


def _tree(log: list[str]) -> Supervisor:
    return Supervisor(
        "session-1",
        [
            ChildSpec("driver", lambda: Worker("driver", log), significant=True),
            ChildSpec("contained", lambda: Worker("contained", log)),
        ],
        strategy="one_for_all",
        intensity=0,
    )


async def test_a_significant_child_that_stops_ends_its_supervisor_normally() -> None:
    """The driver stops: its supervisor tears the rest down and exits normally (a watch
    on it in its parent sees no reason), never restarting anything."""
    log: list[str] = []
    parent = Supervisor("sessions", strategy="one_for_one", intensity=0)
    parent_task = asyncio.ensure_future(parent.run())
    await parent.started.wait()
    tree = _tree(log)
    parent.start_child(ChildSpec(tree.name, lambda: tree, restart="temporary"))
    seen: list[BaseException | None] = []
    exited = asyncio.Event()

    def on_exit(reason: BaseException | None) -> None:
        seen.append(reason)
        exited.set()

    parent.watch(tree.name, on_exit)
    await tree.started.wait()
    tree.child("driver").stop()
    async with asyncio.timeout(5):
        await exited.wait()
    assert seen == [None]
    assert tree.state == "stopped"
    assert log == ["driver", "contained"]
    assert not tree.restarts
    parent.stop()
    await asyncio.wait({parent_task})


async def test_a_significant_child_that_fails_fails_its_supervisor() -> None:
    """The driver crashes: its supervisor fails with ChildFailed naming it (the exit
    reason a watcher reads the driver's exception from)."""
    log: list[str] = []
    tree = _tree(log)
    task = asyncio.ensure_future(tree.run())
    await tree.started.wait()
    tree.child("driver").tell(Boom())
    with pytest.raises(ChildFailed) as info:
        async with asyncio.timeout(5):
            await task
    assert info.value.path == "session-1/driver"
    assert isinstance(info.value.cause, ValueError)
    assert "contained" in log
