"""The launcher process: gloved's one single-threaded child that clones every sandbox.

gloved forks it first thing, before any thread exists (:func:`fork_launcher`), so every
sandbox is cloned by a process with one thread: on the ``clone3`` path (no fork path, no
GIL window, no reaper process), one launch at a time. A launch's library projections come
with it (their descriptors by SCM_RIGHTS), checked again here by the loader gloved passed
to :func:`fork_launcher`. It speaks the typed codec of
:mod:`glove.container.linux._launcher_codec` over one ``SOCK_SEQPACKET`` socketpair::

    gloved                                     launcher (single-threaded, no event loop)
      Launch(id, spec, projections) + stdio, passed fds, projections' fds
                                           --->  launch(): clone3, id maps, cgroups, go
      <--- Launched(id, pid, cgroups) + pidfd, status pipe, notify and terminal channels
      <--- Exited(id, wait status)             (its pidfd readable: reaped here)
      <--- Failed(id, kind, message)           (a launch refused: nothing ran)

Everything after the release is gloved's: the status pipe, the seccomp listener, the
terminal, the output, the kill (the pidfd, ``cgroup.kill``) and the groups' removal. The
launcher only reaps its children and says how they ended.

It ignores SIGINT, SIGTERM and SIGHUP (a terminal's ^C or a service manager's stop reach
the whole group: gloved stops first, then the launcher sees the end of its channel) and
exits when the channel ends or breaks, or a record is refused: each sandbox's init watches
the launcher's pidfd and dies with it. gloved watches the launcher in turn (its
``launcher`` actor): if the launcher dies, gloved fails closed (one strike at the root) and
the service manager restarts both.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading
from typing import Final, NoReturn

import msgspec

from glove.container._spec import FileProjection, ProjectionLoader
from glove.container.errors import (
    LimitRefused,
    SandboxError,
    SandboxSetupError,
    SpecError,
    UnsupportedPlatform,
)
from glove.container.linux import _syscalls as sc
from glove.container.linux._cgroups import probe_host_limits
from glove.container.linux._launch import SandboxProcess, _launch
from glove.container.linux._launcher_codec import (
    MAX_FDS,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Exited,
    Failed,
    FailureKind,
    Hello,
    Launch,
    Launched,
    LauncherProtocolError,
    Message,
    decode,
    encode,
)
from glove.container.linux._seccomp import seccomp_program
from glove.container.linux._unix_gate import probe_unix_gate
from glove.exits import EXIT_INTERNAL, EXIT_OK

#: What the launcher's command line reads as in ``ps``.
LAUNCHER_TITLE: Final = b"glove-launcher"
#: Socket buffer sizes asked for on the channel (a record must fit whole).
_SOCKET_BUFFER_BYTES: Final = 4 * MAX_FRAME_BYTES


class LauncherHandle(msgspec.Struct, frozen=True):
    """gloved's side of a forked launcher: its pid, a pidfd for it, and the channel."""

    pid: int
    pidfd: int
    channel: int


def fork_launcher(load_projections: ProjectionLoader | None = None) -> LauncherHandle:
    """Fork the launcher (call it before any thread exists) and return gloved's handle.

    The child keeps only its end of the channel and stdio; it never returns.
    ``load_projections`` rebuilds the projections a launch carries (gloved's composition
    root passes ``glove.session``'s); without it a launch with projections is refused.

    Raises:
        SandboxSetupError: this process already has threads, or the fork failed.
    """
    if threading.active_count() > 1:
        raise SandboxSetupError("the launcher must be forked before any thread exists")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    for sock in (ours, theirs):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER_BYTES)
    try:
        pid = os.fork()
    except OSError as exc:
        ours.close()
        theirs.close()
        raise SandboxSetupError(f"cannot fork the launcher: {exc}") from exc
    if pid == 0:  # pragma: no cover - the child: measured through its behaviour
        ours.close()
        _child_main(theirs.detach(), load_projections)
    theirs.close()
    return LauncherHandle(pid=pid, pidfd=os.pidfd_open(pid), channel=ours.detach())


def _child_main(channel: int, load_projections: ProjectionLoader | None) -> NoReturn:
    code = EXIT_INTERNAL
    try:
        keep = {0, 1, 2, channel}
        low = 0
        for fd in sorted(keep):
            if fd > low:
                os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 20)  # gloved's lock, journals, anything it opened so far
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:
            os._exit(EXIT_INTERNAL)  # gloved died before the death signal was armed
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sc.set_own_cmdline(LAUNCHER_TITLE)
        code = serve(socket.socket(fileno=channel), load_projections)
    except BaseException as exc:  # noqa: BLE001 - the forked child must never unwind
        with contextlib.suppress(OSError):
            os.write(2, f"glove-launcher: {type(exc).__name__}: {exc}\n".encode())
    finally:
        os._exit(code)


def warm_caches() -> None:
    """Compute what is the same for every launch once, before the first one: the compiled
    seccomp filters, the Unix socket gate's probe, the host's limit mechanisms."""
    gate = probe_unix_gate().mechanism is not None
    seccomp_program()
    with contextlib.suppress(SandboxError):
        seccomp_program(notify=True, gate=gate)
    with contextlib.suppress(SandboxError, OSError):
        probe_host_limits()


