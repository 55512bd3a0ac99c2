"""The sandbox monitor core (sans-IO): every event in every phase, and invariants over every
short sequence of events (pure and fast: no sandbox, no clock; every time is passed in).

The blocking shell (``glove exec``) and the asyncio shell (``glove run``, ``gloved``) only
drive this core; the real-sandbox tests of both (``test_async.py``, ``test_limits_enforced``,
``test_exec_cli.py``, ...) show the drivers carry its actions out.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from glove.container import Limits, SandboxResult, SandboxSpec
from glove.container._monitor import (
    CPU_POLL_INTERVAL_S,
    DRAIN_GRACE_S,
    FINISH,
    POLL,
    Finish,
    GroupFacts,
    Kill,
    Monitor,
    setup_error,
)
from glove.container._status import Exited, Ready
from glove.exits import EXIT_SETUP_FAILED

RELEASED = 100.0
OUT, ERR = 10, 11


def _monitor(*, cap: int | None = None, wall: float | None = None, polled: bool = False) -> Monitor:
    monitor = Monitor(output_cap=cap, wall_time=wall, released=RELEASED, polled=polled)
    monitor.add_output(OUT, oom_watched=False)
    monitor.add_output(ERR, oom_watched=True)
    return monitor


def _result(
    monitor: Monitor, *, spec: SandboxSpec | None = None, now: float = 200.0
) -> SandboxResult:
    return monitor.result(
        spec or SandboxSpec(argv=("cmd",)),
        {},
        groups=None,
        init_wait_status=0,
        started=RELEASED - 1.0,
        now=now,
        strerror=os.strerror,
    )


def _phase(monitor: Monitor) -> str:
    return monitor.phase  # read anew: the phase changes under each event


# -- deadlines ------------------------------------------------------------------------------


def test_without_limits_there_is_no_deadline_and_nothing_is_due() -> None:
    monitor = _monitor()
    assert monitor.next_deadline() is None
    assert monitor.timeout(RELEASED) is None
    assert monitor.deadline_reached(RELEASED + 1e6) == []


def test_the_next_deadline_is_the_soonest_of_wall_time_and_the_poll() -> None:
    assert _monitor(wall=10.0).next_deadline() == RELEASED + 10.0
    assert _monitor(polled=True).next_deadline() == RELEASED + CPU_POLL_INTERVAL_S
    assert _monitor(wall=0.01, polled=True).next_deadline() == RELEASED + 0.01
    assert _monitor(wall=10.0).timeout(RELEASED + 4.0) == pytest.approx(6.0)
    assert _monitor(wall=1.0).timeout(RELEASED + 4.0) == 0.0  # overdue: never negative


def test_wall_time_kills_once_at_its_deadline_not_before() -> None:
    monitor = _monitor(wall=5.0)
    assert monitor.deadline_reached(RELEASED + 4.999) == []
    assert monitor.deadline_reached(RELEASED + 5.0) == [Kill("wall_time")]
    assert monitor.observed.kill_reason == "wall_time"
    assert monitor.next_deadline() is None
    assert monitor.deadline_reached(RELEASED + 6.0) == []


def test_the_poll_recurs_from_when_it_ran_until_a_limit_is_reached() -> None:
    monitor = _monitor(polled=True)
    now = RELEASED + CPU_POLL_INTERVAL_S + 0.2  # a late wakeup: the next poll counts from now
    assert monitor.deadline_reached(now) == [POLL]
    assert monitor.next_deadline() == pytest.approx(now + CPU_POLL_INTERVAL_S)
    assert monitor.deadline_reached(now + 0.001) == []
    assert monitor.limit_reached("memory") == [Kill("memory")]
    assert monitor.observed.kill_reason == "memory"
    assert monitor.next_deadline() is None  # no more polling once one is reached


def test_the_first_kill_reason_is_the_one_the_result_names() -> None:
    monitor = _monitor(cap=3, wall=1.0)
    _, actions = monitor.output(OUT, b"abcdef")
    assert actions == [Kill("output")]
    assert monitor.deadline_reached(RELEASED + 1.0) == [Kill("wall_time")]  # still killed
    assert monitor.limit_reached("pids") == [Kill("pids")]
    assert monitor.observed.kill_reason == "output"


# -- the end ----------------------------------------------------------------------------------


def test_exit_stops_the_watchdogs_and_starts_the_drain_grace() -> None:
    monitor = _monitor(wall=5.0, polled=True)
    assert monitor.child_exited(RELEASED + 1.0) == []  # two outputs still open
    assert _phase(monitor) == "draining"
    assert monitor.next_deadline() == RELEASED + 1.0 + DRAIN_GRACE_S
    assert monitor.deadline_reached(RELEASED + 1.0 + DRAIN_GRACE_S - 1e-3) == []
    assert monitor.deadline_reached(RELEASED + 1.0 + DRAIN_GRACE_S) == [FINISH]
    assert _phase(monitor) == "finished"
    assert monitor.next_deadline() is None
    assert monitor.deadline_reached(RELEASED + 100.0) == []


def test_finish_comes_when_the_last_output_ends_after_the_exit() -> None:
    monitor = _monitor()
    assert monitor.output_closed(OUT) == []  # still running: nothing to finish
    assert monitor.child_exited(RELEASED) == []
    assert monitor.open_outputs == {ERR}
    assert monitor.output_closed(ERR) == [FINISH]
    assert monitor.output_closed(ERR) == []


def test_an_exit_with_every_output_closed_finishes_at_once() -> None:
    monitor = Monitor(output_cap=None, wall_time=None, released=RELEASED, polled=False)
    assert monitor.child_exited(RELEASED) == [FINISH]
    assert monitor.child_exited(RELEASED) == []  # a second wakeup changes nothing


def test_nothing_is_killed_once_the_init_is_gone() -> None:
    """After the exit, an overflow, a limit or a cancel asks for no kill and names no
    reason: the command was not killed (the output is still cut at the cap)."""
    monitor = _monitor(cap=2)
    monitor.child_exited(RELEASED)
    allowed, actions = monitor.output(OUT, b"abc")
    assert (allowed, actions) == (b"ab", [])
    assert monitor.output_cap.truncated
    assert monitor.limit_reached("memory") == []
    assert monitor.cancel() == []
    assert monitor.observed.kill_reason is None
    assert not monitor.observed.cancelled


def test_cancel_kills_without_a_reason_and_the_result_says_cancelled() -> None:
    monitor = _monitor()
    assert monitor.cancel() == [Kill(None)]
    assert monitor.observed.cancelled
    assert monitor.observed.kill_reason is None
    result = _result(monitor)
    assert (result.outcome, result.error) == ("signaled", "cancelled by the caller")


# -- output -----------------------------------------------------------------------------------


def test_output_is_cut_exactly_at_the_cap_and_kills_once_cut() -> None:
    monitor = _monitor(cap=5)
    assert monitor.output(OUT, b"abc") == (b"abc", [])
    assert monitor.output(OUT, b"def") == (b"de", [Kill("output")])
    assert monitor.output(OUT, b"g") == (b"", [Kill("output")])
    assert monitor.final_output(OUT, b"h") == b""
    assert (monitor.output_cap.total, monitor.output_cap.truncated) == (5, True)


def test_final_output_counts_but_never_kills() -> None:
    monitor = _monitor(cap=4)
    assert monitor.final_output(ERR, b"abcdef") == b"abcd"
    assert monitor.observed.kill_reason is None


def test_out_of_memory_marks_are_looked_for_only_on_watched_streams() -> None:
    monitor = _monitor()
    monitor.output(OUT, b"MemoryError")
    assert not monitor.oom.seen
    monitor.output(ERR, b"...Memory")
    monitor.final_output(ERR, b"Error\n")  # across chunks, the drain included
    assert monitor.oom.seen


# -- status -----------------------------------------------------------------------------------


def test_status_messages_are_decoded_across_chunks_and_kept() -> None:
    monitor = _monitor()
    assert monitor.status_bytes(b"ready 0.25\nex") == ([Ready(0.25)], [])
    assert monitor.status_bytes(b"it 3") == ([], [])
    assert monitor.status_closed() == ([Exited(3)], [])  # the last line had no newline
    assert monitor.observed.messages == [Ready(0.25), Exited(3)]
    assert _result(monitor).exit_code == 3


def test_a_broken_status_channel_fails_closed() -> None:
    """A line that does not decode kills the tree; the result is a setup error and later
    bytes (however well-formed) are not believed."""
    monitor = _monitor()
    assert monitor.status_bytes(b"nonsense here\n") == ([], [Kill(None)])
    assert monitor.broken is not None
    assert monitor.status_bytes(b"exit 0\n") == ([], [])
    assert monitor.status_closed() == ([], [])
    result = _result(monitor)
    assert result.outcome == "setup_error"
    assert result.exit_code == EXIT_SETUP_FAILED
    assert "status channel broke" in (result.error or "")


def test_a_status_line_over_the_bound_breaks_the_channel() -> None:
    monitor = _monitor()
    assert monitor.status_bytes(b"x" * 5000) == ([], [Kill(None)])


def test_a_channel_broken_after_the_exit_asks_for_no_kill() -> None:
    monitor = _monitor()
    monitor.child_exited(RELEASED)
    assert monitor.status_bytes(b"bogus\n") == ([], [])
    assert monitor.broken is not None


# -- the result -------------------------------------------------------------------------------


def test_the_result_carries_what_was_observed() -> None:
    spec = SandboxSpec(argv=("cmd",), limits=Limits(output=4))
    monitor = Monitor(output_cap=4, wall_time=None, released=RELEASED, polled=False)
    monitor.add_output(OUT, oom_watched=False)
    monitor.output(OUT, b"abcdef")
    monitor.denial("ptrace")
    monitor.denial("ptrace")
    monitor.status_bytes(b"exit 0\n")
    result = monitor.result(
        spec,
        {},
        groups=GroupFacts(memory_oom_killed=False, pids_hit=True, cpus_throttled=True),
        init_wait_status=0,
        started=RELEASED - 0.5,
        now=RELEASED + 2.0,
        strerror=os.strerror,
    )
    assert result.outcome == "limit"
    assert result.error == "output limit reached"
    assert monitor.observed.denied == {"ptrace": 2}
    assert monitor.observed.pids_hit
    assert monitor.observed.cpus_throttled
    assert monitor.observed.setup_s == pytest.approx(0.5)
    assert monitor.observed.total_s == pytest.approx(2.5)


def test_a_setup_error_result() -> None:
    result = setup_error("no such bind", 0.1234567)
    assert (result.outcome, result.exit_code, result.error) == (
        "setup_error",
        EXIT_SETUP_FAILED,
        "no such bind",
    )
    assert result.durations.total_s == 0.123457


# -- every short sequence of events -----------------------------------------------------------

Event = Callable[[Monitor, float], list[object]]
EVENTS: dict[str, Event] = {
    "exit": lambda m, now: list(m.child_exited(now)),
    "out": lambda m, now: list(m.output(OUT, b"x" * 4)[1]),
    "close-out": lambda m, now: list(m.output_closed(OUT)),
    "close-err": lambda m, now: list(m.output_closed(ERR)),
    "limit": lambda m, now: list(m.limit_reached("cpu_time")),
    "cancel": lambda m, now: list(m.cancel()),
    "status": lambda m, now: list(m.status_bytes(b"exit 1\n")[1]),
    "bad-status": lambda m, now: list(m.status_bytes(b"?\n")[1]),
    "tick": lambda m, now: list(m.deadline_reached(now)),
}


def _check_invariants(names: tuple[str, ...]) -> None:
    monitor = _monitor(cap=6, wall=0.3, polled=True)
    finishes = 0
    exited_at: float | None = None
    for step, name in enumerate(names):
        now = RELEASED + 0.2 * step
        actions = EVENTS[name](monitor, now)
        finishes += sum(isinstance(action, Finish) for action in actions)
        if name == "exit" and exited_at is None:
            exited_at = now
        if exited_at is not None:
            assert not [a for a in actions if isinstance(a, Kill)], (names, step)
        deadline = monitor.next_deadline()
        if monitor.phase == "finished":
            assert deadline is None
        if exited_at is not None and monitor.phase == "draining":
            assert deadline == exited_at + DRAIN_GRACE_S
    assert finishes <= 1, names
    assert (finishes == 1) == (monitor.phase == "finished"), names
    if finishes:
        assert exited_at is not None, names  # only an exited init finishes
    if monitor.observed.kill_reason is not None:
        assert monitor.observed.kill_reason in ("wall_time", "output", "cpu_time")


def test_invariants_hold_over_every_sequence_of_four_events() -> None:
    """Finish at most once and only after the exit; no kill once the init is gone; no
    deadline once finished; while draining, the deadline is the grace's end."""
    for names in itertools.product(EVENTS, repeat=4):
        _check_invariants(names)


@given(st.lists(st.sampled_from(sorted(EVENTS)), max_size=24))
def test_invariants_hold_over_longer_sequences(names: list[str]) -> None:
    _check_invariants(tuple(names))
