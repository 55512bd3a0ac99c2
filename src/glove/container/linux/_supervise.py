"""Supervising a running sandbox from one thread: the blocking shell of ``glove exec``.

:func:`run` launches a spec and drives it to a :class:`SandboxResult` with a selector over
the init's pidfd, the status pipe, the seccomp listener, the output pipes (or the PTY
master) and the host's stdin. The wall-clock and CPU watchdogs and the output cap all end
the sandbox the same way: SIGKILL to the init of its pid namespace, which takes the whole
tree (setsid'd, double-forked and stopped descendants included). Output is counted as it is
passed on and cut exactly at the cap; once the init is gone, draining the pipes is bounded
by a short grace period, so an orphan holding a pipe cannot hang the launcher.

It is a thin driver of the monitor core (:mod:`glove.container._monitor`), as the asyncio
shell is: it reads the descriptors and the clock, tells the core what happened and does the
actions it gets back; the select timeout is the core's next deadline. The descriptor steps
both shells share are in :mod:`._events`. This shell is for the ``glove exec`` CLI; an
actor owns a sandbox through :mod:`._async`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import threading
import time
from collections.abc import Mapping
from typing import Final

from glove.container._filter import OutputFilter
from glove.container._monitor import (
    CPU_POLL_INTERVAL_S,
    DRAIN_GRACE_S,
    MAX_PENDING_OUTPUT_BYTES,
    MAX_STDIN_BUFFER_BYTES,
    SINK_WRITE_BYTES,
    Action,
    Monitor,
    setup_error,
)
from glove.container._result import SandboxResult
from glove.container._spec import SandboxSpec
from glove.container.linux._events import (
    READ_CHUNK_BYTES,
    ListenerGone,
    Wiring,
    adopt_terminal,
    answer_denial,
    carry_out,
    drain_status,
    group_facts,
    read_output,
    read_status,
    receive_listener,
    wire_stdio,
    write_pending,
)
from glove.container.linux._jobs import HOST_SIGNALS, suspend
from glove.container.linux._launch import SandboxProcess, launch
from glove.container.linux._pty import DEFAULT_WINSIZE, RawTerminal, get_winsize, host_terminal
from glove.container.linux._unix_gate import ConnectGate

__all__ = [  # the constants live in the core; these names stay importable from here
    "CPU_POLL_INTERVAL_S",
    "DRAIN_GRACE_S",
    "FORWARDED_HOST_SIGNALS",
    "MAX_PENDING_OUTPUT_BYTES",
    "MAX_STDIN_BUFFER_BYTES",
    "SINK_WRITE_BYTES",
    "run",
]

#: Host signals passed on to the sandbox while ``run`` supervises from the main thread
#: (:mod:`._jobs`: TSTP stops the tree and then the launcher).
FORWARDED_HOST_SIGNALS: Final = HOST_SIGNALS


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            selectors.select.select([], [fd], [], 1.0)  # type: ignore[attr-defined]
            continue
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EBADF, errno.EIO):
                return  # the reader went away; accounting still counts what was sent
            raise
        view = view[written:]


class _Supervisor:
    """The select loop for one sandbox (one instance per :func:`run`)."""

    def __init__(
        self,
        spec: SandboxSpec,
        stdin: int,
        stdout: int,
        stderr: int,
        filters: Mapping[int, OutputFilter] | None = None,
    ) -> None:
        self.spec = spec
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.filters = dict(filters or {})
        self.monitor: Monitor | None = None
        self.cancel_fd: int | None = None
        self.listener: int | None = None
        self.gate: ConnectGate | None = None
        self.selector = selectors.DefaultSelector()
        self.sinks: dict[int, int] = {}
        self.oom_stream: int | None = None
        self.pending: dict[int, bytearray] = {}
        self.sink_watched: set[int] = set()
        self.dead_sinks: set[int] = set()
        self.reading: set[int] = set()
        self.paused: set[int] = set()
        self.stdin_target: int | None = None
        self.stdin_close_at_eof = False
        self.stdin_buffer = bytearray()
        self.stdin_eof = False
        self.stdin_writing = False

    def wire(self, wiring: Wiring) -> None:
        """Route each output to its host sink and pump host stdin as the wiring says."""
        for fd, stream in wiring.outputs.items():
            self.sinks[fd] = self.stderr if stream == "stderr" else self.stdout
            if stream in ("stderr", "pty"):
                self.oom_stream = fd
        if wiring.stdin_target is not None:
            self.stdin_target = wiring.stdin_target
            self.stdin_close_at_eof = wiring.close_target_at_eof
            wiring.stdin_target = None  # the supervisor owns (and closes) it now

    def _pump(self, monitor: Monitor, fd: int) -> tuple[bool, list[Action]]:
        """Move one chunk from a sandbox output fd; (False at end of stream, the actions)."""
        chunk = read_output(fd)
        if chunk is None:
            return True, []
        if not chunk:
            return False, monitor.output_closed(fd)
        allowed, actions = monitor.output(fd, chunk)
        if allowed:
            self._queue(self.sinks[fd], allowed)
        return True, actions

    def _filtered(self, sink: int, data: bytes) -> bytes:
        """``data`` as ``sink``'s filter lets it out (all of it without a filter)."""
        flt = self.filters.get(sink)
        return data if flt is None else flt.feed(data)

    def _queue(self, sink: int, data: bytes) -> None:
        """Queue output for ``sink``; written when it is writable so a stalled reader of
        the launcher's output never stalls the watchdogs."""
        data = self._filtered(sink, data)
        if sink in self.dead_sinks or not data:
            return
        if sink not in self.sink_watched:
            try:
                self.selector.register(sink, selectors.EVENT_WRITE, "sink")
            except (ValueError, OSError):
                _write_all(sink, data)  # a regular file or device: writes do not stall
                return
            self.sink_watched.add(sink)
        pending = self.pending.setdefault(sink, bytearray())
        pending += data
        if len(pending) >= MAX_PENDING_OUTPUT_BYTES:
            for out_fd, target in self.sinks.items():
                if target == sink and out_fd in self.reading:
                    self.selector.unregister(out_fd)
                    self.reading.discard(out_fd)
                    self.paused.add(out_fd)

    def _sink_writable(self, sink: int) -> None:
        pending = self.pending.get(sink, bytearray())
        alive = write_pending(sink, pending)
        if alive is None:
            return
        if not alive:
            self.dead_sinks.add(sink)
        if not pending:
            self.selector.unregister(sink)
            self.sink_watched.discard(sink)
        if len(pending) < MAX_PENDING_OUTPUT_BYTES:
            for out_fd in [fd for fd in self.paused if self.sinks[fd] == sink]:
                self.paused.discard(out_fd)
                self.selector.register(out_fd, selectors.EVENT_READ, "output")
                self.reading.add(out_fd)

    def flush(self, monitor: Monitor, outputs: list[int]) -> None:
        """After the sandbox is gone: read what is left in the pipes, write everything out."""
        for fd in outputs:
            with contextlib.suppress(OSError):
                while chunk := os.read(fd, READ_CHUNK_BYTES):
                    allowed = monitor.final_output(fd, chunk)
                    if not allowed:
                        break
                    sink = self.sinks[fd]
                    self.pending.setdefault(sink, bytearray()).extend(self._filtered(sink, allowed))
        for sink, flt in self.filters.items():  # the output ended inside a sequence
            self.pending.setdefault(sink, bytearray()).extend(flt.close())
        for sink, pending in self.pending.items():
            if sink not in self.dead_sinks and pending:
                _write_all(sink, bytes(pending))
            pending.clear()

    def _stdin_readable(self) -> None:
        try:
            chunk = os.read(self.stdin, READ_CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.selector.unregister(self.stdin)
            self.stdin_eof = True
            self._stdin_maybe_close()
            return
        self.stdin_buffer += chunk
        if self.stdin_target is not None and not self.stdin_writing:
            self.selector.register(self.stdin_target, selectors.EVENT_WRITE, "stdin-target")
            self.stdin_writing = True
        if len(self.stdin_buffer) >= MAX_STDIN_BUFFER_BYTES:
            self.selector.unregister(self.stdin)  # backpressure: resume once drained

    def _stdin_writable(self) -> None:
        target = self.stdin_target
        if target is None:
            return
        try:
            written = os.write(target, self.stdin_buffer)
        except BlockingIOError:
            return
        except OSError:
            # The command closed its stdin: nothing more will be read; stop pumping.
            self.stdin_buffer.clear()
            written = 0
            if not self.stdin_eof:
                with contextlib.suppress(KeyError, ValueError):
                    self.selector.unregister(self.stdin)
                self.stdin_eof = True
        was_full = len(self.stdin_buffer) >= MAX_STDIN_BUFFER_BYTES
        del self.stdin_buffer[:written]
        if not self.stdin_buffer:
            self.selector.unregister(target)
            self.stdin_writing = False
            self._stdin_maybe_close()
        if was_full and len(self.stdin_buffer) < MAX_STDIN_BUFFER_BYTES and not self.stdin_eof:
            self.selector.register(self.stdin, selectors.EVENT_READ, "stdin")

    def _stdin_maybe_close(self) -> None:
        if self.stdin_eof and not self.stdin_buffer and self.stdin_close_at_eof:
            self.close_stdin_target()

    def close_stdin_target(self) -> None:
        """Close the pump's target (idempotent)."""
        target, self.stdin_target = self.stdin_target, None
        if target is not None:
            if self.stdin_writing:
                with contextlib.suppress(KeyError, ValueError):
                    self.selector.unregister(target)
                self.stdin_writing = False
            with contextlib.suppress(OSError):
                os.close(target)

    def _receive_listener(self, channel: int) -> None:
        self.selector.unregister(channel)
        self.listener = receive_listener(channel)
        if self.listener is not None:
            self.selector.register(self.listener, selectors.EVENT_READ, "notify")

    def _answer_denials(self, monitor: Monitor, listener: int) -> None:
        try:
            denial = answer_denial(listener, self.gate)
        except ListenerGone:
            self.selector.unregister(listener)
            return
        if denial is not None:
            monitor.denial(*denial)
        self._record_refused_connects(monitor)

    def _record_refused_connects(self, monitor: Monitor) -> None:
        if self.gate is not None:
            for args in self.gate.take_refused():
                monitor.denial("connect", args)

    def _watch(self, monitor: Monitor, process: SandboxProcess, outputs: list[int]) -> None:
        """Register every descriptor of the sandbox with the selector (and the outputs with
        the monitor)."""
        sel = self.selector
        if process.unix_gate:
            self.gate = ConnectGate()
        sel.register(process.pidfd, selectors.EVENT_READ, "exit")
        if self.cancel_fd is not None:
            sel.register(self.cancel_fd, selectors.EVENT_READ, "cancel")
        if process.notify_channel >= 0:
            sel.register(process.notify_channel, selectors.EVENT_READ, "notify-channel")
        os.set_blocking(process.status_fd, False)
        sel.register(process.status_fd, selectors.EVENT_READ, "status")
        for fd in outputs:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, "output")
            self.reading.add(fd)
            monitor.add_output(fd, oom_watched=fd == self.oom_stream)
        if self.stdin_target is not None:
            try:
                sel.register(self.stdin, selectors.EVENT_READ, "stdin")
            except (ValueError, OSError, PermissionError):
                # Not pollable (a regular file is always readable, epoll refuses it).
                self.stdin_eof = True
                self._stdin_maybe_close()

    def supervise(  # noqa: PLR0912 - one select loop; branches are its event kinds
        self, process: SandboxProcess, outputs: list[int]
    ) -> Monitor:
        """Run the loop until the monitor says the sandbox is over; return the monitor."""
        sel = self.selector
        limits = self.spec.limits
        monitor = self.monitor = Monitor(
            output_cap=limits.output,
            wall_time=limits.wall_time,
            released=process.released,
            polled=process.cgroups is not None or process.nproc_limit is not None,
        )
        self._watch(monitor, process, outputs)
        finished = False
        while not finished:
            for key, _ in sel.select(monitor.timeout(time.monotonic())):
                fd, role = int(key.fd), key.data
                actions: list[Action] = []
                if role == "exit":
                    process.wait()
                    sel.unregister(fd)
                    actions = monitor.child_exited(time.monotonic())
                elif role == "status":
                    more, actions = read_status(monitor, process, fd)
                    if not more:
                        sel.unregister(fd)
                elif role == "output":
                    more, actions = self._pump(monitor, fd)
                    if not more:
                        sel.unregister(fd)
                        self.reading.discard(fd)
                elif role == "sink":
                    self._sink_writable(fd)
                elif role == "notify-channel":
                    self._receive_listener(fd)
                elif role == "notify":
                    self._answer_denials(monitor, fd)
                elif role == "cancel":
                    sel.unregister(fd)
                    actions = monitor.cancel()
                elif role == "stdin":
                    self._stdin_readable()
                elif role == "stdin-target":
                    self._stdin_writable()
                finished |= carry_out(monitor, process, actions)
            finished |= carry_out(monitor, process, monitor.deadline_reached(time.monotonic()))
        drain_status(monitor, process)
        return monitor

    def result(self, monitor: Monitor, process: SandboxProcess, started: float) -> SandboxResult:
        """Turn what was observed into the structured result (the pure core decides)."""
        self._record_refused_connects(monitor)
        return monitor.result(
            self.spec,
            process.plans,
            groups=group_facts(process),
            init_wait_status=process.reaped_status,
            started=started,
            now=time.monotonic(),
            strerror=os.strerror,
        )


