"""The operator's signals and window size, passed on to a session's sandbox.

``glove run`` and a proxied ``glove exec`` run one ``session-<id>`` tree
(:func:`glove.session.run_session`) in the foreground: the operator's TERM, INT and HUP go
to the sandbox (as the blocking ``glove exec`` does), and the terminal's size follows the
host's under ``--pty``. The session's outcome becomes the command's exit through
:func:`glove.session.session_result`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Final

from glove.actors import ActorDead, Busy, Supervisor
from glove.container.linux import get_winsize, set_winsize
from glove.session import SANDBOX_CHILD, SandboxActor, SendSignal

#: The operator's signals passed on to the command.
FORWARDED_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def forward_signals(loop: asyncio.AbstractEventLoop, tree: Supervisor) -> list[int]:
    """Pass the operator's TERM, INT and HUP on to the sandbox; follow the window size.

    Returns the signals installed (the caller removes them).
    """
    sandbox = tree.child(SANDBOX_CHILD)
    installed: list[int] = []

    def forward(signum: int) -> None:
        with contextlib.suppress(ActorDead, Busy):
            sandbox.tell(SendSignal(signum))  # type: ignore[union-attr]

    for signum in FORWARDED_SIGNALS:
        with contextlib.suppress(ValueError, RuntimeError):
            loop.add_signal_handler(signum, forward, signum)
            installed.append(signum)
    if os.isatty(0):

        def follow_size() -> None:
            box = sandbox.box if isinstance(sandbox, SandboxActor) else None
            size = get_winsize(0)
            if box is not None and box.master is not None and size is not None:
                set_winsize(box.master, size)

        with contextlib.suppress(ValueError, RuntimeError):
            loop.add_signal_handler(signal.SIGWINCH, follow_size)
            installed.append(signal.SIGWINCH)
    return installed