class _Server:
    """The launcher's state: the channel and the inits it still has to reap."""

    def __init__(self, channel: socket.socket, load_projections: ProjectionLoader | None) -> None:
        self.channel = channel
        self.load_projections = load_projections
        #: pidfd -> (launch id, init pid), for every init not reaped yet.
        self.live: dict[int, tuple[int, int]] = {}
        self.poller = select.poll()
        self.poller.register(channel.fileno(), select.POLLIN)

    def send(self, message: Message, fds: list[int] | None = None) -> None:
        socket.send_fds(self.channel, [encode(message)], fds or [])

    def receive(self) -> tuple[Message, list[int]] | None:
        """The next record, or None at the end of the channel."""
        data, fds, flags, _ = socket.recv_fds(
            self.channel, MAX_FRAME_BYTES + 1, MAX_FDS, socket.MSG_CMSG_CLOEXEC
        )
        if not data and not fds:
            return None
        truncated = bool(flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC))
        try:
            return decode(data, len(fds), truncated=truncated), fds
        except LauncherProtocolError:
            _close_all(fds)
            raise

    def launch(self, request: Launch, fds: list[int]) -> None:
        remaining = list(fds)
        stdio = tuple(remaining.pop(0) if present else -1 for present in request.stdio)
        passed = {target: remaining.pop(0) for target in request.pass_targets}
        spec = msgspec.structs.replace(request.spec, pass_fds=passed)
        projections: tuple[FileProjection, ...] = ()
        try:
            projections = self._projections(request, remaining)
            process = _launch(
                spec,
                (stdio[0], stdio[1], stdio[2]),
                report_violations=request.report_violations,
                terminal_size=request.terminal_size,
                projections=projections,
                keep_terminal_channel=True,
            )
        except LimitRefused as exc:
            self.send(Failed(request.id, "limit", exc.reason, limit=exc.limit))
            return
        except _ProjectionsRefused as exc:
            self.send(Failed(request.id, "setup", str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - every refusal goes back typed
            self.send(Failed(request.id, _kind(exc), str(exc)))
            return
        finally:
            for projection in projections:
                projection.close()
            _close_all(fds[: len(fds) - len(request.projections)])  # the loader's are its own
        self._hand_over(request.id, process)

    def _projections(self, request: Launch, fds: list[int]) -> tuple[FileProjection, ...]:
        """The launch's projections, rebuilt by the loader from their records and
        descriptors (which it owns from here: it closes them all when it refuses).

        Raises:
            _ProjectionsRefused: no loader, or one descriptor does not match its record.
        """
        if not request.projections:
            return ()
        if self.load_projections is None:
            _close_all(fds)
            raise _ProjectionsRefused("SandboxSetupError: this launcher takes no projections")
        try:
            return self.load_projections(list(zip(request.projections, fds, strict=True)))
        except Exception as exc:
            raise _ProjectionsRefused(f"{type(exc).__name__}: {exc}") from exc

    def _hand_over(self, launch_id: int, process: SandboxProcess) -> None:
        v2, v1 = process.cgroups.where() if process.cgroups is not None else (None, {})
        launched = Launched(
            id=launch_id,
            pid=process.pid,
            plans=process.plans,
            setup_s=round(process.released - process.started, 6),
            cgroup_v2=v2,
            cgroup_v1=v1,
            nproc_limit=process.nproc_limit,
            unix_gate=process.unix_gate,
            notify=process.notify_channel >= 0,
            pty=process.pty_channel >= 0,
        )
        passed = [process.pidfd, process.status_fd]
        passed += [fd for fd in (process.notify_channel, process.pty_channel) if fd >= 0]
        try:
            self.send(launched, passed)
        finally:
            _close_all(passed[1:])  # gloved's now; the pidfd stays for the reap
        self.live[process.pidfd] = (launch_id, process.pid)
        self.poller.register(process.pidfd, select.POLLIN)

    def reap(self, pidfd: int) -> None:
        launch_id, pid = self.live.pop(pidfd)
        self.poller.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)  # the pidfd is readable: it has exited
        self.send(Exited(launch_id, status))


class _ProjectionsRefused(Exception):
    """A launch's projections were refused before the clone (the text says which, as the
    init's one-line setup report would: ``ProjectionRefused: [code] ...``)."""


def _launch_request(message: Message, fds: list[int]) -> tuple[Launch, list[int]]:
    """``message`` as a launch request: gloved sends nothing else.

    Raises:
        LauncherProtocolError: it is another message (its descriptors are closed).
    """
    if not isinstance(message, Launch):
        _close_all(fds)
        raise LauncherProtocolError("unexpected", f"gloved sent {type(message).__name__}")
    return message, fds


def _kind(exc: BaseException) -> FailureKind:
    if isinstance(exc, SpecError):
        return "spec"
    if isinstance(exc, UnsupportedPlatform):
        return "unsupported"
    if isinstance(exc, SandboxSetupError | OSError):
        return "setup"
    return "internal"


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def serve(channel: socket.socket, load_projections: ProjectionLoader | None = None) -> int:
    """Run the launcher on ``channel`` until it ends; return the process's exit code.

    ``load_projections`` rebuilds the projections launches carry (see :func:`fork_launcher`).

    Exits 0 at the end of the channel (or when gloved's end was closed under it),
    :data:`~glove.exits.EXIT_INTERNAL` when a record is refused or the channel breaks
    (gloved then fails closed).
    """
    warm_caches()
    server = _Server(channel, load_projections)
    try:
        server.send(Hello(PROTOCOL_VERSION, os.getpid()))
        while True:
            for fd, _events in server.poller.poll():
                if fd in server.live:
                    server.reap(fd)
                    continue
                received = server.receive()
                if received is None:
                    return EXIT_OK
                server.launch(*_launch_request(*received))
    except (ConnectionResetError, BrokenPipeError):
        # gloved is gone (it refused to start, or exited): the channel's end, said by the
        # kernel rather than by an empty read; nothing to report.
        return EXIT_OK
    except (LauncherProtocolError, OSError) as exc:
        with contextlib.suppress(OSError):
            sys.stderr.write(f"glove-launcher: {exc}\n")
        return EXIT_INTERNAL
