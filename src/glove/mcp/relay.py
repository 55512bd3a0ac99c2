#!/usr/bin/python3
"""glove-relay: the sandbox's command under ``glove run``; hands MCP connections to the host.

This module is copied, as a script, into the sandbox at ``/opt/glove/glove-relay`` and
run by the sandbox's ``/usr/bin/python3`` (standard library only: the sandbox sees the
system Python, not Glove's virtual environment)::

    glove-relay FD -- AGENT [ARGS...]

``FD`` is the guest end of a Unix socketpair inherited from the host (``glove run`` passes
it as descriptor 3); the host end is read by the mediator. Before the agent starts, the
relay listens on the abstract Unix name ``@glove-mcp`` (the sandbox has its own network
namespace, so the name exists only inside it and nothing started later can squat it) and
marks the channel and the listener close-on-exec. It then spawns the agent, in its own
process group, holding neither. Every connection the stdio shim makes to ``@glove-mcp``
is accepted and sent to the host over the channel with ``SCM_RIGHTS`` (one descriptor per
one-byte message); the relay then closes its copy and never reads or writes MCP bytes.

Signals the sandbox's init forwards (TERM, INT, HUP, QUIT, USR1, USR2) are passed on to
the agent: INT, QUIT and HUP to its whole process group (a shell's children too), as a
terminal would send them. When the agent exits, so does the relay, with the agent's status (its exit
code, or 128 + the signal number that killed it). The relay is one process inside the
sandbox and counts against the session's PID limit.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
from types import FrameType

ABSTRACT_NAME = "\0glove-mcp"
LISTEN_BACKLOG = 16
MAX_ACCEPTS_PER_WAKEUP = 16
CONNECTION_BYTE = b"c"
FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
#: ... of which these go to the agent's process group, as the init gives them to ours.
GROUP_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
# Exit codes: glove.exits's values (a standard-library script run by the sandbox's own Python
# cannot import it; tests/test_exits.py holds them equal). A relay started wrongly means the
# sandbox was set up wrongly: nothing ran (125).
EXIT_SETUP_FAILED = 125
EXIT_USAGE = EXIT_SETUP_FAILED  # the former name
EXIT_CANNOT_RUN = 127  # glove.exits.EXIT_NOT_FOUND: the agent could not be started at all
SIGNAL_EXIT_BASE = 128


class UsageError(Exception):
    """The relay was started with a bad command line or descriptor."""


class CannotRun(Exception):
    """The agent could not be executed."""


def _parse(argv: list[str]) -> tuple[int, list[str]]:
    if len(argv) < 4 or argv[2] != "--" or not argv[1].isdigit():
        raise UsageError("usage: glove-relay FD -- AGENT [ARGS...]")
    return int(argv[1]), argv[3:]


def _channel(fd: int) -> socket.socket:
    try:
        channel = socket.socket(fileno=fd)
    except OSError as exc:
        raise UsageError(f"descriptor {fd} is not the host channel: {exc.strerror}") from exc
    if channel.family != socket.AF_UNIX or channel.type != socket.SOCK_STREAM:
        channel.detach()
        raise UsageError(f"descriptor {fd} is not a Unix stream socket")
    channel.set_inheritable(False)
    return channel


def _listen() -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec
    try:
        listener.bind(ABSTRACT_NAME)
        listener.listen(LISTEN_BACKLOG)
    except OSError as exc:
        listener.close()
        raise UsageError(f"cannot listen on @{ABSTRACT_NAME[1:]}: {exc.strerror}") from exc
    listener.setblocking(False)
    return listener


def _controls_terminal() -> bool:
    """Whether stdin is a terminal whose foreground process group is the relay's own."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _spawn_in_foreground(command: list[str]) -> int:
    """Fork the agent into its own process group and make that group the terminal's
    foreground one before it runs, so a TUI can read and set the terminal (a background
    group would be stopped by SIGTTIN/SIGTTOU) and ^C reaches the agent alone.

    Both sides call ``setpgid`` and the child calls ``tcsetpgrp`` (with SIGTTOU ignored)
    before ``execvp``, as a shell does, so there is no window in which the agent runs in
    the background. An exec failure comes back as its errno over a close-on-exec pipe.

    Raises:
        CannotRun: the agent could not be executed.
    """
    failed_read, failed_write = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the agent, before exec: never returns
        try:
            os.close(failed_read)
            os.setpgid(0, 0)
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            os.tcsetpgrp(0, os.getpid())
            for signum in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.execvp(command[0], command)  # noqa: S606 - argv is a list, no shell
        except OSError as exc:
            os.write(failed_write, str(exc.errno or 0).encode())
        except BaseException:  # noqa: BLE001 - the forked child must never unwind
            os.write(failed_write, b"0")
        os._exit(EXIT_CANNOT_RUN)
    os.close(failed_write)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # EACCES once the child has exec'd: it already did it
    failure = os.read(failed_read, 64)
    os.close(failed_read)
    if failure:
        os.waitpid(pid, 0)
        err = int(failure) if failure.isdigit() else 0
        raise CannotRun(f"cannot run {command[0]!r}: {os.strerror(err)}")
    return pid


