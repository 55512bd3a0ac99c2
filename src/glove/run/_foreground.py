"""The terminal I/O and signal forwarding ``glove run`` and a proxied ``glove exec`` give
their session (:class:`glove.session.Foreground`): everything else of the session, its
tree, its order, its readiness and its teardown, is :mod:`glove.session`'s.

The sandbox's stdout and stderr go to the host's descriptors 1 and 2 (a PTY's output to 1)
through :class:`~glove.container.linux.FdWriter`, with the terminal filters; its stdin is
descriptor 0 and its window size follows the host's; the host terminal is raw for the
session under ``--pty``; the operator's signals go through :class:`SignalRelay`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from glove.container.linux import FdWriter, RawTerminal
from glove.run._signals import SignalRelay
from glove.session import SandboxLaunch

if TYPE_CHECKING:
    from glove.actors import Supervisor
    from glove.container import SandboxSpec
    from glove.container.linux import OutputFilter


class TerminalForeground:
    """The host's terminal and signals for one foreground session (see the module)."""

    def __init__(self, *, pty: bool, filters: Mapping[int, OutputFilter] | None = None) -> None:
        """Prepare (nothing is taken until :meth:`running`); ``filters`` maps a host fd to
        the filter its output passes (a terminal's)."""
        self._writer = FdWriter({"stdout": 1, "stderr": 2, "pty": 1}, filters)
        self._terminal = RawTerminal(0 if pty else None)
        self._relay = SignalRelay(asyncio.get_running_loop(), self._terminal)

    def launch(self, spec: SandboxSpec) -> SandboxLaunch:
        """The sandbox child: output to the host's fds, stdin 0, window size from fd 0."""
        return SandboxLaunch(spec, on_output=self._writer.write, stdin=0, winsize_from=0)

    def attach(self, tree: Supervisor) -> None:
        """The sandbox runs: signals go to it from now on (the held ones first)."""
        self._relay.attach(tree)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Signals taken before the tree starts (a Ctrl-C then is the command's too), the
        terminal raw for the run, the output flushed after it.

        Raises:
            KeyboardInterrupt: the operator's INT cancelled the run before the sandbox ran.
            SystemExit: TERM, HUP or QUIT did (128 + its number).
        """
        self._relay.install()
        try:
            with self._terminal:
                yield
            await self._writer.flush()
        except asyncio.CancelledError:
            self._relay.reraise()
            raise
        finally:
            self._relay.remove()
