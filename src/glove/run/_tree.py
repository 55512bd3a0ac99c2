"""What ``glove run`` and a proxied ``glove exec`` share around their session tree.

Both run one ``session-<id>`` tree (:func:`glove.session.run_session`) in the foreground:
the operator's INT, TERM, HUP, QUIT, TSTP and CONT go to the sandbox (as the blocking
``glove exec`` does; ``glove.container.linux._jobs``),
the terminal's size follows the host's under ``--pty``, and the session's outcome becomes
the command's exit: its own, or why the session ended without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Final

from glove.actors import ActorDead, Busy, Supervisor
from glove.container import SandboxResult
from glove.container._result import setup_failure
from glove.container.linux._jobs import HOST_SIGNALS, suspend
from glove.container.linux._pty import RawTerminal, get_winsize, set_winsize
from glove.errors import GloveError
from glove.session import SANDBOX_CHILD, SandboxActor, SendSignal, SessionOutcome

#: Exit code when a host-side part failed while the command ran (the command was stopped).
EXIT_HOST_PART_FAILED: Final = 124
#: The operator's signals passed on to the command (INT, TERM, HUP, QUIT, TSTP, CONT).
FORWARDED_SIGNALS: Final = HOST_SIGNALS


def forward_signals(
    loop: asyncio.AbstractEventLoop, tree: Supervisor, terminal: RawTerminal | None = None
) -> list[int]:
    """Pass the operator's signals on to the sandbox (``glove.container.linux._jobs``: a
    TSTP stops the tree, then this process, with ``terminal`` in its own mode meanwhile);
    follow the window size.

    Returns the signals installed (the caller removes them).
    """
    sandbox = tree.child(SANDBOX_CHILD)
    installed: list[int] = []

    def now(signum: int) -> None:
        # TSTP and CONT go straight to the init, not through the actor's mailbox: the
        # tree must be told to stop before this process stops (a queued message would
        # wait for the resume) and continued in that order.
        box = sandbox.box if isinstance(sandbox, SandboxActor) else None
        if box is not None:
            box.send_signal(signum)

    def forward(signum: int) -> None:
        if signum == signal.SIGTSTP:
            suspend(now, terminal)
        elif signum == signal.SIGCONT:
            now(signum)
        else:
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


def session_result(
    outcome: SessionOutcome, what: str = "the mediation", whom: str = "the agent"
) -> SandboxResult:
    """The exit of the session: the command's, or why the session ended without it.

    ``what`` names the host-side part that can fail under a running command (``glove
    run``'s mediation, ``glove exec``'s egress proxy) and ``whom`` the command, in the
    result's error.
    """
    failure, result = outcome.failure, outcome.result
    if failure is None:
        return result if result is not None else setup_failure("the sandbox never started")
    if outcome.failed_child == SANDBOX_CHILD or result is None or result.outcome == "setup_error":
        # Nothing ran: the sandbox's launch failed, or a host-side part failed to start.
        why = str(failure) if isinstance(failure, GloveError) else repr(failure)
        return setup_failure(why)
    # One strike: a host-side part (an upstream, the audit log, the proxy) failed under a
    # running command, so its whole sandbox was killed with it.
    return SandboxResult(
        outcome="mediation_failed",
        exit_code=EXIT_HOST_PART_FAILED,
        # A Glove error says itself (an upstream's names its last stderr lines); anything
        # else is a bug, named by its type.
        error=f"{what} failed ({failure if isinstance(failure, GloveError) else repr(failure)}); "
        f"{whom} was stopped",
    )
