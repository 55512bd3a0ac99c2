"""Supervising a running sandbox: output accounting, the watchdog, and the result.

:func:`run` launches a spec and drives it to a :class:`SandboxResult` from one thread with a
selector over the init's pidfd, the status pipe, the output pipes (or the PTY master) and the
host's stdin in PTY mode. The wall-clock and CPU watchdogs and the output cap all end the
sandbox the same way: SIGKILL to the init of its pid namespace, which takes the whole tree
(setsid'd, double-forked and stopped descendants included). Output is counted as it is
passed on and cut exactly at the cap; once the init is gone, draining the pipes is bounded
by a short grace period, so an orphan holding a pipe cannot hang the launcher.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import socket
import stat
import threading
import time
from typing import Final, NamedTuple

from glove.container._limits import MECH_RLIMIT_AS, MECH_RLIMIT_CPU
from glove.container._result import (
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    EXIT_SETUP_FAILED,
    Durations,
    LimitReport,
    Outcome,
    OutputReport,
    RetainedReport,
    SandboxResult,
    Usage,
    exit_code_for_signal,
)
from glove.container._spec import SandboxSpec
from glove.container.linux import _syscalls as sc
from glove.container.linux._launch import SandboxProcess, launch
from glove.container.linux._mounts import DEFAULT_SCRATCH_BYTES
from glove.container.linux._pty import host_terminal, open_sandbox_pty
from glove.container.linux._seccomp import syscall_name

#: Bytes read from a pipe or the PTY per call.
READ_CHUNK_BYTES: Final = 64 * 1024
#: How often the CPU watchdog samples the group's usage.
CPU_POLL_INTERVAL_S: Final = 0.05
#: How long output is still drained after the init has exited.
DRAIN_GRACE_S: Final = 0.5
#: Largest status-pipe transcript kept (it holds a few short lines).
MAX_STATUS_BYTES: Final = 16 * 1024
#: Scratch usage within this many bytes of the size counts as reaching the disk limit.
DISK_HIT_SLACK_BYTES: Final = 64 * 1024
#: Output held for a slow reader before the sandbox's output pipes stop being read.
MAX_PENDING_OUTPUT_BYTES: Final = 1024 * 1024
#: Bytes written to a writable sink at once (PIPE_BUF: a pipe write this size never blocks).
SINK_WRITE_BYTES: Final = 4096
#: Distinct denied syscall names kept in a result (a hostile command could vary them).
MAX_DENIED_NAMES: Final = 64
#: Host stdin bytes buffered for a command that is not reading yet.
MAX_STDIN_BUFFER_BYTES: Final = 256 * 1024
#: Host signals passed on to the sandbox while ``run`` supervises from the main thread.
FORWARDED_HOST_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


#: What a process prints when an allocation fails (a per-process RLIMIT_AS is invisible from
#: outside; its trace on stderr is the evidence that the memory limit was reached).
OUT_OF_MEMORY_MARKS: Final = (
    b"MemoryError",
    b"Cannot allocate memory",
    b"out of memory",
    b"std::bad_alloc",
    b"heap out of memory",
)
_MARK_OVERLAP: Final = max(len(mark) for mark in OUT_OF_MEMORY_MARKS) - 1


class _OomWatch:
    """Looks for :data:`OUT_OF_MEMORY_MARKS` in a stream, across chunk boundaries."""

    def __init__(self) -> None:
        self.seen = False
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        if self.seen:
            return
        window = self._tail + chunk
        self.seen = any(mark in window for mark in OUT_OF_MEMORY_MARKS)
        self._tail = window[-_MARK_OVERLAP:]


class _Output:
    """Counts bytes passed from the sandbox to the caller and enforces the cap."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.total = 0
        self.truncated = False

    def admit(self, data: bytes) -> bytes:
        """Return the part of ``data`` that fits under the cap (sets ``truncated`` if cut)."""
        allowed = data
        if self.cap is not None and self.total + len(data) > self.cap:
            allowed = data[: max(0, self.cap - self.total)]
            self.truncated = True
        self.total += len(allowed)
        return allowed


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


