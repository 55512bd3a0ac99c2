"""The registry as an actor: one message at a time (the wait for a record's sync in a task
of its own), each session's lifecycle in its own driver (the first child of
``session-<id>``), and a driver's crash is its session's ``internal_error`` receipt,
written by the registry from the exit reason."""

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


async def test_a_create_waiting_for_its_sync_holds_no_request_and_shows_nothing_early(
    service: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create whose journal write is held back (the injected fault) waits in a task of
    the registry, not in its handler: a list sent meanwhile is answered at once and does
    not show the session (nothing is shown before it is durable), and once the create
    returns the session is listed whole."""
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
    page, _ = await registry.list(state=None, after=None, limit=100)
    assert page == [], "a session was shown before its created record was durable"
    assert registry.busy is None
    assert not create.done()
    held.set()
    view = await create
    page, _ = await registry.list(state=None, after=None, limit=100)
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


async def test_a_crashed_drivers_receipt_waits_for_its_step_in_flight(
    service: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver crashes while its ``running`` step is still being made durable (the
    injected fault holds the write): the registry's ``internal_error`` receipt and terminal
    record come only after that step, so the journal never holds a state after a
    terminal record."""
    held = asyncio.Event()
    entered = asyncio.Event()
    order: list[str] = []
    transition = SessionStore.transition
    terminal = SessionStore.terminal

    async def slow_transition(
        self: SessionStore, session_id: str, state: Any, *a: Any, **k: Any
    ) -> None:
        if state == "running":
            entered.set()
            await held.wait()
        await transition(self, session_id, state, *a, **k)
        order.append(state)

    async def noted_terminal(self: SessionStore, *a: Any, **k: Any) -> None:
        order.append("terminal")
        await terminal(self, *a, **k)

    monkeypatch.setattr(SessionStore, "transition", slow_transition)
    monkeypatch.setattr(SessionStore, "terminal", noted_terminal)
    view = await service.registry.create(plan("sleep"))
    await entered.wait()
    driver = _driver(service, view.session_id)
    driver.tell(object())
    await asyncio.sleep(0.3)
    assert "terminal" not in order, "the receipt overtook the step in flight"
    held.set()
    final = await service.until_terminal(view.session_id)
    assert final.outcome is not None
    assert final.outcome.kind == "internal_error"
    assert order[-2:] == ["running", "terminal"], order


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
