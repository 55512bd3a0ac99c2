"""gloved's side of the launcher process: launches asked from the event loop.

:class:`LauncherClient` owns gloved's end of the channel to the launcher
(:mod:`glove.container.linux._launcher`). :meth:`LauncherClient.launch` sends one
:class:`~glove.container.linux._launcher_codec.Launch` with the command's descriptors and
returns a :class:`RemoteSandboxProcess` once the launcher says the sandbox is released; the
launcher's later :class:`~glove.container.linux._launcher_codec.Exited` gives its wait
status. The channel is read from the loop (never blocking it). When it ends, breaks or
carries a record the codec refuses, :attr:`LauncherClient.ended` fails with
:class:`LauncherGone` and every launch still waiting fails with it too: gloved's
``launcher`` actor then crashes, and gloved fails closed.

While a client is installed (:func:`install_launcher`, gloved's composition root does it),
:class:`~glove.container.linux.AsyncSandbox` launches through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import socket
import time
from collections.abc import Callable, Sequence

import msgspec

from glove.container._spec import ProjectionRecord, SandboxSpec
from glove.container.errors import (
    LimitRefused,
    SandboxError,
    SandboxSetupError,
    SpecError,
    UnsupportedPlatform,
)
from glove.container.linux._cgroups import SandboxCgroups
from glove.container.linux._launch import SandboxProcess
from glove.container.linux._launcher import LauncherHandle
from glove.container.linux._launcher_codec import (
    MAX_FDS,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Exited,
    Failed,
    Hello,
    Launch,
    Launched,
    LauncherProtocolError,
    Message,
    decode,
    encode,
)
from glove.container.linux._pty import DEFAULT_WINSIZE

#: How long gloved waits for the launcher's first record.
HELLO_TIMEOUT_S = 30.0


class LauncherGone(SandboxError):
    """The launcher process ended, or its channel broke: no sandbox can be launched."""


class RemoteSandboxProcess(SandboxProcess):
    """A sandbox the launcher process cloned: gloved holds its descriptors and groups,
    the launcher reaps it (its wait status arrives with :meth:`set_reaped`)."""

    def __init__(
        self,
        *,
        launched: Launched,
        pidfd: int,
        status_fd: int,
        cgroups: SandboxCgroups | None,
        started: float,
    ) -> None:
        """Wrap what the launcher handed over (use :meth:`LauncherClient.launch`)."""
        super().__init__(
            pid=launched.pid,
            pidfd=pidfd,
            status_fd=status_fd,
            plans=launched.plans,
            cgroups=cgroups,
            started=started,
        )
        #: Released once the launcher's clone-to-release time after it was asked (the
        #: channel's own time is counted in the result's setup, not in the wall limit).
        self.released = time.monotonic()
        self.nproc_limit = launched.nproc_limit
        self.unix_gate = launched.unix_gate
        self._on_reaped: list[Callable[[], None]] = []

    def when_reaped(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the launcher has reaped the init (at once if it has)."""
        if self.reaped_status is not None:
            callback()
        else:
            self._on_reaped.append(callback)

    def set_reaped(self, wait_status: int) -> None:
        """The launcher reaped the init with ``wait_status``."""
        if self.reaped_status is not None:
            return
        self.reaped_status = wait_status
        callbacks, self._on_reaped = self._on_reaped, []
        for callback in callbacks:
            callback()

    def poll(self) -> int | None:
        """The init's wait status once the launcher reaped it, else None."""
        return self.reaped_status

    def wait(self) -> int:
        """The init's wait status (the launcher reaps it; here it is only read).

        Raises:
            SandboxSetupError: the launcher has not reported the exit yet.
        """
        if self.reaped_status is None:
            raise SandboxSetupError("the launcher has not reported this sandbox's exit")
        return self.reaped_status

    def close(self) -> None:
        """Kill anything left, remove the groups, close the descriptors (idempotent)."""
        if self.reaped_status is None:
            self.kill()
        if self.cgroups is not None:
            self.cgroups.destroy()
        for fd in (self.pidfd, self.status_fd, self.notify_channel, self.pty_channel):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.pidfd = self.status_fd = self.notify_channel = self.pty_channel = -1


