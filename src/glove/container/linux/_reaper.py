"""While the command runs: the init's and the fork path's reaper's reap loop and signal relay.

Both block the signals they pass on and read them from a signalfd (:func:`catch_signals`)
in :func:`reap_until`'s loop, which also reaps every child (orphans included) and ends
the sandbox when the launcher is gone. The reaper hands each signal to the init; the init
gives it to the command, its process group or the whole tree (:func:`pass_on`): see
``docs/sandbox.md`` ("Signals and job control") and decision 0036.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Callable
from typing import Final

from glove.container.linux import _syscalls as sc
from glove.exits import EXIT_SETUP_FAILED

#: Signals the init passes on (everything else it ignores, as pid 1 does); see
#: :func:`pass_on` for where each goes.
FORWARDED_SIGNALS: Final = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGTSTP,
    signal.SIGCONT,
)
#: ... of which these go to the command's whole process group, as a terminal sends them
#: to its foreground job (a shell waiting for a child would otherwise defer INT forever).
GROUP_SIGNALS: Final = frozenset({signal.SIGINT, signal.SIGQUIT, signal.SIGHUP})


def catch_signals() -> int:
    """Block the forwarded signals (and SIGCHLD) and return a signalfd that reads them.

    Not handlers: a handler can be interrupted by the next signal before it records its
    own (CPython's writes its wakeup byte last), so a CONT sent before a TSTP could be
    seen after it and leave the tree stopped (measured: 1 run in 30 of fifty pairs).
    Blocked, a stop and a continue cancel each other while pending (the kernel keeps the
    later), so what the reap loop reads ends as the sender's last word. A blocked signal
    is queued even for the init (never discarded as ignored), and one that arrives before
    the command exists waits. The command starts with an empty mask (both spawn paths).

    Raises:
        OSError: no signalfd (the init reports a setup failure).
    """
    caught = (*FORWARDED_SIGNALS, signal.SIGCHLD)
    signal.pthread_sigmask(signal.SIG_BLOCK, caught)
    return sc.signalfd(caught)


def pass_on(command: int, signum: int) -> None:
    """The init's relay: INT, QUIT and HUP to the command's process group (the command is
    its session and group leader), TSTP as SIGSTOP and CONT to every process of the pid
    namespace but the init (``kill(-1)``: the tree, whatever groups it made; its groups are
    orphaned, so a default TSTP would be discarded), the others to the command itself."""
    with contextlib.suppress(OSError):
        if signum in GROUP_SIGNALS:
            os.killpg(command, signum)
        elif signum == signal.SIGTSTP:
            os.kill(-1, signal.SIGSTOP)
        elif signum == signal.SIGCONT:
            os.kill(-1, signal.SIGCONT)
        else:
            os.kill(command, signum)


def reap_until(child: int, launcher_pidfd: int, signals: int, relay: Callable[[int], None]) -> int:
    """Reap children (orphans included) until ``child`` exits; return its wait status.

    ``signals`` is :func:`catch_signals`'s signalfd: each forwarded signal read from it
    goes to ``relay``, in the order read. Exits at once, taking the whole pid namespace
    with it, if the launcher process is gone.
    """
    while True:
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            if pid == child:
                return wait_status
        ready, _, _ = select.select([signals, launcher_pidfd], [], [])
        if launcher_pidfd in ready:
            os._exit(EXIT_SETUP_FAILED)  # nobody supervises us any more: end the sandbox
        for signum in sc.read_signals(signals):
            if signum in FORWARDED_SIGNALS:
                relay(signum)
