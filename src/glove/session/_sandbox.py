"""The ``sandbox`` actor: owns one contained process tree for its session.

It launches the session's :class:`~glove.container.SandboxSpec` on start (the clone in
gloved's launcher process when one is installed, else in the actor's own executor; then
everything on the loop through
:class:`~glove.container.AsyncSandbox`), and keeps running after the command ends, holding
the :class:`~glove.container.SandboxResult` in :attr:`SandboxActor.result`, until its session
tree is stopped: a permanent child of a one-strike tree must not exit on its own. Stopping it
(the session's teardown, or a sibling's failure) kills the whole tree first.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Final

import msgspec

from glove.actors import Actor
from glove.container import AsyncSandbox, FileProjection, SandboxResult, SandboxSpec
from glove.container.linux import OutputHandler

#: How long a stop waits for the killed tree to end and drain before forcing it.
STOP_GRACE_S: Final = 5.0


class SendSignal(msgspec.Struct, frozen=True):
    """Send a signal to the sandbox's init: TERM, USR1 and USR2 reach the command, INT, QUIT
    and HUP its process group, TSTP (as SIGSTOP) and CONT the whole tree."""

    signum: int


class Kill(msgspec.Struct, frozen=True):
    """Cancel: kill the whole tree now."""


class SandboxActor(Actor):
    """One sandbox, owned from the loop (see the module docstring)."""

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        on_output: OutputHandler,
        stdin: int | None = None,
        winsize_from: int | None = None,
        terminal_size: tuple[int, int] | None = None,
        start_after: asyncio.Future[None] | None = None,
        name: str = "sandbox",
        projections: tuple[FileProjection, ...] = (),
    ) -> None:
        """Prepare; ``start_after`` is awaited before the launch (the mediation's readiness:
        the agent must not start before its tools exist). ``projections`` are mounted
        read-only in the sandbox (the launch closes them)."""
        super().__init__(name, mailbox_size=16)
        self.spec = spec
        self._on_output = on_output
        self._stdin = stdin
        self._winsize_from = winsize_from
        self._terminal_size = terminal_size
        self._start_after = start_after
        self._projections = projections
        self._box: AsyncSandbox | None = None
        #: Resolved with the sandbox's result once it has ended and drained.
        self.result: asyncio.Future[SandboxResult] = asyncio.get_running_loop().create_future()

    @property
    def launched(self) -> asyncio.Event:
        """Set once the command runs: the actor runtime's own ``started`` (set as
        :meth:`on_start` returns, in the same step), so a sibling waits on its start, as a
        supervisor does, never on an event of the sandbox's own."""
        return self.started

    @property
    def box(self) -> AsyncSandbox | None:
        """The running sandbox (pid, PTY master), once launched."""
        return self._box

    async def on_start(self) -> None:
        """Launch the sandbox; a spec the host refuses crashes the actor (one strike).

        Raises:
            SandboxError: the spec cannot be enforced or is invalid here.
        """
        if self._start_after is not None:
            await asyncio.shield(self._start_after)
        box = AsyncSandbox(
            self.spec,
            on_output=self._on_output,
            stdin=self._stdin,
            winsize_from=self._winsize_from,
            terminal_size=self._terminal_size,
            projections=self._projections,
        )
        self._box = box
        await box.start(self.executor)
        self.spawn_task(self._await_result(box), name="result")

    async def _await_result(self, box: AsyncSandbox) -> None:
        result = await box.wait()
        if not self.result.done():
            self.result.set_result(result)

    async def handle(self, msg: object) -> object:
        """Signal or kill the sandbox.

        Raises:
            TypeError: an unknown message.
        """
        box = self._box
        if isinstance(msg, SendSignal):
            if box is not None:
                box.send_signal(msg.signum)
            return None
        if isinstance(msg, Kill):
            if box is not None:
                box.kill()
            return None
        return await super().handle(msg)

    async def on_stop(self) -> None:
        """Kill the tree and wait (bounded) for it to end; its result is kept."""
        box = self._box
        if box is None:
            return
        if not box.done():
            result = await box.stop(STOP_GRACE_S)
        else:
            result = await box.wait()
        box.close()
        if not self.result.done():
            self.result.set_result(result)

    def force_kill(self) -> None:
        """SIGKILL the sandbox's init at once (teardown overran its grace)."""
        if self._box is not None and self._box.process is not None:
            self._box.process.send_signal(signal.SIGKILL)
