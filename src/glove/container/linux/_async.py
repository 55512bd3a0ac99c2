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

When to kill, poll the limits or finish is decided by the monitor core
(:mod:`glove.container._monitor`), exactly as for the blocking supervisor of ``glove
exec``: this shell tells it each event and keeps one timer on the loop at its next
deadline. Every kill is SIGKILL to the init of the pid namespace; when the init is gone the
outputs are drained for a short grace, and the core decides the result.
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

from glove.actors import TaskOwner
from glove.container._monitor import (
    CPU_POLL_INTERVAL_S,
    DRAIN_GRACE_S,
    MAX_STDIN_BUFFER_BYTES,
    STDIN_CHUNK_BYTES,
    STOP_GRACE_S,
    Action,
    Monitor,
    setup_error,
)
from glove.container._result import SandboxResult
from glove.container._spec import (
    FileProjection,
    PortableProjection,
    ProjectionRecord,
    SandboxSpec,
)
from glove.container.errors import SandboxSetupError, SpecError
from glove.container.linux._events import (
    ListenerGone,
    Stream,
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
)
from glove.container.linux._launch import SandboxProcess, launch, receive_terminal
from glove.container.linux._launcher_client import (
    LauncherClient,
    LauncherGone,
    RemoteSandboxProcess,
    installed_launcher,
)
from glove.container.linux._pty import DEFAULT_WINSIZE, get_winsize
from glove.container.linux._unix_gate import ConnectGate
from glove.exits import EXIT_SIGNAL_BASE

__all__ = [  # the constants live in the core; these names stay importable from here
    "CPU_POLL_INTERVAL_S",
    "DRAIN_GRACE_S",
    "MAX_STDIN_BUFFER_BYTES",
    "STDIN_CHUNK_BYTES",
    "AsyncSandbox",
    "OutputHandler",
]

#: How long a PTY launch waits for the init to send its terminal.
TERMINAL_WAIT_S: Final = 10.0

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


