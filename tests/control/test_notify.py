"""sd_notify: the protocol core, and the real gloved heard by a real datagram listener.

No service manager is involved here: :class:`glove.testing.NotifyListener` is the same
kind of socket systemd reads (``SO_PASSCRED``, sender pid from the kernel). The run under a
real ``systemd --user`` is in ``tests/host/test_daemon_systemd.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from glove.control import NotifyError, call
from glove.control._notify import Notifier, ServiceNotifier
from glove.control._notify_wire import (
    MAX_MESSAGE_BYTES,
    clean_status,
    decode_message,
    encode_message,
    parse_notify_socket,
    watchdog_interval_s,
)
from glove.testing import Notification, NotifyListener, pings

REPO = Path(__file__).resolve().parents[2]
START_DEADLINE_S = 15.0
#: How long to wait for an expected ping or tick: a hang bound, generous for a loaded host.
EVENT_DEADLINE_S = 30.0


# -- the sans-IO core ----------------------------------------------------------------------------


def test_notify_socket_forms() -> None:
    """A path stays a path, '@name' becomes an abstract address, anything else is refused."""
    assert parse_notify_socket("/run/user/1000/systemd/notify") == "/run/user/1000/systemd/notify"
    assert parse_notify_socket("@glove/notify") == b"\0glove/notify"
    for bad in ("", "@", "relative/notify", "vsock:2:1234", "/" + "x" * 107, "@" + "y" * 108):
        with pytest.raises(NotifyError):
            parse_notify_socket(bad)


def test_undecodable_environment_bytes_are_carried_not_crashed_on() -> None:
    """os.environ hands undecodable bytes over as surrogate escapes; they reach the address
    as the original bytes (a fuzzer found the crash this pins)."""
    assert parse_notify_socket("@n\udce9") == b"\0n\xe9"
    assert parse_notify_socket("/tmp/\udce9") == "/tmp/\udce9"


def test_the_fuzz_target_holds_on_its_seeds_and_a_bounded_slice() -> None:
    """fuzz/notify_env.py replays its seeds and a second of mutations cleanly."""
    out = subprocess.run(
        [sys.executable, str(REPO / "fuzz" / "notify_env.py"), "--replay", "--seconds", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "no contract violation" in out.stdout


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [
        (None, None, None),  # no watchdog asked for
        ("2000000", None, 2.0),
        ("2000000", "4242", 2.0),  # our pid
        ("2000000", "4243", None),  # another process's watchdog: do not ping
        (None, "4242", None),
    ],
)
def test_watchdog_interval_table(usec: str | None, pid: str | None, expected: float | None) -> None:
    """WATCHDOG_USEC/WATCHDOG_PID behave as sd_watchdog_enabled(3) says."""
    assert watchdog_interval_s(usec, pid, own_pid=4242) == expected


@pytest.mark.parametrize(
    ("usec", "pid"),
    [("-1", None), ("0", None), ("abc", None), ("1.5", None), ("", None), ("2" * 30, None),
     ("1000", "x"), ("1000", "0"), ("1000", "-5")],
)  # fmt: skip
def test_watchdog_values_that_are_refused(usec: str, pid: str | None) -> None:
    """A watchdog variable that is set but malformed is an error, never a silent no-op."""
    with pytest.raises(NotifyError):
        watchdog_interval_s(usec, pid, own_pid=1)


def test_messages_encode_one_field_per_line_and_refuse_injection() -> None:
    """Fields round-trip; a newline or NUL in a value, a bad name or an oversize datagram is
    refused; clean_status flattens free text to one bounded line."""
    data = encode_message([("READY", "1"), ("STATUS", "2 sessions running")])
    assert data == b"READY=1\nSTATUS=2 sessions running\n"
    assert decode_message(data) == {"READY": "1", "STATUS": "2 sessions running"}
    for fields in (
        [("STATUS", "ok\nREADY=1")],
        [("STATUS", "a\0b")],
        [("ready", "1")],
        [("X-Y", "1")],
        [],
        [("STATUS", "x" * MAX_MESSAGE_BYTES)],
    ):
        with pytest.raises(NotifyError):
            encode_message(fields)
    assert clean_status("one\ntwo\r\x00three") == "one two three"
    assert len(clean_status("z" * 10_000)) == 200


def test_from_environ_reads_and_unsets_the_variables() -> None:
    """The variables are consumed (children cannot inherit them) and malformed ones refused."""
    env = {"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "77", "KEEP": "1"}
    notifier = Notifier.from_environ(env, pid=77)
    assert notifier.address == b"\0x"
    assert notifier.watchdog_interval_s == 1.0
    assert env == {"KEEP": "1"}
    assert not Notifier.from_environ({}).enabled
    with pytest.raises(NotifyError):
        Notifier.from_environ({"WATCHDOG_USEC": "1000000"})  # a watchdog with nowhere to ping
    with pytest.raises(NotifyError):
        Notifier.from_environ({"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "soon"})


def test_a_disabled_notifier_sends_nothing() -> None:
    """Without NOTIFY_SOCKET every call is a no-op that reports it sent nothing."""
    notifier = Notifier()
    assert notifier.send([("READY", "1")]) is False
    assert asyncio.run(notifier.ready("x")) is False
    assert notifier.stopping() is False


def test_a_gone_manager_is_a_typed_error(tmp_path: Path) -> None:
    """Sending to a socket nobody listens on raises NotifyError; stopping() only logs it."""
    notifier = Notifier(str(tmp_path / "nobody"))
    try:
        with pytest.raises(NotifyError, match="cannot notify"):
            notifier.send([("READY", "1")])
        assert notifier.stopping() is False
    finally:
        notifier.close()


async def _until(condition: Callable[[], bool], within_s: float = EVENT_DEADLINE_S) -> None:
    """Let the loop run until ``condition()`` holds (a hang bound, not a measurement)."""
    async with asyncio.timeout(within_s):
        while not condition():
            await asyncio.sleep(0.01)


def _until_received(
    listener: NotifyListener, condition: Callable[[list[Notification]], bool]
) -> list[Notification]:
    """Wait until what ``listener`` received satisfies ``condition``; return it."""
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while not condition(notes := listener.received):
        assert time.monotonic() < deadline, notes
        time.sleep(0.02)
    return notes


async def test_service_notifier_withholds_pings_while_unhealthy() -> None:
    """The healthy() hook withholds WATCHDOG=1 while it names a problem; STATUS changes
    are sent once each. Counted by the actor's ticks, not timed: no ping between the first
    withheld tick and the problem's end, however late each tick runs."""
    problem: list[str | None] = [None]
    state = ["idle"]
    with NotifyListener.abstract() as listener:
        notifier = Notifier(listener.address, watchdog_interval_s=0.2)
        actor = ServiceNotifier(notifier, status=lambda: state[0], healthy=lambda: problem[0])
        task = asyncio.get_running_loop().create_task(actor.run())
        await _until(lambda: actor.pings >= 2)
        problem[0] = "journal writer heartbeat is 40 s old"
        state[0] = "busy"
        await _until(lambda: actor.withheld >= 1)  # a ping already in flight has landed
        pinged = actor.pings
        await _until(lambda: actor.withheld >= 3)
        assert actor.pings == pinged, "a ping was sent while unhealthy"
        problem[0] = None
        await _until(lambda: actor.pings > pinged)  # and they resume
        actor.stop()
        await asyncio.gather(task, return_exceptions=True)
        notifier.close()
        notes = _until_received(listener, lambda notes: len(pings(notes)) >= actor.pings)
    assert len(pings(notes)) == actor.pings >= 3
    statuses = [n.fields["STATUS"] for n in notes if "STATUS" in n.fields]
    assert statuses == ["idle", "busy"]