@contextlib.contextmanager
def _forward_host_signals(process: SandboxProcess, terminal: RawTerminal | None):  # type: ignore[no-untyped-def]
    """Pass the operator's signals on to the sandbox while the block runs (:mod:`._jobs`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum: int, _frame: object) -> None:
        if signum == signal.SIGTSTP:
            suspend(process.send_signal, terminal)
        else:
            process.send_signal(signum)

    for signum in FORWARDED_HOST_SIGNALS:
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def run(
    spec: SandboxSpec,
    *,
    stdin: int = 0,
    stdout: int = 1,
    stderr: int = 2,
    cancel_fd: int | None = None,
    filters: Mapping[int, OutputFilter] | None = None,
) -> SandboxResult:
    """Run ``spec`` to completion and return its structured result.

    The command's stdout and stderr (or its PTY) are passed on to ``stdout``/``stderr``
    through the launcher, which counts them against the output limit; output bound for a
    descriptor in ``filters`` passes through its filter first (``glove exec`` on a
    terminal: :class:`glove.session.TerminalFilter`). ``stdin`` is given to
    the command directly when it is a pipe or socket, and pumped through a pipe (or into the
    PTY) otherwise. A sandbox that cannot be built returns a ``setup_error`` result; a spec
    that is wrong before anything starts raises. When ``cancel_fd`` becomes readable (another
    thread wrote to a pipe) the whole sandbox is killed and the result says so.

    Raises:
        LimitRefused: a requested limit cannot be enforced as asked.
        SpecError: the spec is invalid on this host (missing bind source, ...).
        UnsupportedPlatform: the machine lacks seccomp or namespaces.
    """
    from glove.container.errors import SandboxSetupError

    started = time.monotonic()
    supervisor = _Supervisor(spec, stdin, stdout, stderr, filters)
    supervisor.cancel_fd = cancel_fd
    wiring: Wiring | None = None
    try:
        wiring = wire_stdio(spec, stdin)
        try:
            process = launch(
                spec,
                wiring.child,
                report_violations=True,
                terminal_size=get_winsize(stdin) or DEFAULT_WINSIZE,
            )
        except SandboxSetupError as exc:
            return setup_error(str(exc), time.monotonic() - started)
        wiring.close_child_ends()
        if spec.pty:
            adopt_terminal(wiring, process, pump_stdin=True)
        supervisor.wire(wiring)
        outputs = list(wiring.outputs)
        try:
            with contextlib.ExitStack() as stack:
                terminal = None
                if wiring.master is not None:
                    terminal = stack.enter_context(host_terminal(stdin, wiring.master))
                stack.enter_context(_forward_host_signals(process, terminal))
                monitor = supervisor.supervise(process, outputs)
            supervisor.flush(monitor, outputs)
            return supervisor.result(monitor, process, started)
        finally:
            process.close()
    finally:
        supervisor.close_stdin_target()
        supervisor.selector.close()
        if supervisor.gate is not None:
            supervisor.gate.close()
        if supervisor.listener is not None:
            os.close(supervisor.listener)
        if wiring is not None:
            wiring.close()