def _parse_status(transcript: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in transcript.decode(errors="replace").splitlines():
        key, _, value = line.partition(" ")
        fields.setdefault(key, value)
    return fields


def _usage(fields: dict[str, str]) -> Usage:
    """The ``usage`` and ``disk`` status lines of the init, as numbers."""
    disk: int | None = None
    with contextlib.suppress(KeyError, ValueError):
        disk = int(fields["disk"])
    try:
        user, system, rss = fields["usage"].split()
        return Usage(float(user), float(system), int(rss), disk)
    except (KeyError, ValueError):
        return Usage(disk_bytes=disk)


class _Verdict(NamedTuple):
    outcome: Outcome
    exit_code: int
    signal: int | None
    error: str | None
    violation: str | None = None


class _Supervisor:
    """The select loop for one sandbox (one instance per :func:`run`)."""

    def __init__(self, spec: SandboxSpec, stdin: int, stdout: int, stderr: int) -> None:
        self.spec = spec
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.output = _Output(spec.limits.output)
        #: The stream (stderr, or the PTY) watched for an allocation failure, if memory is
        #: limited per process; set by ``_wire_stdio``.
        self.oom_stream: int | None = None
        self.oom = _OomWatch()
        self.kill_reason: str | None = None
        self.cancel_fd: int | None = None
        self.listener: int | None = None
        self.denied: dict[str, int] = {}
        self.cancelled = False
        self.status = b""
        self.selector = selectors.DefaultSelector()
        self.sinks: dict[int, int] = {}
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

    def _kill(self, process: SandboxProcess, reason: str) -> None:
        if self.kill_reason is None:
            self.kill_reason = reason
        process.kill()

    def _read_status(self, fd: int) -> bool:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        if len(self.status) < MAX_STATUS_BYTES:
            self.status += chunk
        return True

    def _pump(self, fd: int, process: SandboxProcess) -> bool:
        """Move one chunk from a sandbox output fd; False at end of stream."""
        try:
            chunk = os.read(fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            return True
        except OSError as exc:
            if exc.errno == errno.EIO:  # PTY: the sandbox side is closed
                return False
            raise
        if not chunk:
            return False
        if fd == self.oom_stream:
            self.oom.feed(chunk)
        allowed = self.output.admit(chunk)
        if allowed:
            self._queue(self.sinks[fd], allowed)
        if self.output.truncated:
            self._kill(process, "output")
        return True

    def _queue(self, sink: int, data: bytes) -> None:
        """Queue output for ``sink``; written when it is writable so a stalled reader of
        the launcher's output never stalls the watchdogs."""
        if sink in self.dead_sinks:
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
        try:
            written = os.write(sink, pending[:SINK_WRITE_BYTES])
        except BlockingIOError:
            return
        except OSError:
            written = len(pending)  # the reader went away: drop what it will never read
            self.dead_sinks.add(sink)
        del pending[:written]
        if not pending:
            self.selector.unregister(sink)
            self.sink_watched.discard(sink)
        if len(pending) < MAX_PENDING_OUTPUT_BYTES:
            for out_fd in [fd for fd in self.paused if self.sinks[fd] == sink]:
                self.paused.discard(out_fd)
                self.selector.register(out_fd, selectors.EVENT_READ, "output")
                self.reading.add(out_fd)

    def flush(self, outputs: list[int]) -> None:
        """After the sandbox is gone: read what is left in the pipes, write everything out."""
        for fd in outputs:
            with contextlib.suppress(OSError):
                while chunk := os.read(fd, READ_CHUNK_BYTES):
                    if fd == self.oom_stream:
                        self.oom.feed(chunk)
                    allowed = self.output.admit(chunk)
                    if not allowed:
                        break
                    self.pending.setdefault(self.sinks[fd], bytearray()).extend(allowed)
        for sink, pending in self.pending.items():
            if sink not in self.dead_sinks and pending:
                _write_all(sink, bytes(pending))
            pending.clear()

    def attach_stdin(self, target: int, *, close_at_eof: bool) -> None:
        """Pump the host's stdin into ``target`` (a pipe or the PTY master) without blocking.

        The supervisor owns ``target`` from here on: it is closed at stdin EOF when
        ``close_at_eof`` is set, and in any case when supervision ends.
        """
        self.stdin_target = target
        self.stdin_close_at_eof = close_at_eof
        os.set_blocking(target, False)

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
        """Take the seccomp listener the init sends once; EOF means it sent none."""
        self.selector.unregister(channel)
        with socket.socket(fileno=os.dup(channel)) as chan:
            try:
                _, fds, _, _ = socket.recv_fds(chan, 16, 1)
            except OSError:
                fds = []
        for fd in fds:
            self.listener = fd
            self.selector.register(fd, selectors.EVENT_READ, "notify")

    def _answer_denials(self, listener: int) -> None:
        """Answer a denied syscall with EPERM and record it (the call is already refused)."""
        try:
            notification = sc.receive_notification(listener)
        except OSError:
            self.selector.unregister(listener)  # no filter users left
            return
        if notification is None:
            return
        ident, _pid, number = notification
        sc.answer_notification(listener, ident, errno.EPERM)
        name = syscall_name(number)
        if len(self.denied) < MAX_DENIED_NAMES or name in self.denied:
            self.denied[name] = self.denied.get(name, 0) + 1

    def _check_watchdogs(self, process: SandboxProcess, deadline: float | None) -> None:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            self._kill(process, "wall_time")
        reached = process.cgroups.reached() if process.cgroups is not None else None
        if reached is not None:  # memory OOM, a refused fork, or the tree's CPU time
            self._kill(process, reached)

    def supervise(  # noqa: PLR0912, PLR0915 - one select loop; branches are its event kinds
        self, process: SandboxProcess, outputs: list[int]
    ) -> None:
        """Run the loop until the init has exited and output is drained."""
        sel = self.selector
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
        if self.stdin_target is not None:
            try:
                sel.register(self.stdin, selectors.EVENT_READ, "stdin")
            except (ValueError, OSError, PermissionError):
                # Not pollable (a regular file is always readable, epoll refuses it).
                self.stdin_eof = True
                self._stdin_maybe_close()
        wall = self.spec.limits.wall_time
        deadline = process.released + wall if wall is not None else None
        cpu_polled = "cpu_time" in process.plans or process.cgroups is not None
        exited_at: float | None = None
        open_outputs = set(outputs)
        while True:
            now = time.monotonic()
            if exited_at is not None and (not open_outputs or now - exited_at > DRAIN_GRACE_S):
                break
            timeout: float | None = None
            if deadline is not None:
                timeout = max(0.0, deadline - now)
            if cpu_polled:
                timeout = (
                    CPU_POLL_INTERVAL_S if timeout is None else min(timeout, CPU_POLL_INTERVAL_S)
                )
            if exited_at is not None:
                timeout = max(0.0, exited_at + DRAIN_GRACE_S - now)
            for key, _ in sel.select(timeout):
                fd, role = int(key.fd), key.data
                if role == "exit":
                    process.wait()
                    sel.unregister(fd)
                    exited_at = time.monotonic()
                    deadline = None
                    cpu_polled = False
                elif role == "status":
                    if not self._read_status(fd):
                        sel.unregister(fd)
                elif role == "output":
                    if not self._pump(fd, process):
                        sel.unregister(fd)
                        self.reading.discard(fd)
                        open_outputs.discard(fd)
                elif role == "sink":
                    self._sink_writable(fd)
                elif role == "notify-channel":
                    self._receive_listener(fd)
                elif role == "notify":
                    self._answer_denials(fd)
                elif role == "cancel":
                    sel.unregister(fd)
                    self.cancelled = True
                    process.kill()
                elif role == "stdin":
                    self._stdin_readable()
                elif role == "stdin-target":
                    self._stdin_writable()
            if exited_at is None:
                self._check_watchdogs(process, deadline)
        with contextlib.suppress(OSError):
            while self._read_status(process.status_fd) and len(self.status) < MAX_STATUS_BYTES:
                pass

    def result(self, process: SandboxProcess, started: float) -> SandboxResult:
        """Turn what was observed into the structured result."""
        fields = _parse_status(self.status)
        limits = self._limit_reports(process, fields)
        verdict = self._verdict(process, fields, limits)
        return SandboxResult(
            outcome=verdict.outcome,
            exit_code=verdict.exit_code,
            signal=verdict.signal,
            error=verdict.error,
            violation=verdict.violation or ("seccomp" if self.denied else None),
            durations=Durations(
                setup_s=round(process.released - started, 6),
                total_s=round(time.monotonic() - started, 6),
            ),
            limits=limits,
            output=OutputReport(bytes=self.output.total, truncated=self.output.truncated),
            retained=self._retained_reports(),
            denied_syscalls=dict(self.denied),
            usage=_usage(fields),
        )

    def _retained_reports(self) -> dict[str, RetainedReport]:
        used: dict[str, int] = {}
        for line in self.status.decode(errors="replace").splitlines():
            key, _, rest = line.partition(" ")
            if key == "retained":
                count, _, target = rest.partition(" ")
                with contextlib.suppress(ValueError):
                    used[target] = int(count)
        return {
            item.target: RetainedReport(
                image=item.image, size=item.size, used_bytes=used.get(item.target)
            )
            for item in self.spec.retained
        }

    def _verdict(  # noqa: PLR0911 - one return per outcome, in precedence order
        self, process: SandboxProcess, fields: dict[str, str], limits: dict[str, LimitReport]
    ) -> _Verdict:
        killed = exit_code_for_signal(signal.SIGKILL)
        if self.kill_reason is not None:
            return _Verdict("limit", killed, signal.SIGKILL, f"{self.kill_reason} limit reached")
        if self.cancelled:
            return _Verdict("signaled", killed, signal.SIGKILL, "cancelled by the caller")
        if "setup" in fields:
            return _Verdict(
                "setup_error", EXIT_SETUP_FAILED, None, f"sandbox setup failed: {fields['setup']}"
            )
        if "exec" in fields:
            err = int(fields["exec"].split()[0])
            code = EXIT_NOT_FOUND if err in (errno.ENOENT, errno.ENOTDIR) else EXIT_NOT_EXECUTABLE
            return _Verdict(
                "exec_error", code, None, f"cannot execute {self.spec.argv[0]}: {os.strerror(err)}"
            )
        memory = limits.get("memory")
        if memory is not None and memory.hit and ("signal" in fields or "exit" not in fields):
            return _Verdict("limit", killed, signal.SIGKILL, "memory limit reached")
        if "signal" in fields:
            signum = int(fields["signal"])
            cpu = limits.get("cpu_time")
            if signum in (signal.SIGXCPU, signal.SIGKILL) and cpu is not None and cpu.hit:
                return _Verdict(
                    "limit", exit_code_for_signal(signum), signum, "cpu_time limit reached"
                )
            violation = "seccomp" if signum == signal.SIGSYS else None
            return _Verdict("signaled", exit_code_for_signal(signum), signum, None, violation)
        if "exit" in fields:
            return _Verdict("exited", int(fields["exit"]) & 0xFF, None, None)
        wait_status = process.reaped_status or 0
        if "ready" in fields and os.WIFSIGNALED(wait_status):
            signum = os.WTERMSIG(wait_status)
            return _Verdict(
                "signaled", exit_code_for_signal(signum), signum, "the sandbox init was killed"
            )
        return _Verdict(
            "setup_error",
            EXIT_SETUP_FAILED,
            None,
            f"sandbox init ended during setup (wait status {wait_status})",
        )

    def _limit_reports(
        self, process: SandboxProcess, fields: dict[str, str]
    ) -> dict[str, LimitReport]:
        reports: dict[str, LimitReport] = {}
        cgroups = process.cgroups
        for name, plan in process.plans.items():
            hit: bool | None = self.kill_reason == name
            if name == "memory" and cgroups is not None:
                hit = hit or cgroups.memory_oom_killed()
            elif name == "pids" and cgroups is not None:
                hit = hit or cgroups.pids_hit()
            elif name == "memory" and plan.mechanism == MECH_RLIMIT_AS and not hit:
                # A refused allocation is ENOMEM inside one process: invisible from here,
                # unless the process said so on stderr or its resident set reached the limit.
                evidence = self.oom.seen or _usage(fields).peak_rss_bytes >= plan.value
                hit = True if evidence else None
            elif name == "cpu_time" and plan.mechanism == MECH_RLIMIT_CPU:
                hit = fields.get("signal") == str(int(signal.SIGXCPU))
            elif name == "output":
                hit = hit or self.output.truncated
            elif name == "disk" and "disk" in fields:
                size = self.spec.limits.disk or DEFAULT_SCRATCH_BYTES
                hit = int(fields["disk"]) + DISK_HIT_SLACK_BYTES >= size
            reports[name] = LimitReport(value=plan.value, mechanism=plan.mechanism, hit=hit)
        return reports


@contextlib.contextmanager
def _forward_host_signals(process: SandboxProcess):  # type: ignore[no-untyped-def]
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum: int, _frame: object) -> None:
        process.send_signal(signum)

    for signum in FORWARDED_HOST_SIGNALS:
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _stdin_passes_directly(stdin: int) -> bool:
    """Whether the host stdin can be handed to the command as is.

    Only a pipe or a socket: a terminal, a file or a device could be reopened for writing
    through ``/proc/self/fd/0`` (or written to directly, for a terminal opened read-write),
    which would bypass the output limit and reach the host file. Those are pumped.
    """
    try:
        mode = os.fstat(stdin).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _wire_stdio(
    supervisor: _Supervisor, child_ends: list[int], outputs: list[int]
) -> tuple[tuple[int, int, int], int | None]:
    """Create the pipes or the PTY; fill ``child_ends`` (to close after launch) and
    ``outputs`` (to drain). Return the command's stdio and the PTY master, if any."""
    if supervisor.spec.pty:
        master, slave = open_sandbox_pty(supervisor.stdin)
        child_ends.append(slave)
        outputs.append(master)
        supervisor.sinks[master] = supervisor.stdout
        supervisor.oom_stream = master
        supervisor.attach_stdin(os.dup(master), close_at_eof=False)
        return (slave, slave, slave), master
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    child_ends.append(out_w)
    outputs.append(out_r)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    child_ends.append(err_w)
    outputs.append(err_r)
    supervisor.sinks = {out_r: supervisor.stdout, err_r: supervisor.stderr}
    supervisor.oom_stream = err_r
    child_stdin = supervisor.stdin
    if not _stdin_passes_directly(child_stdin):
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        child_ends.append(in_r)
        child_stdin = in_r
        supervisor.attach_stdin(in_w, close_at_eof=True)
    return (child_stdin, out_w, err_w), None


def run(
    spec: SandboxSpec,
    *,
    stdin: int = 0,
    stdout: int = 1,
    stderr: int = 2,
    cancel_fd: int | None = None,
) -> SandboxResult:
    """Run ``spec`` to completion and return its structured result.

    The command's stdout and stderr (or its PTY) are passed on to ``stdout``/``stderr``
    through the launcher, which counts them against the output limit. ``stdin`` is given to
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
    supervisor = _Supervisor(spec, stdin, stdout, stderr)
    supervisor.cancel_fd = cancel_fd
    master: int | None = None
    child_ends: list[int] = []
    outputs: list[int] = []
    try:
        stdio, master = _wire_stdio(supervisor, child_ends, outputs)
        try:
            process = launch(spec, stdio, report_violations=True)
        except SandboxSetupError as exc:
            return SandboxResult(
                outcome="setup_error",
                exit_code=EXIT_SETUP_FAILED,
                error=str(exc),
                durations=Durations(total_s=time.monotonic() - started),
            )
        for fd in child_ends:
            os.close(fd)
        child_ends = []
        try:
            with _forward_host_signals(process):
                if master is not None:
                    with host_terminal(stdin, master):
                        supervisor.supervise(process, outputs)
                else:
                    supervisor.supervise(process, outputs)
            supervisor.flush(outputs)
            return supervisor.result(process, started)
        finally:
            process.close()
    finally:
        supervisor.close_stdin_target()
        supervisor.selector.close()
        if supervisor.listener is not None:
            os.close(supervisor.listener)
        for fd in (*child_ends, *outputs):
            with contextlib.suppress(OSError):
                os.close(fd)