# -- the real gloved ------------------------------------------------------------------------------


def _spawn(
    tmp_path: Path, extra_env: dict[str, str], *, script: str | None = None
) -> subprocess.Popen[bytes]:
    runtime = tmp_path / "run" / "glove"
    entry = [script] if script else ["-m", "glove.daemon"]
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    return subprocess.Popen(
        [sys.executable, *entry, "--runtime-dir", str(runtime)],
        env={**env, **extra_env, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )


def _stop(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    return code, err


@pytest.fixture(params=["path", "abstract"])
def listener(request: pytest.FixtureRequest) -> Iterator[NotifyListener]:
    """A notification listener on a socket file or on an abstract name."""
    made = NotifyListener.at_path() if request.param == "path" else NotifyListener.abstract()
    with made:
        yield made


def _ready(listener: NotifyListener, proc: subprocess.Popen[bytes]) -> None:
    try:
        listener.wait_for(lambda n: n.fields.get("READY") == "1", timeout=START_DEADLINE_S)
    except TimeoutError:
        _code, err = _stop(proc)
        raise AssertionError(f"gloved sent no READY=1: {err}") from None


def test_ready_comes_from_gloved_once_its_socket_answers(
    tmp_path: Path, listener: NotifyListener
) -> None:
    """READY=1 arrives from gloved's own pid with a STATUS line, and a request sent the
    moment it arrives is answered (the socket was bound before READY); SIGTERM then sends
    STOPPING=1 and gloved exits 0."""
    proc = _spawn(tmp_path, listener.environ())
    try:
        _ready(listener, proc)
        health = call(tmp_path / "run" / "glove" / "gloved.sock", "health", timeout=5)
        assert health["pid"] == proc.pid
        ready = listener.wait_for(lambda n: "READY" in n.fields, timeout=1)
        assert ready.pid == proc.pid
        assert ready.fields["STATUS"] == "0 sessions running"
    finally:
        code, err = _stop(proc)
    assert code == 0, err
    stopping = listener.wait_for(lambda n: n.fields.get("STOPPING") == "1", timeout=5)
    assert stopping.pid == proc.pid
    assert not pings(listener.received)  # no WATCHDOG_USEC: no pings


def test_watchdog_pings_come_from_gloved_again_and_again(tmp_path: Path) -> None:
    """With WATCHDOG_USEC=600000 gloved's own pid pings again and again (how regularly, at
    about half the interval, is a measurement: benchmarks/control/bench_watchdog.py)."""
    with NotifyListener.abstract() as listener:
        proc = _spawn(tmp_path, listener.environ(watchdog_usec=600_000))
        try:
            _ready(listener, proc)
            notes = _until_received(listener, lambda notes: len(pings(notes)) >= 6)
        finally:
            _stop(proc)
    assert len(pings(notes, pid=proc.pid)) == len(pings(notes)) >= 6


def test_no_pings_when_the_watchdog_belongs_to_another_process(tmp_path: Path) -> None:
    """WATCHDOG_PID naming another process means gloved must not ping (it still says READY)."""
    with NotifyListener.abstract() as listener:
        proc = _spawn(tmp_path, listener.environ(watchdog_usec=200_000, watchdog_pid=1))
        try:
            _ready(listener, proc)
            time.sleep(1.0)
        finally:
            _stop(proc)
        assert pings(listener.received) == []


def _pings_of(
    listener: NotifyListener, proc: subprocess.Popen[bytes], at_least: int
) -> list[float]:
    """Wait for ``at_least`` pings from ``proc``; all of its pings so far."""
    notes = _until_received(listener, lambda notes: len(pings(notes, proc.pid)) >= at_least)
    return pings(notes, proc.pid)


def _gap_then(times: list[float], gap_s: float, then: int) -> bool:
    """Whether ``times`` hold a silence of at least ``gap_s`` followed by ``then`` pings."""
    return any(
        b - a >= gap_s and len(times) - i - 1 >= then
        for i, (a, b) in enumerate(itertools.pairwise(times))
    )


def test_a_stalled_loop_stops_the_pings(tmp_path: Path) -> None:
    """Blocking gloved's event loop for 7.5x the watchdog interval stops the pings for that
    long, and they resume once the loop runs again: a wedged daemon gets restarted. The
    silence is bounded from below only (a loaded host only lengthens it); a pinger that did
    not depend on the loop would leave no gap past half the interval."""
    interval_s, stall_s = 0.4, 3.0
    with NotifyListener.abstract() as listener:
        proc = _spawn(
            tmp_path,
            {**listener.environ(watchdog_usec=int(interval_s * 1e6)),
             "GLOVE_TEST_STALL_S": str(stall_s)},
            script=str(REPO / "tests" / "control" / "stalling_gloved.py"),
        )  # fmt: skip
        try:
            _ready(listener, proc)
            before = len(_pings_of(listener, proc, at_least=2))
            proc.send_signal(signal.SIGUSR2)
            # The silence (at least half the stall, whatever the host's load did to the
            # pings around it), then two pings after it: the loop runs again.
            notes = _until_received(
                listener, lambda notes: _gap_then(pings(notes, proc.pid), stall_s / 2, then=2)
            )
        finally:
            _stop(proc)
    times = pings(notes, pid=proc.pid)
    assert before >= 2
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) >= stall_s / 2 > interval_s  # the manager would have seen it expire


def test_a_stopped_process_stops_the_pings(tmp_path: Path) -> None:
    """SIGSTOP (what a hung process looks like from outside) silences the watchdog for as
    long as it lasts (bounded from below: load only lengthens it), and SIGCONT resumes it."""
    stop_s = 3.0
    with NotifyListener.abstract() as listener:
        proc = _spawn(tmp_path, listener.environ(watchdog_usec=300_000))
        try:
            _ready(listener, proc)
            _pings_of(listener, proc, at_least=2)
            proc.send_signal(signal.SIGSTOP)
            time.sleep(stop_s)  # how long it is stopped: ours to choose, not measured
            proc.send_signal(signal.SIGCONT)
            notes = _until_received(
                listener, lambda notes: _gap_then(pings(notes, proc.pid), stop_s / 2, then=2)
            )
        finally:
            _stop(proc)
    assert _gap_then(pings(notes, proc.pid), stop_s / 2, then=2)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NOTIFY_SOCKET": "vsock:2:999"}, "neither an absolute path"),
        ({"NOTIFY_SOCKET": "@glove-x", "WATCHDOG_USEC": "soon"}, "WATCHDOG_USEC='soon'"),
    ],
)
def test_malformed_manager_settings_refuse_start(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    """gloved refuses to start (exit 2, one clear line, no traceback) rather than run
    unwatched under a manager whose settings it cannot honour."""
    proc = _spawn(tmp_path, env)
    try:
        proc.wait(timeout=START_DEADLINE_S)
    finally:
        code, err = _stop(proc)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_an_unreachable_manager_does_not_stop_gloved_serving(tmp_path: Path) -> None:
    """A NOTIFY_SOCKET nobody listens on is logged; gloved keeps serving its socket."""
    proc = _spawn(tmp_path, {"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")})
    sock = tmp_path / "run" / "glove" / "gloved.sock"
    deadline = time.monotonic() + START_DEADLINE_S
    while not sock.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    try:
        time.sleep(0.3)
        assert call(sock, "health", timeout=5)["status"] == "ok"
    finally:
        code, err = _stop(proc)
    assert code == 0
    assert "cannot notify the service manager" in err
