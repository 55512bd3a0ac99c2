"""The operator's signals and window size, passed on to a session's sandbox.

``glove run`` and a proxied ``glove exec`` run one ``session-<id>`` tree
(:func:`glove.session.run_session`) in the foreground: the operator's INT, TERM, HUP, QUIT,
TSTP and CONT go to the sandbox (as the blocking ``glove exec`` does;
``glove.container.linux``'s job control; :class:`SignalRelay`), and the terminal's size
follows the host's under ``--pty``. The session's outcome becomes the command's exit
through :func:`glove.session.session_result`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
from typing import Final

from glove.actors import Supervisor
from glove.container.linux import HOST_SIGNALS, RawTerminal, get_winsize, set_winsize, suspend
from glove.session import SANDBOX_CHILD, SandboxActor

#: The operator's signals passed on to the command (INT, TERM, HUP, QUIT, TSTP, CONT).
FORWARDED_SIGNALS: Final = HOST_SIGNALS

#: Stops and continues held at most while the sandbox is not running yet (oldest dropped).
MAX_HELD_SIGNALS: Final = 64


class SignalRelay:
    """The operator's signals for one session tree, passed on to its sandbox's init.

    :meth:`install` goes in (from the task that runs the session) before the tree
    starts. Until :meth:`attach` says the sandbox runs, INT, TERM, HUP and QUIT cancel
    that task, so a start that hangs (an upstream that never answers) can still be left
    and the tree is stopped on the way out; the task then calls :meth:`reraise`, which
    makes it exit 130 for INT (as Python's own handler would) and 128+N for the others.
    TSTP stops this process, and the
    stop and the continue are held for the tree (the last :data:`MAX_HELD_SIGNALS`). From
    then on every signal goes to the sandbox's init, a TSTP stopping the tree and then
    this process, with ``terminal`` in its own mode meanwhile
    (``glove.container.linux._jobs``). The window size follows the host's (``--pty``).
    Signals go to the init straight from the loop, not through the sandbox actor's
    mailbox: the tree must be told to stop before this process stops (a queued message
    would wait for the resume), and a stop and a continue stay in order.

    """

    def __init__(self, loop: asyncio.AbstractEventLoop, terminal: RawTerminal | None = None):
        """Prepare (nothing is installed until :meth:`install`)."""
        self._loop = loop
        self._terminal = terminal
        self._sandbox: SandboxActor | None = None
        self._held: collections.deque[int] = collections.deque(maxlen=MAX_HELD_SIGNALS)
        self._installed: list[int] = []
        self._session: asyncio.Task[object] | None = None
        #: The signal that ended the session before its sandbox ran, if one did.
        self.interrupted: int | None = None

    def install(self) -> None:
        """Take the operator's signals (and SIGWINCH when stdin is a terminal); a signal
        that ends the session before the sandbox runs cancels the calling task."""
        self._session = asyncio.current_task()
        for signum in FORWARDED_SIGNALS:
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.add_signal_handler(signum, self._on_signal, signum)
                self._installed.append(signum)
        if os.isatty(0):
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.add_signal_handler(signal.SIGWINCH, self._follow_size)
                self._installed.append(signal.SIGWINCH)

    def attach(self, tree: Supervisor) -> None:
        """The tree's sandbox runs: pass on what was held, and from now on at once."""
        child = tree.child(SANDBOX_CHILD)
        self._sandbox = child if isinstance(child, SandboxActor) else None
        held = list(self._held)
        self._held.clear()
        for signum in held:
            self._send(signum)

    def remove(self) -> None:
        """Give the signals back to Python's defaults (idempotent)."""
        for signum in self._installed:
            self._loop.remove_signal_handler(signum)
        self._installed = []

    def _send(self, signum: int) -> None:
        box = self._sandbox.box if self._sandbox is not None else None
        if box is not None:
            box.send_signal(signum)
        elif signum in (signal.SIGTSTP, signal.SIGCONT):
            self._held.append(signum)

    def _on_signal(self, signum: int) -> None:
        if signum == signal.SIGTSTP:
            suspend(self._send, self._terminal)
        elif signum == signal.SIGCONT or self._sandbox is not None:
            self._send(signum)
        elif self.interrupted is None:
            self.interrupted = signum
            if self._session is not None:
                self._session.cancel()

    def reraise(self) -> None:
        """In the session's task, once cancelled: end as the signal that cancelled it
        said (nothing when none did: the cancellation was someone else's).

        Raises:
            KeyboardInterrupt: it was the operator's INT (the CLI exits 130).
            SystemExit: TERM, HUP or QUIT (128 + its number).
        """
        if self.interrupted == signal.SIGINT:
            raise KeyboardInterrupt
        if self.interrupted is not None:
            raise SystemExit(128 + self.interrupted)

    def _follow_size(self) -> None:
        box = self._sandbox.box if self._sandbox is not None else None
        size = get_winsize(0)
        if box is not None and box.master is not None and size is not None:
            set_winsize(box.master, size)
