"""The pure group-commit core and the sync pacer, driven by hand (no I/O, no loop)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from glove.journal._group import CommitState, GroupCommit, SyncPacer


def test_core_imports_no_io() -> None:
    """The core is sans-IO: importing it loads neither asyncio nor os-level I/O helpers."""
    code = (
        "import sys; import glove.journal._group; "
        "print(sorted(m for m in ('asyncio', 'socket', 'threading') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"


def test_batches_are_bounded_and_in_order() -> None:
    """next_batch hands out at most max_batch waiters, oldest first."""
    core: GroupCommit[str] = GroupCommit(max_batch=2, max_pending=10)
    for name in "abcde":
        core.submit(name)
    assert core.next_batch() == ["a", "b"]
    assert core.next_batch() == ["c", "d"]
    assert core.next_batch() == ["e"]
    assert core.next_batch() == []


def test_durable_resolves_exactly_the_positions_synced() -> None:
    """A sync up to n resolves the waiters at or below n, and no later one."""
    core: GroupCommit[str] = GroupCommit(max_batch=8, max_pending=8)
    for name in "abc":
        core.submit(name)
    batch = core.next_batch()
    core.written([(1, "a"), (2, "b")], 2)
    core.refused(1)  # "c" was not written (a full disk): the shell fails it itself
    assert not core.idle
    target = core.sync_target()
    assert target == 2
    assert core.sync_target() is None  # one sync at a time
    assert core.synced(1) == ["a"]
    assert core.synced(2) == ["b"]
    assert core.idle
    assert batch == ["a", "b", "c"]


def test_writes_overlap_a_sync_and_the_next_sync_covers_them() -> None:
    """A batch written while a sync runs waits for the next sync, which starts after it."""
    core: GroupCommit[str] = GroupCommit(max_batch=8, max_pending=8)
    core.submit("a")
    core.written([(1, w) for w in core.next_batch()], 1)
    assert core.sync_target() == 1
    core.submit("b")
    core.written([(2, w) for w in core.next_batch()], 2)
    assert core.pending_sync() is False  # the running sync must finish first
    assert core.synced(1) == ["a"]
    assert core.pending_sync()
    assert core.sync_target() == 2
    assert core.synced(2) == ["b"]


def test_positions_without_waiters_and_jumps_are_allowed() -> None:
    """A seal record (a position with no waiter) or another writer's records skip positions."""
    core: GroupCommit[str] = GroupCommit(max_batch=8, max_pending=8, durable=10)
    core.submit("a")
    core.submit("b")
    core.written(list(zip((11, 15), core.next_batch(), strict=True)), 16)
    assert core.written_upto == 16
    with pytest.raises(ValueError, match="not after"):
        core.written([(16, "x")], 16)
    assert core.synced(16) == ["a", "b"]
    with pytest.raises(ValueError, match="only 16 was written"):
        core.synced(17)


def test_failure_fails_everyone_and_everything_after() -> None:
    """fail() returns every waiter not durable (written or queued); admit says failed after."""
    core: GroupCommit[str] = GroupCommit(max_batch=1, max_pending=8)
    for name in "abc":
        core.submit(name)
    core.written([(1, w) for w in core.next_batch()], 1)
    in_flight = core.next_batch()
    assert core.sync_target() == 1
    assert sorted(core.fail()) == ["a", "c"]  # "b" is the shell's own (its write is running)
    assert in_flight == ["b"]
    assert core.state is CommitState.FAILED
    assert core.admit() == "failed"
    assert core.next_batch() == []
    assert core.sync_target() is None
    with pytest.raises(RuntimeError):
        core.submit("d")


def test_admission_busy_and_closed() -> None:
    """A full queue says busy; a closed log says closed but still hands out what it has."""
    core: GroupCommit[int] = GroupCommit(max_batch=4, max_pending=2)
    core.submit(1)
    core.submit(2)
    assert core.admit() == "busy"
    core.close()
    assert core.admit() == "closed"
    assert core.next_batch() == [1, 2]


@given(
    st.lists(
        st.tuples(st.integers(1, 5), st.booleans()),
        min_size=1,
        max_size=40,
    )
)
def test_every_waiter_is_resolved_once_and_in_order(steps: list[tuple[int, bool]]) -> None:
    """Any interleaving of submits, writes and syncs resolves each waiter once, in order."""
    core: GroupCommit[int] = GroupCommit(max_batch=3, max_pending=1000)
    resolved: list[int] = []
    position = 0
    submitted = 0
    for count, sync in steps:
        for _ in range(count):
            submitted += 1
            core.submit(submitted)
        batch = core.next_batch()
        entries = []
        for waiter in batch:
            position += 1
            entries.append((position, waiter))
        core.written(entries, position)
        if sync and (target := core.sync_target()) is not None:
            resolved.extend(core.synced(target))
    while batch := core.next_batch():
        entries = []
        for waiter in batch:
            position += 1
            entries.append((position, waiter))
        core.written(entries, position)
    while (target := core.sync_target()) is not None:
        resolved.extend(core.synced(target))
    assert resolved == list(range(1, submitted + 1))
    assert core.idle


def test_pacer_leaves_the_loop_after_a_slow_sync_and_comes_back() -> None:
    """One slow sync on the loop sends commits to the executor until a quick one there."""
    pacer = SyncPacer(budget_s=0.001, resume_s=0.0005, max_waiters=4, max_bytes=1000)
    assert pacer.inline(1, 100)
    assert not pacer.inline(5, 100)
    assert not pacer.inline(1, 2000)
    pacer.observe(0.0002, inline=True)
    assert pacer.inline(1, 100)
    pacer.observe(0.004, inline=True)
    assert not pacer.inline(1, 100)
    pacer.observe(0.0008, inline=False)
    assert not pacer.inline(1, 100)
    pacer.observe(0.0003, inline=False)
    assert pacer.inline(1, 100)
    assert (pacer.inline_syncs, pacer.executor_syncs) == (2, 2)
    assert not SyncPacer(enabled=False).inline(1, 1)
