"""Owning a sandbox from the event loop: no thread held for its life (the asyncio shell).

:class:`AsyncSandbox` launches a spec (the clone runs once in a given executor, for the few
milliseconds it takes), then watches every descriptor of the sandbox from the loop:

* the init's **pidfd** (readable when it exits; reaped with ``WNOHANG``, never blocking);
* its **status pipe**, decoded by the typed codec of :mod:`glove.container._status`;
* the **seccomp listener** it sends over the notify channel: every denied syscall is
  answered (EPERM) as soon as it is readable, so a denial can never stall the sandbox for
  want of a reader; every ``connect`` goes to the Unix socket gate's workers (threads),
  which perform it (``_unix_gate``);
* the **output pipes** (or the PTY master), counted against the output cap and handed to
  ``on_output``, which may return an awaitable: reading that stream then pauses until it
  completes (the only backpressure the command feels is its consumer's own);
* host **stdin**, pumped into the command when it cannot be handed over directly.

Timers on the loop enforce the wall-clock limit and poll a cgroup's CPU usage; every kill
is SIGKILL to the init of the pid namespace. When the init is gone the outputs are drained
for a short grace, and the pure core (:mod:`glove.container._verdict`) decides the result,
exactly as the blocking supervisor of ``glove exec`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Final

from glove.container._observe import DenialTable, OomWatch, OutputCap
from glove.container._result import Durations, SandboxResult
from glove.container._spec import FileProjection, SandboxSpec
from glove.container._status import StatusDecoder, StatusLineError
from glove.container._verdict import Observed, decide
from glove.container.errors import SandboxSetupError
from glove.container.linux._events import (
    ListenerGone,
    Stream,
    Wiring,
    adopt_terminal,
    answer_denial,
    note_status,
    nproc_reached,
    read_output,
    receive_listener,
    wire_stdio,
)
from glove.container.linux._launch import SandboxProcess, launch, receive_terminal
from glove.container.linux._launcher_client import (
    LauncherGone,
    RemoteSandboxProcess,
    installed_launcher,
)
from glove.container.linux._pty import DEFAULT_WINSIZE, get_winsize
from glove.container.linux._unix_gate import ConnectGate
from glove.exits import EXIT_SETUP_FAILED, EXIT_SIGNAL_BASE

#: How often the CPU watchdog samples the group's usage.
CPU_POLL_INTERVAL_S: Final = 0.05
#: How long output is still drained after the init has exited.
DRAIN_GRACE_S: Final = 0.5
#: Host stdin bytes buffered for a command that is not reading yet.
MAX_STDIN_BUFFER_BYTES: Final = 256 * 1024
#: How long a PTY launch waits for the init to send its terminal.
TERMINAL_WAIT_S: Final = 10.0
#: Bytes of stdin read per wakeup.
STDIN_CHUNK_BYTES: Final = 64 * 1024

OutputHandler = Callable[[Stream, bytes], Awaitable[None] | None]
"""``on_output(stream, data)``: may return an awaitable; reading that stream then waits."""


async def _receive_terminal(process: RemoteSandboxProcess) -> int:
    """The PTY master the init sends once its root is built, read on the loop; -1 when
    none came in time (the setup failed: the status pipe says why)."""
    loop = asyncio.get_running_loop()
    channel = socket.socket(fileno=process.pty_channel)
    process.pty_channel = -1
    with channel:
        channel.setblocking(False)
        readable: asyncio.Future[None] = loop.create_future()

        def on_readable() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(channel.fileno(), on_readable)
        try:
            async with asyncio.timeout(TERMINAL_WAIT_S):
                await readable
        except TimeoutError:
            return -1
        finally:
            loop.remove_reader(channel.fileno())
        channel.setblocking(True)
        return receive_terminal(channel)


class AsyncSandbox:
    """One sandbox, launched and supervised from the running event loop.

    Use :meth:`start` once, then :meth:`wait` for the :class:`SandboxResult`; :meth:`kill`
    (a cancel) and :meth:`send_signal` may be called at any time in between.
    """

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        on_output: OutputHandler,
        stdin: int | None = None,
        winsize_from: int | None = None,
        terminal_size: tuple[int, int] | None = None,
        projections: tuple[FileProjection, ...] = (),
    ) -> None:
        """Prepare (nothing starts until :meth:`start`).

        ``projections`` are verified files mounted read-only in the sandbox (see
        :func:`~glove.container.linux.launch`, which closes them).

        ``stdin`` is a host fd for the command's stdin (handed over when it is a pipe or a
        socket, pumped otherwise), or None for an empty stdin. In PTY mode the terminal
        starts ``terminal_size`` (rows, columns), else the size of ``winsize_from``, else
        24 x 80.
        """
        self.spec = spec
        self._on_output = on_output
        self._stdin = stdin
        self._winsize_from = winsize_from
        self._terminal_size = terminal_size
        self._projections = projections
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[SandboxResult] = self._loop.create_future()
        self._process: SandboxProcess | None = None
        self._wiring: Wiring | None = None
        self._output = OutputCap(spec.limits.output)
        self._oom = OomWatch()
        self._denied = DenialTable()
        self._status = StatusDecoder()
        self._observed = Observed()
        self._started = time.monotonic()
        self._open_outputs: set[int] = set()
        self._reading: set[int] = set()
        self._watched: set[int] = set()
        self._listener: int | None = None
        self._gate: ConnectGate | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._exited = False
        self._stdin_buffer = bytearray()
        self._stdin_eof = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._channel_broke: str | None = None
        self._released = False

    # -- public -----------------------------------------------------------------------------

    @property
    def process(self) -> SandboxProcess | None:
        """The launched sandbox (pid, pidfd, plans), once :meth:`start` returned."""
        return self._process

    @property
    def master(self) -> int | None:
        """The PTY master in PTY mode (for resizing), once started."""
        return self._wiring.master if self._wiring is not None else None

    async def start(self, executor: Executor | None = None) -> None:
        """Launch the sandbox (the clone in ``executor``), then watch it from the loop.

        A sandbox that cannot be built ends at once with a ``setup_error`` result.

        Raises:
            LimitRefused: a requested limit cannot be enforced as asked.
            SpecError: the spec is invalid on this host.
            UnsupportedPlatform: the machine lacks seccomp or namespaces.
        """
        self._wiring = wire_stdio(self.spec, self._stdin)
        size = self._terminal_size
        if size is None and self._winsize_from is not None:
            size = get_winsize(self._winsize_from)
        launcher = installed_launcher() if not self._projections else None
        try:
            if launcher is not None:
                remote = await launcher.launch(
                    self.spec,
                    self._wiring.child,
                    report_violations=True,
                    terminal_size=size or DEFAULT_WINSIZE,
                )
                self._process = remote
                if remote.pty_channel >= 0:
                    remote.pty_master = await _receive_terminal(remote)
            else:
                self._process = await self._loop.run_in_executor(
                    executor,
                    functools.partial(
                        launch,
                        self.spec,
                        self._wiring.child,
                        report_violations=True,
                        terminal_size=size or DEFAULT_WINSIZE,
                        projections=self._projections,
                    ),
                )
        except LauncherGone:
            self._wiring.close()
            raise
        except SandboxSetupError as exc:
            self._wiring.close()
            self._finish_now(str(exc))
            return
        except BaseException:
            self._wiring.close()
            raise
        self._wiring.close_child_ends()
        if self.spec.pty:
            adopt_terminal(self._wiring, self._process, pump_stdin=self._stdin is not None)
        self._watch()

    async def wait(self) -> SandboxResult:
        """The result, once the sandbox has ended and its output is drained."""
        return await asyncio.shield(self._done)

    def done(self) -> bool:
        """Whether the result is known."""
        return self._done.done()

    def kill(self) -> None:
        """Cancel: kill the whole tree now; the result says ``cancelled by the caller``."""
        if self._process is not None and not self._exited:
            self._observed.cancelled = True
            self._process.kill()

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the sandbox's init (``SandboxProcess.send_signal`` says where
        it passes each on: INT, QUIT and HUP to the command's process group, TSTP and CONT
        to the whole tree)."""
        if self._process is not None and not self._exited:
            self._process.send_signal(signum)

    def write_input(self, data: bytes) -> int:
        """Write to the command's terminal or stdin pump target without blocking; return the
        number of bytes taken (0 when there is nowhere to write or it is full)."""
        target = self._wiring.stdin_target if self._wiring is not None else None
        if target is None:
            target = self.master
        if target is None:
            return 0
        try:
            return os.write(target, data)
        except (BlockingIOError, OSError):
            return 0

    # -- watching ---------------------------------------------------------------------------

    def _watch(self) -> None:
        process, wiring = self._process, self._wiring
        assert process is not None
        assert wiring is not None
        loop = self._loop
        if isinstance(process, RemoteSandboxProcess):
            pidfd = process.pidfd
            process.when_reaped(lambda: self._on_exit(pidfd))  # the launcher reaps it
        else:
            self._add_reader(process.pidfd, self._on_exit)
        os.set_blocking(process.status_fd, False)
        self._add_reader(process.status_fd, self._on_status)
        if process.notify_channel >= 0:
            if process.unix_gate:
                self._gate = ConnectGate()
            self._add_reader(process.notify_channel, self._on_notify_channel)
        for fd in wiring.outputs:
            os.set_blocking(fd, False)
            self._open_outputs.add(fd)
            self._resume_output(fd)
        if wiring.stdin_target is not None and self._stdin is not None:
            try:
                self._add_reader(self._stdin, self._on_stdin)
            except (ValueError, OSError, PermissionError):
                self._stdin_eof = True  # not pollable (a regular file): nothing to pump
                self._maybe_close_stdin()
        wall = self.spec.limits.wall_time
        if wall is not None:
            delay = max(0.0, process.released + wall - time.monotonic())
            self._timers.append(loop.call_later(delay, self._kill_for, "wall_time"))
        if process.cgroups is not None or process.nproc_limit is not None:
            # CPU time, an OOM kill, a refused fork; the tree's size against RLIMIT_NPROC
            self._timers.append(loop.call_later(CPU_POLL_INTERVAL_S, self._poll_cpu))

    def _add_reader(self, fd: int, callback: Callable[[int], None]) -> None:
        self._loop.add_reader(fd, callback, fd)
        self._watched.add(fd)

    def _remove_reader(self, fd: int) -> None:
        if fd in self._watched:
            self._loop.remove_reader(fd)
            self._watched.discard(fd)

    def _kill_for(self, reason: str) -> None:
        if self._exited or self._process is None:
            return
        if self._observed.kill_reason is None:
            self._observed.kill_reason = reason
        self._process.kill()

    def _poll_cpu(self) -> None:
        process = self._process
        if self._exited or process is None:
            return
        reached = process.cgroups.reached() if process.cgroups is not None else None
        if reached is None and nproc_reached(process):
            reached = "pids"  # the tree is at its RLIMIT_NPROC: the next fork fails
        if reached is not None:
            self._kill_for(reached)
            return
        self._timers.append(self._loop.call_later(CPU_POLL_INTERVAL_S, self._poll_cpu))

    def _on_exit(self, fd: int) -> None:
        process = self._process
        assert process is not None
        if process.poll() is None:
            return  # spurious wakeup
        self._remove_reader(fd)
        self._exited = True
        for timer in self._timers:
            timer.cancel()
        self._timers = [self._loop.call_later(DRAIN_GRACE_S, self._finish)]
        self._maybe_finish()

    def _on_status(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        try:
            if chunk:
                messages = self._status.feed(chunk)
            else:
                self._remove_reader(fd)
                messages = self._status.close()
        except StatusLineError as exc:
            self._remove_reader(fd)
            self._channel_broke = str(exc)
            return
        if self._process is not None:
            note_status(self._process, messages)
        self._observed.messages.extend(messages)

    def _on_notify_channel(self, fd: int) -> None:
        self._remove_reader(fd)
        listener = receive_listener(fd)
        if listener is not None:
            self._listener = listener
            self._add_reader(listener, self._on_denial)

    def _on_denial(self, fd: int) -> None:
        try:
            denial = answer_denial(fd, self._gate)
        except ListenerGone:
            self._remove_reader(fd)
            return
        if denial is not None:
            self._denied.record(*denial)
        self._record_refused_connects()

    def _record_refused_connects(self) -> None:
        if self._gate is not None:
            for args in self._gate.take_refused():
                self._denied.record("connect", args)

    def _resume_output(self, fd: int) -> None:
        if fd in self._open_outputs and fd not in self._reading:
            self._reading.add(fd)
            self._add_reader(fd, self._on_output_ready)

    def _on_output_ready(self, fd: int) -> None:
        try:
            chunk = read_output(fd)
        except OSError:
            chunk = b""
        if chunk is None:
            return
        if not chunk:
            self._remove_reader(fd)
            self._reading.discard(fd)
            self._open_outputs.discard(fd)
            self._maybe_finish()
            return
        self._deliver(fd, chunk)

    def _deliver(self, fd: int, chunk: bytes) -> None:
        wiring = self._wiring
        assert wiring is not None
        stream = wiring.outputs[fd]
        if stream in ("stderr", "pty"):
            self._oom.feed(chunk)
        allowed = self._output.admit(chunk)
        if self._output.truncated:
            self._kill_for("output")
        if not allowed:
            return
        pending = self._on_output(stream, allowed)
        if pending is not None:
            # Backpressure: stop reading this stream until its consumer has taken it.
            self._remove_reader(fd)
            self._reading.discard(fd)
            task = self._loop.create_task(self._after(pending, fd))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _after(self, pending: Awaitable[None], fd: int) -> None:
        try:
            await pending
        finally:
            if not self._done.done():
                self._resume_output(fd)

    def _on_stdin(self, fd: int) -> None:
        try:
            chunk = os.read(fd, STDIN_CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._remove_reader(fd)
            self._stdin_eof = True
            self._maybe_close_stdin()
            return
        self._stdin_buffer += chunk
        self._flush_stdin()
        if len(self._stdin_buffer) >= MAX_STDIN_BUFFER_BYTES:
            self._remove_reader(fd)  # backpressure: resumed once the command reads

    def _flush_stdin(self, _fd: int | None = None) -> None:
        wiring = self._wiring
        target = wiring.stdin_target if wiring is not None else None
        if target is None:
            self._stdin_buffer.clear()
            return
        try:
            written = os.write(target, self._stdin_buffer) if self._stdin_buffer else 0
        except BlockingIOError:
            written = 0
        except OSError:
            self._stdin_buffer.clear()  # the command closed its stdin
            written = 0
        was_full = len(self._stdin_buffer) >= MAX_STDIN_BUFFER_BYTES
        del self._stdin_buffer[:written]
        if self._stdin_buffer:
            with contextlib.suppress(ValueError, OSError):
                self._loop.add_writer(target, self._flush_stdin, target)
        else:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_writer(target)
            self._maybe_close_stdin()
        resume = was_full and len(self._stdin_buffer) < MAX_STDIN_BUFFER_BYTES
        stdin = self._stdin
        if resume and not self._stdin_eof and stdin is not None and stdin not in self._watched:
            self._add_reader(stdin, self._on_stdin)

    def _maybe_close_stdin(self) -> None:
        wiring = self._wiring
        if (
            wiring is not None
            and wiring.stdin_target is not None
            and wiring.close_target_at_eof
            and self._stdin_eof
            and not self._stdin_buffer
        ):
            target, wiring.stdin_target = wiring.stdin_target, None
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_writer(target)
            with contextlib.suppress(OSError):
                os.close(target)

    # -- the end ----------------------------------------------------------------------------

    def _maybe_finish(self) -> None:
        if self._exited and not self._open_outputs and not self._tasks:
            self._finish()

    def _finish(self) -> None:
        if self._done.done():
            return
        process, wiring = self._process, self._wiring
        assert process is not None
        assert wiring is not None
        for timer in self._timers:
            timer.cancel()
        for fd in list(self._watched):
            self._remove_reader(fd)
        for fd in list(self._open_outputs):
            with contextlib.suppress(OSError):
                while chunk := read_output(fd):
                    self._deliver_final(fd, chunk)
        with contextlib.suppress(OSError, StatusLineError):
            while chunk := os.read(process.status_fd, 4096):
                self._observed.messages.extend(self._status.feed(chunk))
            self._observed.messages.extend(self._status.close())
        result = self._decide(process)
        self._release()
        self._done.set_result(result)

    def _deliver_final(self, fd: int, chunk: bytes) -> None:
        """After the grace: count what is left and hand it over without waiting."""
        wiring = self._wiring
        assert wiring is not None
        if wiring.outputs[fd] in ("stderr", "pty"):
            self._oom.feed(chunk)
        allowed = self._output.admit(chunk)
        if allowed:
            pending = self._on_output(wiring.outputs[fd], allowed)
            if pending is not None and asyncio.iscoroutine(pending):
                pending.close()  # nobody will wait any more: the bytes were counted

    def _decide(self, process: SandboxProcess) -> SandboxResult:
        observed = self._observed
        broke = self._channel_broke
        if broke is not None:
            return SandboxResult(
                outcome="setup_error",
                exit_code=EXIT_SETUP_FAILED,
                error=f"the sandbox's status channel broke: {broke}",
                durations=Durations(total_s=round(time.monotonic() - self._started, 6)),
            )
        self._record_refused_connects()
        observed.denied = self._denied.counts
        observed.expected = self._denied.expected
        observed.output_bytes = self._output.total
        observed.output_truncated = self._output.truncated
        observed.oom_seen = self._oom.seen
        if process.cgroups is not None:
            observed.memory_oom_killed = process.cgroups.memory_oom_killed()
            observed.pids_hit = process.cgroups.pids_hit()
            observed.cpus_throttled = process.cgroups.cpu_throttled()
        observed.init_wait_status = process.reaped_status
        observed.setup_s = process.released - self._started
        observed.total_s = time.monotonic() - self._started
        return decide(observed, self.spec, process.plans, strerror=os.strerror)

    def _finish_now(self, error: str) -> None:
        self._done.set_result(
            SandboxResult(
                outcome="setup_error",
                exit_code=EXIT_SETUP_FAILED,
                error=error,
                durations=Durations(total_s=round(time.monotonic() - self._started, 6)),
            )
        )

    def _release(self) -> None:
        """Close what this shell owns: the process (kill, reap, cgroups), pipes, listener."""
        if self._released:
            return
        self._released = True
        for task in list(self._tasks):
            task.cancel()
        if self._wiring is not None:
            target = self._wiring.stdin_target
            if target is not None:
                with contextlib.suppress(ValueError, OSError):
                    self._loop.remove_writer(target)
            self._wiring.close()
        if self._gate is not None:
            self._gate.close()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                os.close(self._listener)
            self._listener = None
        if self._process is not None:
            self._process.close()

    async def stop(self, grace_s: float = 5.0) -> SandboxResult:
        """Kill the tree and wait (up to ``grace_s``) for it to end and drain; the result
        says it was cancelled. Past the grace, :meth:`close` forces the end."""
        self.kill()
        try:
            async with asyncio.timeout(grace_s):
                return await self.wait()
        except TimeoutError:
            self.close()
            return await self.wait()

    def close(self) -> None:
        """Kill anything left and release everything now (idempotent; for teardown).

        The reap may block briefly (the kernel ends the pid namespace first): prefer
        :meth:`stop`, which waits for the exit on the loop.
        """
        if self._process is not None and not self._exited:
            self._observed.cancelled = True
            self._process.kill()
        for fd in list(self._watched):
            self._remove_reader(fd)
        for timer in self._timers:
            timer.cancel()
        if not self._done.done():
            self._done.set_result(
                SandboxResult(
                    outcome="signaled",
                    exit_code=EXIT_SIGNAL_BASE + signal.SIGKILL,
                    signal=signal.SIGKILL,
                    error="stopped by its owner",
                )
            )
        self._release()
