"""Job control for a launcher in the operator's foreground: the terminal's signals, passed on.

A terminal sends INT (^C), QUIT (^\\) and TSTP (^Z) to its foreground process group, and
HUP when it hangs up. ``glove exec`` and ``glove run`` are in that group; the sandbox is
not (its init, the fork path's reaper and its command each start a session of their own),
so the terminal reaches the launcher alone and the launcher passes each signal on to the
sandbox's init exactly once (:data:`HOST_SIGNALS`). The init gives INT, QUIT and HUP to the
command's process group, TERM, USR1 and USR2 to the command, TSTP (as SIGSTOP) and CONT to
the whole tree (``_reaper.pass_on``), and reports how the command ended, so the launcher
exits 128+N as the command did.

For TSTP the launcher then stops itself as a default TSTP would (:func:`suspend`), so the
operator's shell reports the job stopped; once continued (``fg``, ``bg``: CONT) it
continues the tree: the shell's job control covers the sandbox. Under ``--pty`` the host
terminal is raw, so the keys go to the sandbox's own terminal instead, whose line
discipline signals the sandbox's foreground job; a TSTP sent to the launcher (``kill``)
puts the host terminal back in its own mode while it is stopped.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Final

from glove.container.linux._pty import RawTerminal

#: The operator's signals a foreground launcher passes on to its sandbox.
HOST_SIGNALS: Final = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGTSTP,
    signal.SIGCONT,
)


def stop_self() -> None:
    """Stop this process as SIGTSTP's default action would; return once continued.

    In an orphaned process group (nobody could continue it) the kernel discards the
    signal, and this returns at once.
    """
    previous = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
    try:
        os.kill(os.getpid(), signal.SIGTSTP)
    finally:
        signal.signal(signal.SIGTSTP, previous)


def suspend(send: Callable[[int], None], terminal: RawTerminal | None = None) -> None:
    """The operator's TSTP: stop the sandbox's tree (``send(SIGTSTP)`` to its init), stop
    this process with the host terminal in its own mode, and once continued make the
    terminal raw again and continue the tree.

    The tree is continued even when this process was not stopped (an orphaned group):
    the two signals reach the init in order, and the kernel keeps only the later one of a
    stop and a continue still pending, so the tree never stays stopped under a running
    launcher.
    """
    send(signal.SIGTSTP)
    if terminal is not None:
        terminal.leave()
    try:
        stop_self()
    finally:
        if terminal is not None:
            terminal.enter()
        send(signal.SIGCONT)