def _spawn(command: list[str]) -> int:
    """Start the agent in its own process group with default signal handling.

    On a terminal the agent's group becomes the foreground one (see
    :func:`_spawn_in_foreground`); otherwise ``posix_spawnp`` starts it.

    Raises:
        CannotRun: the agent could not be executed.
    """
    if _controls_terminal():
        return _spawn_in_foreground(command)
    try:
        return os.posix_spawnp(
            command[0],
            command,
            os.environ,
            setpgroup=0,
            setsigmask=(),
            setsigdef=signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP},
        )
    except OSError as exc:
        raise CannotRun(f"cannot run {command[0]!r}: {exc.strerror}") from exc


def _hand_over(listener: socket.socket, channel: socket.socket) -> bool:
    """Send each pending connection to the host; False once the host is gone."""
    for _ in range(MAX_ACCEPTS_PER_WAKEUP):
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return True  # a connection reset before it was accepted
        with conn:
            try:
                socket.send_fds(channel, [CONNECTION_BYTE], [conn.fileno()])
            except OSError:
                return False
    return True


def _status(wait_status: int) -> int:
    code = os.waitstatus_to_exitcode(wait_status)
    return code if code >= 0 else SIGNAL_EXIT_BASE - code


def _pass_on(pid: int, signum: int) -> None:
    """INT, QUIT and HUP to ``pid``'s process group (its own: the whole job, as a terminal
    sends them), any other forwarded signal to ``pid`` alone."""
    with contextlib.suppress(ProcessLookupError):
        if signum in GROUP_SIGNALS:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)


def relay(fd: int, command: list[str]) -> int:
    """Serve ``command`` (the agent) until it exits; return its status.

    Raises:
        UsageError: ``fd`` is not a Unix stream socket, or the name is taken.
        CannotRun: the agent could not be executed.
    """
    channel = _channel(fd)
    listener = _listen()
    agent = 0
    pending: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if agent:
            _pass_on(agent, signum)
        else:
            pending.append(signum)

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    agent = _spawn(command)
    for early in pending:
        _pass_on(agent, early)
    try:
        exited = os.pidfd_open(agent)
    except OSError as exc:  # a kernel older than 5.3: refuse rather than run unwatched
        os.kill(agent, signal.SIGKILL)
        os.waitpid(agent, 0)
        raise UsageError(f"cannot watch the agent (pidfd_open): {exc.strerror}") from exc
    with selectors.DefaultSelector() as selector:
        selector.register(listener, selectors.EVENT_READ)
        selector.register(channel, selectors.EVENT_READ)
        selector.register(exited, selectors.EVENT_READ)
        while True:
            ready = {key.fileobj for key, _ in selector.select()}
            if exited in ready:
                break
            if channel in ready or (listener in ready and not _hand_over(listener, channel)):
                # The host never writes: readable means it hung up. New connections are
                # refused from now on; the agent keeps running.
                selector.unregister(listener)
                selector.unregister(channel)
                listener.close()
    listener.close()
    channel.close()
    os.close(exited)
    _, wait_status = os.waitpid(agent, 0)
    return _status(wait_status)


def main() -> int:
    """Parse the command line, run the agent behind the relay and return its status."""
    try:
        fd, command = _parse(sys.argv)
        return relay(fd, command)
    except UsageError as exc:
        sys.stderr.write(f"glove-relay: {exc}\n")
        return EXIT_SETUP_FAILED
    except CannotRun as exc:
        sys.stderr.write(f"glove-relay: {exc}\n")
        return EXIT_CANNOT_RUN


if __name__ == "__main__":
    sys.exit(main())
