"""The registry as an actor: one message at a time, each session's lifecycle in its own
driver (the first child of ``session-<id>``), and a driver's crash is its session's
``internal_error`` receipt, written by the registry from the exit reason."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from glove.actors import Supervisor, snapshot
from glove.session._driver import CONTAINED_CHILD, DRIVER_CHILD, SessionDriver
from glove.session._store import SessionStore
from glove.session._tree import SANDBOX_CHILD
from glove.session.errors import SessionLimit

from .conftest import Running, plan

#: Loop turns a parked handler is given to show whether another message got past it.
TURNS = 200


def _sessions(service: Running) -> Supervisor:
    node = service.tree.child("sessions")
    assert isinstance(node, Supervisor)
    return node


def _driver(service: Running, session_id: str) -> SessionDriver:
    tree = _sessions(service).child(f"session-{session_id}")
    assert isinstance(tree, Supervisor)
    driver = tree.child(DRIVER_CHILD)
    assert isinstance(driver, SessionDriver)
    return driver


async def _until_running(service: Running, session_id: str) -> None:
    queue = await service.registry.watch(session_id)
    async with asyncio.timeout(60):
        while (seen := await queue.get()) is not None and seen.state != "running":
            pass
    assert seen is not None, "it ended before it ran"


async def _turns() -> None:
    for _ in range(TURNS):
        await asyncio.sleep(0)


async def test_a_request_racing_another_waits_for_it_whole(
    service: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create parked in the middle of its handler (its journal write held back: the
    injected fault) holds every other request behind it: a status and a list sent
    meanwhile are answered only after it, and they see the created session whole."""
    registry = service.registry
    held = asyncio.Event()
    entered = asyncio.Event()
    created = SessionStore.created

    async def slow_created(self: SessionStore, *args: Any, **kwargs: Any) -> Any:
        entered.set()
        await held.wait()
        return await created(self, *args, **kwargs)

    monkeypatch.setattr(SessionStore, "created", slow_created)
    create = asyncio.ensure_future(registry.create(plan("hello")))
    await entered.wait()
    assert registry.busy is not None
    assert registry.busy[0] == "Create"
    listing = asyncio.ensure_future(registry.list(state=None, after=None, limit=100))
    await _turns()
    assert not listing.done(), "a list was handled while a create was half done"
    assert registry.mailbox_depth == 1
    held.set()
    view = await create
    page, _ = await listing
    assert [v.session_id for v in page] == [view.session_id]
    await service.until_terminal(view.session_id)


async def test_two_creates_for_the_last_slot_get_one_session(service: Running) -> None:
    """With one slot left, two creates sent at once: messages are serial, so exactly one
    session is made and the other is refused with SessionLimit."""
    registry = service.registry
    sessions = msgspec.structs.replace(registry.config.sessions, max_running=1)
    registry.config = msgspec.structs.replace(registry.config, sessions=sessions)
    results = await asyncio.gather(
        service.registry.create(plan("sleep")),
        service.registry.create(plan("sleep")),
        return_exceptions=True,
    )
    made = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(made) == 1
    assert len(refused) == 1, refused
    assert isinstance(refused[0], SessionLimit), refused
    await service.registry.stop_session(made[0].session_id)
    await service.until_terminal(made[0].session_id)


async def test_a_driver_that_crashes_gives_its_session_an_internal_error_receipt(
    service: Running,
) -> None:
    """A running session's driver crashes (it is handed a message it does not handle, so
    its handler raises): its tree ends, the sandbox is killed, and the registry writes the
    session's one receipt, outcome internal_error naming only the exception's type."""
    view = await service.registry.create(plan("sleep"))
    await _until_running(service, view.session_id)
    driver = _driver(service, view.session_id)
    sandbox = service.registry.sandbox_of(view.session_id)
    assert sandbox is not None
    driver.tell(object())
    final = await service.until_terminal(view.session_id)
    assert final.outcome is not None
    assert final.outcome.kind == "internal_error"
    assert final.outcome.error == "TypeError in launch; gloved's log has the traceback"
    assert final.receipt_seq is not None
    assert driver.state == "crashed"
    assert isinstance(driver.exit_reason, TypeError)
    assert sandbox.result is not None, "the sandbox outlived its crashed driver"
    names = [name for name, _node, _alive in _sessions(service).children()]
    assert f"session-{view.session_id}" not in names
    page = await service.registry.receipts_page(0, 100)
    mine = [r for r in page.receipts if r.session_id == view.session_id]
    assert len(mine) == 1
    assert mine[0].seq == final.receipt_seq
    assert mine[0].receipt["outcome"]["kind"] == "internal_error"
    # The daemon serves on: a new session runs to its own receipt.
    after = await service.registry.create(plan("hello"))
    done = await service.until_terminal(after.session_id)
    assert done.outcome is not None
    assert done.outcome.kind == "exited"


async def test_a_driver_crash_before_launch_is_a_prepare_internal_error(
    service: Running,
) -> None:
    """A driver crashed right after its session was created (before it prepared
    anything): still exactly one receipt, internal_error in prepare."""
    view = await service.registry.create(plan("sleep"))
    tree = _sessions(service).child(f"session-{view.session_id}")
    assert isinstance(tree, Supervisor)
    await tree.started.wait()
    _driver(service, view.session_id).crash(RuntimeError("injected"))
    final = await service.until_terminal(view.session_id)
    assert final.outcome is not None
    assert final.outcome.kind == "internal_error"
    assert final.outcome.error.startswith("RuntimeError in ")


async def test_the_tree_shows_each_session_driver_first(service: Running) -> None:
    """diag.tree's snapshot: session-<id> under sessions has the driver as its first
    child, then the contained run with the sandbox in it."""
    view = await service.registry.create(plan("sleep"))
    await _until_running(service, view.session_id)
    root = snapshot(service.tree).root
    (sessions,) = [c for c in root.children if c.name == "sessions"]
    (tree,) = [c for c in sessions.children if c.name == f"session-{view.session_id}"]
    assert [c.name for c in tree.children] == [DRIVER_CHILD, CONTAINED_CHILD]
    assert tree.children[0].kind == "SessionDriver"
    contained = tree.children[1]
    assert contained.children[-1].name == SANDBOX_CHILD
    await service.registry.stop_session(view.session_id)
    final = await service.until_terminal(view.session_id)
    assert final.outcome is not None
    assert final.outcome.kind == "cancelled"