def _failure(failed: Failed) -> SandboxError:
    if failed.kind == "limit":
        return LimitRefused(failed.limit or "?", failed.message)
    if failed.kind == "spec":
        return SpecError(failed.message)
    if failed.kind == "unsupported":
        return UnsupportedPlatform(failed.message)
    if failed.kind == "setup":
        return SandboxSetupError(failed.message)
    return SandboxSetupError(f"the launcher failed: {failed.message}")


class LauncherClient:
    """gloved's end of the launcher channel (see the module docstring)."""

    def __init__(self, handle: LauncherHandle) -> None:
        """Take ownership of ``handle`` (its channel and pidfd); call :meth:`start` next."""
        self.pid = handle.pid
        self.pidfd = handle.pidfd
        self._sock = socket.socket(fileno=handle.channel)
        self._sock.setblocking(False)
        self._loop = asyncio.get_running_loop()
        self._next_id = 1
        self._pending: dict[int, tuple[asyncio.Future[RemoteSandboxProcess], float]] = {}
        self._running: dict[int, RemoteSandboxProcess] = {}
        self._reading = False
        #: Fails with :class:`LauncherGone` when the launcher or its channel is gone.
        self.ended: asyncio.Future[None] = self._loop.create_future()
        self._hello: asyncio.Future[Hello] = self._loop.create_future()

    @property
    def running(self) -> int:
        """How many sandboxes it launched have not been reaped yet."""
        return len(self._running)

    async def start(self, timeout_s: float = HELLO_TIMEOUT_S) -> Hello:
        """Read the launcher's hello (its caches are warm by then), then keep reading.

        Raises:
            LauncherGone: it did not say hello in time, ended, or spoke another version.
        """
        self._loop.add_reader(self._sock.fileno(), self._on_readable)
        self._reading = True
        try:
            async with asyncio.timeout(timeout_s):
                hello = await asyncio.shield(self._hello)
        except TimeoutError as exc:
            self._fail(LauncherGone("the launcher did not start in time"))
            raise LauncherGone("the launcher did not start in time") from exc
        if hello.version != PROTOCOL_VERSION:
            gone = LauncherGone(f"the launcher speaks version {hello.version}")
            self._fail(gone)
            raise gone
        return hello

    async def launch(
        self,
        spec: SandboxSpec,
        stdio: tuple[int, int, int],
        *,
        report_violations: bool = False,
        terminal_size: tuple[int, int] = DEFAULT_WINSIZE,
        projections: Sequence[tuple[ProjectionRecord, int]] = (),
    ) -> RemoteSandboxProcess:
        """Launch ``spec`` in the launcher; the caller keeps (and closes) its descriptors,
        those of the exported ``projections`` too (the launcher gets copies).

        Raises:
            LimitRefused, SpecError, UnsupportedPlatform, SandboxSetupError: the launcher
                refused the launch (nothing ran).
            LauncherGone: the launcher is gone.
        """
        if self.ended.done():
            raise LauncherGone("the launcher is gone")
        launch_id = self._next_id
        self._next_id += 1
        targets = tuple(sorted(spec.pass_fds))
        fds = [fd for fd in stdio if fd >= 0] + [spec.pass_fds[t] for t in targets]
        fds += [fd for _, fd in projections]
        request = Launch(
            id=launch_id,
            spec=msgspec.structs.replace(spec, pass_fds={}),
            stdio=(stdio[0] >= 0, stdio[1] >= 0, stdio[2] >= 0),
            pass_targets=targets,
            report_violations=report_violations,
            terminal_size=terminal_size,
            projections=tuple(record for record, _ in projections),
        )
        try:
            data = encode(request)
        except LauncherProtocolError as exc:
            raise SpecError(str(exc)) from exc
        future: asyncio.Future[RemoteSandboxProcess] = self._loop.create_future()
        self._pending[launch_id] = (future, self._loop.time())
        try:
            await self._send(data, fds)
        except OSError as exc:
            self._pending.pop(launch_id, None)
            gone = LauncherGone(f"the launcher channel broke: {exc}")
            self._fail(gone)
            raise gone from exc
        return await future

    async def _send(self, data: bytes, fds: list[int]) -> None:
        while True:
            try:
                socket.send_fds(self._sock, [data], fds)
                return
            except BlockingIOError:
                writable = self._loop.create_future()
                self._loop.add_writer(self._sock.fileno(), writable.set_result, None)
                try:
                    await writable
                finally:
                    self._loop.remove_writer(self._sock.fileno())

    def _on_readable(self) -> None:
        while not self.ended.done():
            try:
                data, fds, flags, _ = socket.recv_fds(
                    self._sock, MAX_FRAME_BYTES + 1, MAX_FDS, socket.MSG_CMSG_CLOEXEC
                )
            except BlockingIOError:
                return
            except OSError as exc:
                self._fail(LauncherGone(f"the launcher channel broke: {exc}"))
                return
            if not data and not fds:
                self._fail(LauncherGone("the launcher exited"))
                return
            truncated = bool(flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC))
            try:
                message = decode(data, len(fds), truncated=truncated)
                self._dispatch(message, fds)
            except LauncherProtocolError as exc:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self._fail(LauncherGone(str(exc)))
                return

    def _dispatch(self, message: Message, fds: list[int]) -> None:
        if isinstance(message, Hello) and not self._hello.done():
            self._hello.set_result(message)
        elif isinstance(message, Launched):
            self._on_launched(message, fds)
        elif isinstance(message, Exited):
            process = self._running.pop(message.id, None)
            if process is None:
                raise LauncherProtocolError("unexpected", f"an exit of launch {message.id}")
            process.set_reaped(message.wait_status)
        elif isinstance(message, Failed):
            waiting = self._pending.pop(message.id, None)
            if waiting is None:
                raise LauncherProtocolError("unexpected", f"a failure of launch {message.id}")
            if not waiting[0].done():
                waiting[0].set_exception(_failure(message))
        else:
            raise LauncherProtocolError("unexpected", f"the launcher sent {message!r}")

    def _on_launched(self, launched: Launched, fds: list[int]) -> None:
        waiting = self._pending.pop(launched.id, None)
        if waiting is None:
            raise LauncherProtocolError("unexpected", f"a launch gloved did not ask: {launched.id}")
        future, asked = waiting
        cgroups = None
        if launched.cgroup_v2 is not None or launched.cgroup_v1:
            cgroups = SandboxCgroups.adopt(launched.plans, launched.cgroup_v2, launched.cgroup_v1)
        rest = fds[2:]
        started = time.monotonic() - (self._loop.time() - asked)  # when it was asked
        process = RemoteSandboxProcess(
            launched=launched, pidfd=fds[0], status_fd=fds[1], cgroups=cgroups, started=started
        )
        if launched.notify:
            process.notify_channel = rest.pop(0)
        if launched.pty:
            process.pty_channel = rest.pop(0)
        self._running[launched.id] = process
        if future.done():  # the asker was cancelled: nobody owns it but us
            process.close()
            return
        future.set_result(process)

    def _fail(self, exc: LauncherGone) -> None:
        if not self.ended.done():
            self.ended.set_exception(exc)
            self.ended.exception()  # retrieved: the actor watching it re-raises it
        if not self._hello.done():
            self._hello.set_exception(exc)
            self._hello.exception()
        for future, _ in self._pending.values():
            if not future.done():
                future.set_exception(exc)
        self._pending.clear()
        for process in self._running.values():
            process.set_reaped(signal.SIGKILL)  # the inits die with the launcher (killed)
        self._running.clear()
        self._stop_reading()

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._sock.fileno())

    def close(self) -> None:
        """Close gloved's end: the launcher sees the end of its channel and exits (its
        sandboxes with it). Reap it with :meth:`reap`."""
        self._fail(LauncherGone("the launcher was stopped"))
        self._sock.close()

    def reap(self, timeout_s: float = 5.0) -> int | None:
        """Wait (bounded) for the closed launcher to exit and reap it; its exit code."""
        if self.pidfd < 0:
            return None
        ready, _, _ = select.select([self.pidfd], [], [], timeout_s)
        if not ready:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        code: int | None = None
        with contextlib.suppress(ChildProcessError):
            _, status = os.waitpid(self.pid, 0)
            code = os.waitstatus_to_exitcode(status)
        os.close(self.pidfd)
        self.pidfd = -1
        return code


_installed: LauncherClient | None = None


def install_launcher(client: LauncherClient | None) -> None:
    """Make ``client`` the launcher :class:`~glove.container.linux.AsyncSandbox` uses in
    this process (None: launch in-process again)."""
    global _installed  # the process has one launcher, set by its composition root
    _installed = client


def installed_launcher() -> LauncherClient | None:
    """The launcher installed in this process (a gone one too: its launches then fail)."""
    return _installed