def _export(projection: FileProjection) -> tuple[ProjectionRecord, int]:
    """``projection``'s record and descriptor for the launcher process.

    Raises:
        SpecError: it cannot cross to another process (no ``export``).
    """
    if not isinstance(projection, PortableProjection):
        raise SpecError(f"the projection at {projection.target} cannot cross to the launcher")
    return projection.export()


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
        :func:`~glove.container.linux.launch`); they are closed once launched. Where a
        launcher process is installed each must be a
        :class:`~glove.container.PortableProjection`: it crosses to the launcher.

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
        self._monitor: Monitor | None = None
        self._started = time.monotonic()
        self._reading: set[int] = set()
        self._watched: set[int] = set()
        self._listener: int | None = None
        self._gate: ConnectGate | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._stdin_buffer = bytearray()
        self._stdin_eof = False
        #: The backpressure waits (one per paused stream), cancelled at the release.
        self._tasks = TaskOwner("sandbox-output")
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
        launcher = installed_launcher()
        try:
            if launcher is not None:
                remote = await self._launch_remote(launcher, size or DEFAULT_WINSIZE)
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
        limits = self.spec.limits
        process = self._process
        self._monitor = Monitor(
            output_cap=limits.output,
            wall_time=limits.wall_time,
            released=process.released,
            polled=process.cgroups is not None or process.nproc_limit is not None,
        )
        self._wiring.close_child_ends()
        if self.spec.pty:
            adopt_terminal(self._wiring, self._process, pump_stdin=self._stdin is not None)
        self._watch()

    async def _launch_remote(
        self, launcher: LauncherClient, size: tuple[int, int]
    ) -> RemoteSandboxProcess:
        """Launch in the launcher process, the projections exported to it (their
        descriptors cross by SCM_RIGHTS; this process's are closed once sent)."""
        assert self._wiring is not None
        try:
            exported = [_export(projection) for projection in self._projections]
            return await launcher.launch(
                self.spec,
                self._wiring.child,
                report_violations=True,
                terminal_size=size,
                projections=exported,
            )
        finally:
            for projection in self._projections:
                projection.close()

    async def wait(self) -> SandboxResult:
        """The result, once the sandbox has ended and its output is drained."""
        return await asyncio.shield(self._done)

    def done(self) -> bool:
        """Whether the result is known."""
        return self._done.done()

    def kill(self) -> None:
        """Cancel: kill the whole tree now; the result says ``cancelled by the caller``."""
        if self._monitor is not None:
            self._act(self._monitor.cancel())

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the sandbox's init (``SandboxProcess.send_signal`` says where
        it passes each on: INT, QUIT and HUP to the command's process group, TSTP and CONT
        to the whole tree)."""
        if self._process is not None and self._running():
            self._process.send_signal(signum)

    def _running(self) -> bool:
        return self._monitor is not None and self._monitor.phase == "running"

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
        process, wiring, monitor = self._process, self._wiring, self._monitor
        assert process is not None
        assert wiring is not None
        assert monitor is not None
        os.set_blocking(process.status_fd, False)
        self._add_reader(process.status_fd, self._on_status)
        if process.notify_channel >= 0:
            if process.unix_gate:
                self._gate = ConnectGate()
            self._add_reader(process.notify_channel, self._on_notify_channel)
        for fd, stream in wiring.outputs.items():
            os.set_blocking(fd, False)
            monitor.add_output(fd, oom_watched=stream in ("stderr", "pty"))
            self._resume_output(fd)
        if wiring.stdin_target is not None and self._stdin is not None:
            try:
                self._add_reader(self._stdin, self._on_stdin)
            except (ValueError, OSError, PermissionError):
                self._stdin_eof = True  # not pollable (a regular file): nothing to pump
                self._maybe_close_stdin()
        # The exit last, once the status pipe and the outputs are watched. The launcher
        # reaps its sandboxes: its exit record may have been read (in the same wakeup as
        # the launch's reply, on a busy loop) before this launch's caller resumed. Called
        # at once, the exit finished the result before the outputs were added, losing
        # them, and released the descriptors this method still used (EBADF).
        if isinstance(process, RemoteSandboxProcess):
            pidfd = process.pidfd
            process.when_reaped(lambda: self._on_exit_soon(pidfd))
        else:
            self._add_reader(process.pidfd, self._on_exit)
        self._reschedule()

    def _on_exit_soon(self, pidfd: int) -> None:
        self._loop.call_soon(self._on_exit, pidfd)

    def _add_reader(self, fd: int, callback: Callable[[int], None]) -> None:
        self._loop.add_reader(fd, callback, fd)
        self._watched.add(fd)

    def _remove_reader(self, fd: int) -> None:
        if fd in self._watched:
            self._loop.remove_reader(fd)
            self._watched.discard(fd)

    def _act(self, actions: list[Action]) -> None:
        """Carry out the monitor's actions; keep the one timer at its next deadline."""
        monitor, process = self._monitor, self._process
        if monitor is None or process is None or self._done.done():
            return
        if carry_out(monitor, process, actions):
            self._finish()
        else:
            self._reschedule()

    def _reschedule(self) -> None:
        monitor = self._monitor
        deadline = monitor.next_deadline() if monitor is not None else None
        if deadline == self._timer_at and (deadline is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            delay = max(0.0, deadline - time.monotonic())
            self._timer = self._loop.call_later(delay, self._on_deadline)

    def _on_deadline(self) -> None:
        self._timer = None
        self._timer_at = None
        if self._monitor is not None:
            self._act(self._monitor.deadline_reached(time.monotonic()))

    def _on_exit(self, fd: int) -> None:
        process, monitor = self._process, self._monitor
        assert process is not None
        assert monitor is not None
        if process.poll() is None:
            return  # spurious wakeup
        self._remove_reader(fd)
        self._act(monitor.child_exited(time.monotonic()))

    def _on_status(self, fd: int) -> None:
        process, monitor = self._process, self._monitor
        assert process is not None
        assert monitor is not None
        more, actions = read_status(monitor, process, fd)
        if not more:
            self._remove_reader(fd)
        self._act(actions)

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
        if denial is not None and self._monitor is not None:
            self._monitor.denial(*denial)
        self._record_refused_connects()

    def _record_refused_connects(self) -> None:
        if self._gate is not None and self._monitor is not None:
            for args in self._gate.take_refused():
                self._monitor.denial("connect", args)

    def _resume_output(self, fd: int) -> None:
        monitor = self._monitor
        if monitor is not None and fd in monitor.open_outputs and fd not in self._reading:
            self._reading.add(fd)
            self._add_reader(fd, self._on_output_ready)

    def _on_output_ready(self, fd: int) -> None:
        try:
            chunk = read_output(fd)
        except OSError:
            chunk = b""
        if chunk is None:
            return
        monitor = self._monitor
        assert monitor is not None
        if not chunk:
            self._remove_reader(fd)
            self._reading.discard(fd)
            self._act(monitor.output_closed(fd))
            return
        self._deliver(monitor, fd, chunk)

    def _deliver(self, monitor: Monitor, fd: int, chunk: bytes) -> None:
        wiring = self._wiring
        assert wiring is not None
        allowed, actions = monitor.output(fd, chunk)
        self._act(actions)
        if not allowed:
            return
        pending = self._on_output(wiring.outputs[fd], allowed)
        if pending is not None:
            # Backpressure: stop reading this stream until its consumer has taken it.
            self._remove_reader(fd)
            self._reading.discard(fd)
            if self._tasks.closed:  # released: nobody reads this stream any more
                if asyncio.iscoroutine(pending):
                    pending.close()
                return
            self._tasks.start(self._after(pending, fd), name=f"output-{fd}")

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

    def _finish(self) -> None:
        if self._done.done():
            return
        process, wiring, monitor = self._process, self._wiring, self._monitor
        assert process is not None
        assert wiring is not None
        assert monitor is not None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fd in list(self._watched):
            self._remove_reader(fd)
        for fd in monitor.open_outputs:
            with contextlib.suppress(OSError):
                while chunk := read_output(fd):
                    self._deliver_final(monitor, fd, chunk)
        drain_status(monitor, process)
        self._record_refused_connects()
        result = monitor.result(
            self.spec,
            process.plans,
            groups=group_facts(process),
            init_wait_status=process.reaped_status,
            started=self._started,
            now=time.monotonic(),
            strerror=os.strerror,
        )
        self._release()
        self._done.set_result(result)

    def _deliver_final(self, monitor: Monitor, fd: int, chunk: bytes) -> None:
        """After the grace: count what is left and hand it over without waiting."""
        wiring = self._wiring
        assert wiring is not None
        allowed = monitor.final_output(fd, chunk)
        if allowed:
            pending = self._on_output(wiring.outputs[fd], allowed)
            if pending is not None and asyncio.iscoroutine(pending):
                pending.close()  # nobody will wait any more: the bytes were counted

    def _finish_now(self, error: str) -> None:
        self._done.set_result(setup_error(error, time.monotonic() - self._started))

    def _release(self) -> None:
        """Close what this shell owns: the process (kill, reap, cgroups), pipes, listener."""
        if self._released:
            return
        self._released = True
        self._tasks.cancel()
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

    async def stop(self, grace_s: float = STOP_GRACE_S) -> SandboxResult:
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
        if self._monitor is not None and self._process is not None:
            carry_out(self._monitor, self._process, self._monitor.cancel())
        for fd in list(self._watched):
            self._remove_reader(fd)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
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
