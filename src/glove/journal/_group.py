"""Group commit, pure: who waits for which position, what is written, what is durable.

The journal writer and the audit log both acknowledge an append only once its record is
durable, and both let concurrent appenders share one ``fdatasync``. This module is that
mechanism once, with no I/O (h11's shape: the shells feed it events, it says what to do):

::

      submit(w) ──> queue ──next_batch()──> [the shell writes the batch]
                                              │ written([(pos, w), ...], upto)
                                              v
                       waiting for position <= upto, in order
                                              │ sync_target() -> upto   [the shell syncs]
                                              v synced(upto)
                       durable: returned to the shell, which acknowledges them

* A **position** is the sequence number of a waiter's record; positions written are
  contiguous and increasing, so "durable up to ``n``" resolves every waiter at or below ``n``.
* **Batching**: :meth:`GroupCommit.next_batch` hands out at most ``max_batch`` waiters, in
  arrival order; appends that arrive while a batch is written or synced form the next one.
  A write may cover fewer waiters than it was given (a full disk, a limit): the shell
  refuses the rest itself (:meth:`GroupCommit.refused`), and the log carries on.
* **Writes and syncs overlap**: a batch may be written while an earlier sync is in flight;
  :meth:`GroupCommit.sync_target` starts one sync at a time, covering everything written.
* **Failure is for everyone**: :meth:`GroupCommit.fail` (a sync or write whose outcome is
  unknown) returns every waiter, queued, written or syncing, for the shell to fail, and every
  later :meth:`GroupCommit.admit` says ``failed``: nothing is retried (fsyncgate).

:class:`SyncPacer` decides, from the sync latencies the shell measures, whether the next
commit may run on the event loop (no executor round trip) or must go to the executor (see
decision 0045).
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Generic, Literal, TypeVar

W = TypeVar("W")

Admission = Literal["ok", "closed", "failed", "busy"]
"""What :meth:`GroupCommit.admit` says about a new append."""

INLINE_SYNC_BUDGET_S: Final = 0.001
"""A sync that took longer than this on the loop sends the next commits to the executor."""
INLINE_SYNC_RESUME_S: Final = 0.0005
"""An executor sync at most this long lets commits run on the loop again (hysteresis)."""
INLINE_MAX_WAITERS: Final = 4
"""Largest batch committed on the loop; bigger ones are concurrent appenders, whom the
executor serves better (the loop takes the next batch while the thread syncs)."""
INLINE_MAX_BYTES: Final = 64 * 1024
"""Largest batch, in encoded bytes, committed on the loop."""


class CommitState(enum.Enum):
    """Where a group-commit log stands."""

    OPEN = "open"
    CLOSING = "closing"
    FAILED = "failed"


class GroupCommit(Generic[W]):
    """The state of one group-commit log; the shell owns the waiters' futures and the I/O."""

    def __init__(self, *, max_batch: int, max_pending: int, durable: int = 0) -> None:
        if max_batch < 1 or max_pending < 1:
            raise ValueError("max_batch and max_pending must be at least 1")
        self.max_batch = max_batch
        self.max_pending = max_pending
        self.state = CommitState.OPEN
        self._queue: collections.deque[W] = collections.deque()
        self._writing = 0  # waiters handed out by next_batch, not yet written or refused
        self._waiting: collections.deque[tuple[int, W]] = collections.deque()
        self.written_upto = durable
        """Highest position written (in the kernel, not yet necessarily durable)."""
        self.durable_upto = durable
        """Highest position made durable."""
        self._syncing: int | None = None

    # -- appends ------------------------------------------------------------------------------

    def admit(self) -> Admission:
        """Whether a new append may be submitted now (``busy``: back off and retry)."""
        if self.state is CommitState.FAILED:
            return "failed"
        if self.state is CommitState.CLOSING:
            return "closed"
        if len(self._queue) >= self.max_pending:
            return "busy"
        return "ok"

    def submit(self, waiter: W) -> None:
        """Queue ``waiter`` (after :meth:`admit` said ``ok``) for the next batch.

        Raises:
            RuntimeError: the log is not open (call :meth:`admit` first).
        """
        if self.state is not CommitState.OPEN:
            raise RuntimeError(f"submit to a group commit that is {self.state.value}")
        self._queue.append(waiter)

    @property
    def queued(self) -> int:
        """Waiters not yet handed to a write."""
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing queued, being written, waiting for a sync or syncing."""
        return not self._queue and not self._writing and not self._waiting and not self.syncing

    def next_batch(self) -> list[W]:
        """Up to ``max_batch`` queued waiters, oldest first, for the shell to write.

        Empty when nothing is queued or the log failed.
        """
        if self.state is CommitState.FAILED:
            return []
        take = min(self.max_batch, len(self._queue))
        batch = [self._queue.popleft() for _ in range(take)]
        self._writing += len(batch)
        return batch

    def requeue(self, batch: Sequence[W]) -> None:
        """Put a batch the shell took but did not write back at the front of the queue."""
        self._writing -= len(batch)
        self._queue.extendleft(reversed(batch))

    def written(self, entries: Sequence[tuple[int, W]], upto: int) -> None:
        """Waiters of a batch (a prefix, in order) are written, each at its position.

        ``upto`` is the last position the write made (at least the last waiter's): positions
        without a waiter (a journal's seal record) count as written too.

        Raises:
            ValueError: a position does not follow the ones written before it.
        """
        last = self.written_upto
        for position, _waiter in entries:
            if position <= last:
                raise ValueError(f"position {position} is not after {last}")
            last = position
        if upto < last:
            raise ValueError(f"written up to {upto}, but a waiter is at {last}")
        self._writing -= len(entries)
        self._waiting.extend(entries)
        self.written_upto = upto

    def refused(self, count: int) -> None:
        """``count`` waiters of the batch were not written (the shell fails them itself)."""
        self._writing -= count

    # -- syncs --------------------------------------------------------------------------------

    @property
    def syncing(self) -> bool:
        """A sync is in flight."""
        return self._syncing is not None

    def sync_target(self) -> int | None:
        """Start a sync covering everything written, or None (nothing new, or one in flight)."""
        if self.state is CommitState.FAILED or self._syncing is not None:
            return None
        if self.written_upto <= self.durable_upto:
            return None
        self._syncing = self.written_upto
        return self._syncing

    def synced(self, upto: int) -> list[W]:
        """A sync made everything up to ``upto`` durable; return the waiters it resolves.

        Raises:
            ValueError: ``upto`` is past what was written.
        """
        if upto > self.written_upto:
            raise ValueError(f"synced {upto}, but only {self.written_upto} was written")
        if self._syncing is not None and upto >= self._syncing:
            self._syncing = None
        self.durable_upto = max(self.durable_upto, upto)
        done: list[W] = []
        while self._waiting and self._waiting[0][0] <= self.durable_upto:
            done.append(self._waiting.popleft()[1])
        return done

    def pending_sync(self) -> bool:
        """Something written is not durable yet and no sync covers it."""
        return self._syncing is None and self.written_upto > self.durable_upto

    # -- the end ------------------------------------------------------------------------------

    def close(self) -> None:
        """Refuse new appends; what is queued still commits."""
        if self.state is CommitState.OPEN:
            self.state = CommitState.CLOSING

    def fail(self) -> list[W]:
        """Fail closed: return every waiter not yet durable; refuse everything after.

        The shell fails each returned waiter with its error; waiters it handed to a write
        that is still running are its own to fail (they are not returned twice).
        """
        self.state = CommitState.FAILED
        out = [waiter for _pos, waiter in self._waiting]
        out.extend(self._queue)
        self._waiting.clear()
        self._queue.clear()
        self._syncing = None
        return out


@dataclass(slots=True)
class SyncPacer:
    """Whether the next commit runs on the loop or in the executor, from measured syncs.

    On the loop a small commit costs its ``write`` and ``fdatasync`` only; in the executor it
    also pays two thread wake-ups, which on a loaded two-core machine cost more than the
    sync itself (decision 0045). But a sync on the loop blocks every other actor for as long
    as it takes, so the pacer keeps the loop only while syncs are quick: one that overruns
    ``budget_s`` sends the following commits to the executor, and they come back once a sync
    there took at most ``resume_s``. Pure: the shell reports each sync's duration.
    """

    budget_s: float = INLINE_SYNC_BUDGET_S
    resume_s: float = INLINE_SYNC_RESUME_S
    max_waiters: int = INLINE_MAX_WAITERS
    max_bytes: int = INLINE_MAX_BYTES
    enabled: bool = True
    on_loop: bool = True
    inline_syncs: int = 0
    executor_syncs: int = 0

    def inline(self, waiters: int, nbytes: int) -> bool:
        """Whether a commit of ``waiters`` records and ``nbytes`` may run on the loop."""
        return (
            self.enabled
            and self.on_loop
            and waiters <= self.max_waiters
            and nbytes <= self.max_bytes
        )

    def observe(self, seconds: float, *, inline: bool) -> None:
        """Report how long one sync took, and where it ran."""
        if inline:
            self.inline_syncs += 1
            if seconds > self.budget_s:
                self.on_loop = False
        else:
            self.executor_syncs += 1
            if seconds <= self.resume_s:
                self.on_loop = True
