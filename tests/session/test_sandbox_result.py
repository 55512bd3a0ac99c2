"""The sandbox's result reaches its readers as a message (issue 21, item 4): the reply to
:class:`AwaitResult` while the sandbox runs, its ``result`` once it has stopped (read after
a wait on its tree, as an exit reason is). No future of the sandbox is shared with another
actor. Real sandboxes, in this process."""

from __future__ import annotations

import asyncio

import pytest

from glove.actors import ActorDead, Supervisor, start_node
from glove.container import Bind, SandboxResult, SandboxSpec
from glove.session import (
    SANDBOX_CHILD,
    AwaitResult,
    SandboxActor,
    SandboxLaunch,
    build_session,
    run_session,
)
from tests.actors._helpers import until

#: The command: ends with status 3 a little after it started (so asks can come first).
EXITS_3 = ("/bin/sh", "-c", "sleep 0.3; exit 3")
#: What the shell needs inside the sandbox.
BINDS = (Bind("/usr"), Bind("/bin", optional=True), Bind("/lib", optional=True),
         Bind("/lib64", optional=True))  # fmt: skip


def _tree(name: str, argv: tuple[str, ...]) -> Supervisor:
    spec = SandboxSpec(argv=argv, binds=BINDS, env={"PATH": "/usr/bin:/bin"})
    return build_session(name, SandboxLaunch(spec, on_output=lambda _s, _d: None))


def _sandbox(tree: Supervisor) -> SandboxActor:
    sandbox = tree.child(SANDBOX_CHILD)
    assert isinstance(sandbox, SandboxActor)
    return sandbox


async def test_every_asker_gets_the_result_asked_before_or_after_it_ended() -> None:
    """Asked before the command ends, the reply comes when it ends, to every asker; asked
    after, at once. The sandbox keeps running until its tree stops, and then holds the same
    result."""
    tree = _tree("r1", EXITS_3)
    task = start_node(tree)
    try:
        await tree.started.wait()
        sandbox = _sandbox(tree)
        first, second = await asyncio.gather(
            sandbox.ask(AwaitResult(), timeout=30), sandbox.ask(AwaitResult(), timeout=30)
        )
        assert isinstance(first, SandboxResult)
        assert first.exit_code == 3
        assert second is first
        assert await sandbox.ask(AwaitResult(), timeout=1) is first
        assert sandbox.state == "running"
    finally:
        tree.stop()
        await asyncio.wait({task})
    assert sandbox.result is first


async def test_a_sandbox_stopped_under_an_ask_answers_it_with_the_killed_result() -> None:
    """An asker that gives up leaves no reply behind. Stopping the sandbox (its session's
    teardown) kills the command; the waiting ask gets that result, which is also what the
    stopped sandbox holds."""
    tree = _tree("r2", ("/bin/sh", "-c", "sleep 30"))
    task = start_node(tree)
    try:
        await tree.started.wait()
        sandbox = _sandbox(tree)
        gave_up = asyncio.ensure_future(sandbox.ask(AwaitResult(), timeout=30))
        await until(lambda: bool(sandbox._awaiting))
        gave_up.cancel()
        await until(lambda: not sandbox._awaiting)  # its reply went with it
        assert sandbox.result is None  # still running: nothing else emptied it
        waiting = asyncio.ensure_future(sandbox.ask(AwaitResult(), timeout=30))
        await until(lambda: bool(sandbox._awaiting))
    finally:
        tree.stop()
        await asyncio.wait({task})
    reply = await waiting
    assert isinstance(reply, SandboxResult)
    assert reply is sandbox.result
    assert reply.exit_code != 0
    with pytest.raises(ActorDead):
        await sandbox.ask(AwaitResult(), timeout=1)


async def test_the_session_driver_learns_the_result_while_the_tree_runs() -> None:
    """``run_session`` gets the result as its ask's reply: ``before_stop`` runs with the
    sandbox (and the rest of the tree) still running, and the outcome carries the result."""
    tree = _tree("r3", EXITS_3)
    seen: list[str] = []

    async def before_stop() -> None:
        seen.append(_sandbox(tree).state)

    outcome = await run_session(tree, before_stop=before_stop)
    assert seen == ["running"]
    assert outcome.failure is None
    assert outcome.result is not None
    assert outcome.result.exit_code == 3
    assert outcome.result is _sandbox(tree).result


async def test_no_future_of_the_sandbox_is_shared() -> None:
    """The sandbox actor holds no future another actor could await: the replies to its
    asks are its own, made per ask."""
    tree = _tree("r4", ("/bin/true",))
    task = start_node(tree)
    try:
        await tree.started.wait()
        sandbox = _sandbox(tree)
        shared = [
            k
            for k, v in vars(sandbox).items()
            if isinstance(v, asyncio.Future) and not k.startswith("_actor_")  # the runtime's
        ]
        assert shared == []
    finally:
        tree.stop()
        await asyncio.wait({task})
