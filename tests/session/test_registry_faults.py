"""The registry's one fatal failure: a journal that cannot persist. Everything else that goes
wrong in one session (tests/session/test_gloved_faults.py, with a real gloved) is that
session's receipt; a session-journal write that fails still crashes the registry, so the
daemon restarts and recovers instead of running on state it could not make durable."""

from __future__ import annotations

import asyncio
import errno

from glove.actors import ChildFailed
from glove.journal import JournalFull
from glove.session._faults import arm_fault_hook
from glove.testing import FaultStorage

from .conftest import Running, plan


async def test_a_session_journal_that_cannot_persist_still_crashes_the_registry(
    service: Running,
) -> None:
    """The session journal refuses one transition (ENOSPC: the writer itself carries on)
    while a session prepares: the registry fails with the journal's JournalFull, and so the
    service's tree; the refusal is never swallowed into that session's receipt."""
    storage = FaultStorage()
    writer = service.registry._sessions_writer

    def fill_the_disk(stage: str, _session_id: str, _harness: str) -> None:
        if stage == "prepare":  # the next transition ("composed") is refused
            storage.write_errno = errno.ENOSPC
            writer._storage = storage

    arm_fault_hook(fill_the_disk)
    try:
        await service.registry.create(plan("hello"))
        async with asyncio.timeout(60):
            await asyncio.wait({service.task})
    finally:
        arm_fault_hook(None)
    assert storage.write_errno is None, "control: the refused write happened"
    assert isinstance(service.task.exception(), ChildFailed)  # retrieved, so never logged
    reason = service.tree.exit_reason
    assert isinstance(reason, ChildFailed), reason
    assert reason.path == "gloved-test/registry", reason.path
    assert isinstance(reason.cause, JournalFull), repr(reason.cause)
    assert service.registry.store is not None
    (record,) = service.registry.store.sessions.values()
    assert record.receipt_seq is None  # no receipt claims an outcome for it
