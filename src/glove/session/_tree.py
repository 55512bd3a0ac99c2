"""The ``session-<id>`` subtree, and the one driver that runs it to the end.

Both ``glove run`` and ``gloved`` run a contained session the same way::

    session-<id>      Supervisor one_for_all, intensity 0: one strike ends the session
    ├─ ...            what the session needs before the command (an output drain; the
    │                 mediation: audit, mcp-<ext> upstreams, kernel; the agent channel)
    └─ sandbox        SandboxActor: the contained process tree (started last)

:func:`run_session` starts the tree, waits for the sandbox's result or the tree's failure,
and stops the tree (reverse start order: the sandbox is killed first, the audit log and the
drain are closed last), so teardown order, exit codes and audit placement are the same for
every caller. A failure of any child (an upstream that dies, a failed audit append, an
output drain that cannot write) kills the sandbox at once: the caller learns it as
:attr:`SessionOutcome.failure`, and :func:`session_result` turns the outcome into the
command's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from glove.actors import Actor, ChildFailed, ChildSpec, Supervisor, race, start_node
from glove.container import SandboxResult, setup_failure
from glove.errors import GloveError
from glove.exits import EXIT_HOST_PART_FAILED
from glove.session._sandbox import RESULT_WAIT_S, AwaitResult, SandboxActor

#: The sandbox child's name in every session tree.
SANDBOX_CHILD = "sandbox"


class SessionOutcome(NamedTuple):
    """How a session ended.

    Attributes:
        result: the sandbox's result (a cancelled one when a sibling's failure ended it, or
            None when the sandbox never started: its own launch failed).
        failure: the exception that ended the tree early (a child's crash), if any.
        failed_child: the name of the child whose failure ended it.
    """

    result: SandboxResult | None
    failure: BaseException | None
    failed_child: str | None


def session_tree(name: str, before: list[ChildSpec], sandbox: ChildSpec) -> Supervisor:
    """The session's supervisor: ``before`` in order, then the sandbox (one strike)."""
    return Supervisor(name, [*before, sandbox], strategy="one_for_all", intensity=0)


def _failure_of(tree: Supervisor) -> tuple[BaseException | None, str | None]:
    """The root cause of the tree's failure and the direct child it came through."""
    reason = tree.exit_reason
    if reason is None or isinstance(reason, asyncio.CancelledError):
        return None, None
    if not isinstance(reason, ChildFailed):
        return reason, None
    child = reason.path.rsplit("/", 1)[-1]
    cause: BaseException | None = reason
    while isinstance(cause, ChildFailed) and cause.cause is not None:
        cause = cause.cause
    return cause, child


def _sandbox_of(tree: Supervisor) -> SandboxActor | None:
    """The tree's sandbox actor, if it was started."""
    for name, node, _alive in tree.children():
        if name == SANDBOX_CHILD and isinstance(node, SandboxActor):
            return node
    return None


async def run_session(
    tree: Supervisor,
    *,
    on_started: Callable[[Supervisor], None] | None = None,
    stop: asyncio.Event | None = None,
    parent: Supervisor | None = None,
    before_stop: Callable[[], Awaitable[None]] | None = None,
) -> SessionOutcome:
    """Run ``tree`` until its sandbox has a result or a child fails; stop it; say how it ended.

    ``stop``, when set, ends the session early (the sandbox is killed, its result says
    cancelled). ``on_started`` is called once the tree's children exist. ``before_stop``
    is awaited once the sandbox has its result, while the rest of the tree still runs (the
    evaluator takes the end of the stream there); it must not raise. With ``parent``
    (gloved's ``sessions`` supervisor) the tree runs as its temporary child, so it shows in
    ``diag.tree``; otherwise in a task of its own.
    """
    if parent is not None:
        parent.start_child(ChildSpec(tree.name, lambda: tree, restart="temporary"))
        running = parent.child_task(tree.name)
        assert running is not None
        task = running
    else:
        task = start_node(tree)
    sandbox: SandboxActor | None = None
    try:
        await race(task, tree.started.wait())
        sandbox = _sandbox_of(tree)
        if sandbox is None:
            # A child before the sandbox died while starting: the tree is failing; the
            # sandbox never existed, so there is no command result to wait for.
            await asyncio.wait({task})
        else:
            if on_started is not None:
                on_started(tree)
            # The result is the reply to an ask; a sandbox that stopped meanwhile (a
            # sibling's failure) answers ActorDead, and the tree's end says why.
            _, asked, *_ = await race(
                task,
                sandbox.ask(AwaitResult(), timeout=RESULT_WAIT_S, wait=True),
                *(() if stop is None else (stop.wait(),)),
            )
            answered = _answered(asked)  # a failed ask's reason is retrieved here
            if before_stop is not None and answered and not task.done():
                await before_stop()
    finally:
        if not task.done():
            tree.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the reason is read from the tree
    failure, child = _failure_of(tree)
    # The tree has ended: the sandbox's result is read as its exit is.
    result = sandbox.result if sandbox is not None else None
    if failure is not None and child == SANDBOX_CHILD:
        result = None  # the sandbox itself failed (its launch): there is no command result
    return SessionOutcome(result, failure, child)


def _answered(asked: asyncio.Future[Any]) -> bool:
    """The ask for the result has its reply (not cancelled, not failed)."""
    return asked.done() and not asked.cancelled() and asked.exception() is None


async def all_started(*actors: Actor) -> None:
    """Return once every actor has started (a sandbox's ``start_after`` waits on it: no
    connection before the proxy and its audit log are up)."""
    for actor in actors:
        await actor.started.wait()


async def close_once_launched(tree: Supervisor, guest_end: socket.socket) -> None:
    """Close the host's copy of the guest end once the sandbox holds its own, so the proxy
    sees end of file when the helper exits."""
    sandbox = tree.child(SANDBOX_CHILD)
    assert isinstance(sandbox, SandboxActor)
    await sandbox.started.wait()
    guest_end.close()


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
