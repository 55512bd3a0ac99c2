"""The sandbox monitor's state machine (sans-IO): events in, actions out, the next deadline.

One :class:`Monitor` per sandbox decides everything a supervisor decides while the sandbox
runs, for both shells that drive it: the blocking one of ``glove exec``
(``container.linux._supervise``, a selector loop) and the asyncio one of ``glove run`` and
``gloved`` (``container.linux._async``, loop readers and one timer). A shell reads its
descriptors and the clock, tells the monitor what happened, and carries out the actions it
gets back; it never decides on its own when to kill, poll or finish (h11's shape: the core
holds no descriptor and calls no clock; every time is passed in).

Events: the child (the init) exited (:meth:`Monitor.child_exited`); status bytes arrived or
the pipe closed (:meth:`~Monitor.status_bytes`, :meth:`~Monitor.status_closed`); output
arrived or a stream ended (:meth:`~Monitor.output`, :meth:`~Monitor.output_closed`); a
limit was found reached (:meth:`~Monitor.limit_reached`); the caller cancelled
(:meth:`~Monitor.cancel`); a denial was answered (:meth:`~Monitor.denial`); the clock
passed :meth:`~Monitor.next_deadline` (:meth:`~Monitor.deadline_reached`).

Actions: :class:`Kill` (SIGKILL to the init of the pid namespace: the whole tree),
:class:`PollLimits` (read the cgroup and the task count now; answer with
:meth:`~Monitor.limit_reached` if one is reached), :class:`Finish` (drain what is left
without waiting, then take :meth:`~Monitor.result`).

The lifecycle: *running* until the init exits; then *draining* the outputs for at most
:data:`DRAIN_GRACE_S` (an orphan holding a pipe cannot hang the supervisor); then
*finished*, once. A kill is asked for only while running: the first reason given is the one
the result names. A broken status channel (the init's own pipe speaking nonsense) fails
closed: the tree is killed and the result is a ``setup_error``.

Every constant the shells share is here, in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal

import msgspec

from glove.container._limits import LimitPlan
from glove.container._observe import DenialTable, OomWatch, OutputCap
from glove.container._result import Durations, SandboxResult
from glove.container._spec import SandboxSpec
from glove.container._status import StatusDecoder, StatusLineError, StatusMessage
from glove.container._verdict import Observed, decide
from glove.exits import EXIT_SETUP_FAILED

#: How often the cgroup (CPU time, an OOM kill, a refused fork) and the task count
#: (``RLIMIT_NPROC``) are polled while the sandbox runs.
CPU_POLL_INTERVAL_S: Final = 0.05
#: How long output is still drained after the init has exited.
DRAIN_GRACE_S: Final = 0.5
#: Bytes read from the status pipe per call.
STATUS_READ_BYTES: Final = 4096
#: Output held for a slow reader before the sandbox's stream stops being read.
MAX_PENDING_OUTPUT_BYTES: Final = 1024 * 1024
#: Bytes written to a host sink at once (PIPE_BUF: a pipe write this size never blocks).
SINK_WRITE_BYTES: Final = 4096
#: Host stdin bytes buffered for a command that is not reading yet.
MAX_STDIN_BUFFER_BYTES: Final = 256 * 1024
#: Bytes of host stdin read per wakeup.
STDIN_CHUNK_BYTES: Final = 64 * 1024
#: How long an owner's stop waits for the killed tree to end and drain before forcing it.
STOP_GRACE_S: Final = 5.0
#: How long queued output may take to reach the host's descriptors after the end.
FLUSH_TIMEOUT_S: Final = 5.0

Phase = Literal["running", "draining", "finished"]


class Kill(msgspec.Struct, frozen=True):
    """SIGKILL the init of the sandbox's pid namespace (the whole tree).

    Attributes:
        reason: the limit (``wall_time``, ``output``, ``cpu_time``, ``memory``, ``pids``),
            or None for a cancel or a broken status channel.
    """

    reason: str | None


class PollLimits(msgspec.Struct, frozen=True):
    """Read the cgroup's and the task count's verdict now; report one with
    :meth:`Monitor.limit_reached`."""


class Finish(msgspec.Struct, frozen=True):
    """The sandbox is over: drain what is left without waiting, then take the result."""


Action = Kill | PollLimits | Finish
POLL: Final = PollLimits()
FINISH: Final = Finish()


class GroupFacts(msgspec.Struct, frozen=True):
    """What the cgroups recorded of a sandbox, read once at the end (None: no cgroups)."""

    memory_oom_killed: bool
    pids_hit: bool
    cpus_throttled: bool


def setup_error(error: str, total_s: float) -> SandboxResult:
    """The result of a sandbox that could not be built or whose status channel broke."""
    return SandboxResult(
        outcome="setup_error",
        exit_code=EXIT_SETUP_FAILED,
        error=error,
        durations=Durations(total_s=round(total_s, 6)),
    )


class Monitor:
    """One sandbox's supervision, decided without I/O (see the module's docstring)."""

    def __init__(
        self,
        *,
        output_cap: int | None,
        wall_time: float | None,
        released: float,
        polled: bool,
    ) -> None:
        """Start watching a sandbox released at ``released`` (monotonic seconds).

        ``wall_time`` is the wall-clock limit from the release; ``polled`` says there is a
        cgroup or a task-count limit to poll every :data:`CPU_POLL_INTERVAL_S`.
        """
        self.observed = Observed()
        self.output_cap = OutputCap(output_cap)
        self.oom = OomWatch()
        self.denied = DenialTable()
        self.phase: Phase = "running"
        self.broken: str | None = None
        self._status = StatusDecoder()
        self._released = released
        self._wall_at = released + wall_time if wall_time is not None else None
        self._poll_at = released + CPU_POLL_INTERVAL_S if polled else None
        self._drain_until: float | None = None
        self._open: set[int] = set()
        self._oom_watched: set[int] = set()

    # -- what the shell asks ---------------------------------------------------------------

    def add_output(self, fd: int, *, oom_watched: bool) -> None:
        """Watch output stream ``fd`` (its end is awaited before finishing); with
        ``oom_watched`` (stderr, the PTY) it is searched for out-of-memory messages."""
        self._open.add(fd)
        if oom_watched:
            self._oom_watched.add(fd)

    @property
    def open_outputs(self) -> frozenset[int]:
        """The output streams not yet at their end."""
        return frozenset(self._open)

    def next_deadline(self) -> float | None:
        """When :meth:`deadline_reached` is next due (monotonic seconds), or None."""
        due = [t for t in (self._wall_at, self._poll_at, self._drain_until) if t is not None]
        return min(due) if due else None

    def timeout(self, now: float) -> float | None:
        """Seconds from ``now`` to :meth:`next_deadline` (never negative), or None."""
        deadline = self.next_deadline()
        return None if deadline is None else max(0.0, deadline - now)

    # -- events ----------------------------------------------------------------------------

    def deadline_reached(self, now: float) -> list[Action]:
        """The clock says ``now``: whatever is due (nothing when early)."""
        actions: list[Action] = []
        if self._wall_at is not None and now >= self._wall_at:
            self._wall_at = None
            actions += self._kill("wall_time")
        if self._poll_at is not None and now >= self._poll_at:
            self._poll_at = now + CPU_POLL_INTERVAL_S
            actions.append(POLL)
        if self._drain_until is not None and now >= self._drain_until:
            actions += self._finish()
        return actions

    def child_exited(self, now: float) -> list[Action]:
        """The init has exited (and was reaped): stop the watchdogs, drain for a grace."""
        if self.phase != "running":
            return []
        self.phase = "draining"
        self._wall_at = self._poll_at = None
        self._drain_until = now + DRAIN_GRACE_S
        return self._finish_if_drained()

    def status_bytes(self, chunk: bytes) -> tuple[list[StatusMessage], list[Action]]:
        """Bytes from the status pipe: the messages they complete, and what to do.

        A line that does not decode breaks the channel: the tree is killed (fail closed)
        and the result will be a ``setup_error``; later bytes are ignored.
        """
        return self._decoded(lambda: self._status.feed(chunk))

    def status_closed(self) -> tuple[list[StatusMessage], list[Action]]:
        """The status pipe reached its end: any last message, and what to do."""
        return self._decoded(self._status.close)

    def output(self, fd: int, chunk: bytes) -> tuple[bytes, list[Action]]:
        """A chunk of output from ``fd``: the part to pass on (cut at the cap), and a kill
        for the ``output`` limit once the cap cut it."""
        if fd in self._oom_watched:
            self.oom.feed(chunk)
        allowed = self.output_cap.admit(chunk)
        return allowed, self._kill("output") if self.output_cap.truncated else []

    def final_output(self, fd: int, chunk: bytes) -> bytes:
        """Output read while finishing (nothing is killed any more): the part to pass on."""
        if fd in self._oom_watched:
            self.oom.feed(chunk)
        return self.output_cap.admit(chunk)

    def output_closed(self, fd: int) -> list[Action]:
        """Stream ``fd`` reached its end (or failed)."""
        self._open.discard(fd)
        return self._finish_if_drained()

    def limit_reached(self, reason: str) -> list[Action]:
        """A poll found ``reason`` reached (``memory``, ``pids``, ``cpu_time``): kill, and
        stop polling."""
        self._poll_at = None
        return self._kill(reason)

    def cancel(self) -> list[Action]:
        """The caller asked for the tree to be killed (nothing once the init is gone)."""
        if self.phase != "running":
            return []
        self.observed.cancelled = True
        return [Kill(None)]

    def denial(self, name: str, args: Sequence[int] = ()) -> None:
        """A refused syscall (or a refused Unix ``connect``) was answered."""
        self.denied.record(name, args)

    # -- the end ---------------------------------------------------------------------------

    def result(
        self,
        spec: SandboxSpec,
        plans: Mapping[str, LimitPlan],
        *,
        groups: GroupFacts | None,
        init_wait_status: int | None,
        started: float,
        now: float,
        strerror: Callable[[int], str],
    ) -> SandboxResult:
        """The sandbox's result, from everything observed (the verdict is
        :func:`~glove.container._verdict.decide`'s)."""
        if self.broken is not None:
            return setup_error(f"the sandbox's status channel broke: {self.broken}", now - started)
        observed = self.observed
        observed.denied = self.denied.counts
        observed.expected = self.denied.expected
        observed.output_bytes = self.output_cap.total
        observed.output_truncated = self.output_cap.truncated
        observed.oom_seen = self.oom.seen
        if groups is not None:
            observed.memory_oom_killed = groups.memory_oom_killed
            observed.pids_hit = groups.pids_hit
            observed.cpus_throttled = groups.cpus_throttled
        observed.init_wait_status = init_wait_status
        observed.setup_s = self._released - started
        observed.total_s = now - started
        return decide(observed, spec, plans, strerror=strerror)

    # -- inside ----------------------------------------------------------------------------

    def _kill(self, reason: str) -> list[Action]:
        if self.phase != "running":
            return []
        if self.observed.kill_reason is None:
            self.observed.kill_reason = reason
        return [Kill(reason)]

    def _finish(self) -> list[Action]:
        if self.phase == "finished":
            return []
        self.phase = "finished"
        self._wall_at = self._poll_at = self._drain_until = None
        return [FINISH]

    def _finish_if_drained(self) -> list[Action]:
        if self.phase == "draining" and not self._open:
            return self._finish()
        return []

    def _decoded(
        self, decode: Callable[[], list[StatusMessage]]
    ) -> tuple[list[StatusMessage], list[Action]]:
        if self.broken is not None:
            return [], []
        try:
            messages = decode()
        except StatusLineError as exc:
            self.broken = str(exc)
            return [], [Kill(None)] if self.phase == "running" else []
        self.observed.messages.extend(messages)
        return messages, []
