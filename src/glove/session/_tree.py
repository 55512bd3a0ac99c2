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
:attr:`SessionOutcome.failure`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import NamedTuple

from glove.actors import ChildFailed, ChildSpec, Supervisor
from glove.container import SandboxResult
from glove.session._sandbox import SandboxActor

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


async def run_session(
    tree: Supervisor,
    *,
    on_started: Callable[[Supervisor], None] | None = None,
    stop: asyncio.Event | None = None,
    parent: Supervisor | None = None,
) -> SessionOutcome:
    """Run ``tree`` until its sandbox has a result or a child fails; stop it; say how it ended.

    ``stop``, when set, ends the session early (the sandbox is killed, its result says
    cancelled). ``on_started`` is called once the tree's children exist. With ``parent``
    (gloved's ``sessions`` supervisor) the tree runs as its temporary child, so it shows in
    ``diag.tree``; otherwise in a task of its own.
    """
    if parent is not None:
        parent.start_child(ChildSpec(tree.name, lambda: tree, restart="temporary"))
        running = parent.child_task(tree.name)
        assert running is not None
        task = running
    else:
        task = asyncio.get_running_loop().create_task(tree.run(), name=tree.name)
    waits: set[asyncio.Future[object]] = set()
    try:
        await tree.started.wait()
        sandbox = tree.child(SANDBOX_CHILD)
        assert isinstance(sandbox, SandboxActor)
        if on_started is not None:
            on_started(tree)
        # shield: a fresh waiter, so cancelling it below never cancels the result itself.
        waits = {asyncio.shield(sandbox.result), task}  # type: ignore[arg-type]
        if stop is not None:
            waits.add(asyncio.ensure_future(stop.wait()))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waits:
            if waiter is not task:
                waiter.cancel()
        if not task.done():
            tree.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the reason is read from the tree
    failure, child = _failure_of(tree)
    done = sandbox.result.done() and not sandbox.result.cancelled()
    result = sandbox.result.result() if done else None
    if failure is not None and child == SANDBOX_CHILD:
        result = None  # the sandbox itself failed (its launch): there is no command result
    return SessionOutcome(result, failure, child)
