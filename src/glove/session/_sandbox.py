"""The ``sandbox`` actor: owns one contained process tree for its session.

It launches the session's :class:`~glove.container.SandboxSpec` on start (the clone in
gloved's launcher process when one is installed, else in the actor's own executor; then
everything on the loop through
:class:`~glove.container.AsyncSandbox`), and keeps running after the command ends, holding
the :class:`~glove.container.SandboxResult`, until its session tree is stopped: a permanent
child of a one-strike tree must not exit on its own. Stopping it (the session's teardown, or
a sibling's failure) kills the whole tree first.

Who needs the result while the sandbox runs asks for it (:class:`AwaitResult`: the reply
comes once the command has ended and drained); once the sandbox has stopped, its
:attr:`SandboxActor.result` is read as its exit reason is, after a supervisor's wait.
"""

from __future__ import annotations

import asyncio
import math
import signal
from typing import Final

import msgspec

from glove.actors import Actor, ActorDead, Deferred
from glove.container import AsyncSandbox, FileProjection, SandboxResult, SandboxSpec
from glove.container.linux import OutputHandler

#: How long a stop waits for the killed tree to end and drain before forcing it.
STOP_GRACE_S: Final = 5.0

#: An :class:`AwaitResult` waits as long as the command runs: the asker's own cancellation
#: (its session stopped, its tree failed) ends the wait, not a deadline.
RESULT_WAIT_S: Final = math.inf


class SendSignal(msgspec.Struct, frozen=True):
    """Send a signal to the sandbox's init: TERM, USR1 and USR2 reach the command, INT, QUIT
    and HUP its process group, TSTP (as SIGSTOP) and CONT the whole tree."""

    signum: int


class Kill(msgspec.Struct, frozen=True):
    """Cancel: kill the whole tree now."""


class AwaitResult(msgspec.Struct, frozen=True):
    """Reply with the command's :class:`~glove.container.SandboxResult` once it has ended and
    drained (at once if it has). A sandbox that stops without one (it never launched)
    answers :class:`~glove.actors.ActorDead`."""


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
        self._result: SandboxResult | None = None
        #: The replies of the :class:`AwaitResult` asks still waiting (ours: resolved here).
        self._awaiting: set[asyncio.Future[SandboxResult]] = set()

    @property
    def result(self) -> SandboxResult | None:
        """The command's result once it has ended and drained; read after the sandbox has
        stopped (its exit, as a supervisor sees it). While it runs, ask :class:`AwaitResult`."""
        return self._result

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
        self._ended(await box.wait())

    def _ended(self, result: SandboxResult) -> None:
        """Keep the result (the first one) and answer every ask waiting for it."""
        if self._result is None:
            self._result = result
        for reply in self._awaiting:
            if not reply.done():
                reply.set_result(self._result)
        self._awaiting.clear()

    async def handle(self, msg: object) -> object:
        """Signal or kill the sandbox.

        Raises:
            TypeError: an unknown message.
        """
        box = self._box
        if isinstance(msg, AwaitResult):
            if self._result is not None:
                return self._result
            reply: asyncio.Future[SandboxResult] = asyncio.get_running_loop().create_future()
            self._awaiting.add(reply)
            reply.add_done_callback(self._awaiting.discard)  # an asker that gave up
            return Deferred(reply)
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
        try:
            if box is None:
                return
            if not box.done():
                result = await box.stop(STOP_GRACE_S)
            else:
                result = await box.wait()
            box.close()
            self._ended(result)
        finally:
            for reply in self._awaiting:
                if not reply.done():
                    reply.set_exception(ActorDead(self.name, "stopped without a result"))
            self._awaiting.clear()

    def force_kill(self) -> None:
        """SIGKILL the sandbox's init at once (teardown overran its grace)."""
        if self._box is not None and self._box.process is not None:
            self._box.process.send_signal(signal.SIGKILL)
