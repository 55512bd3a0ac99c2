"""Events and futures between siblings are messages or supervisor waits (issue 21, item 4).

Every ``asyncio.Event()`` and ``create_future()`` in ``src/glove`` is listed here, by module,
with what it is; docs/architecture.md ("Coordination") says the same in prose. A new one
fails this test until it is listed: an event or future that one actor sets and a sibling
awaits is not allowed (a message, an ask's reply, or a wait on the runtime's own
``started`` or a child's task is).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Final

import glove
from tests._ast import parse as parse_source

SRC = Path(glove.__file__).resolve().parent

#: What each kind is (the reason it may stay).
KINDS: Final = {
    "runtime": "the actor runtime's own: an actor's or supervisor's started, an ask's reply",
    "reply": "one ask's or request's reply, made per request by its owner and resolved by it "
    "(a Deferred, or a connection's request table): the message's answer",
    "internal": "made, set and awaited inside one actor or one object (its own tasks and "
    "callbacks, or the object's own owner), never by a sibling",
    "backpressure": "an output handler's room: the writer waits for the reader's space, as a "
    "send waits for mailbox space",
    "doorbell": "a stream's wake-up (a control or HTTP stream task, not an actor, has no "
    "mailbox): rung by the actor that changed what the stream reads (docs/decisions/0050)",
}

#: Module -> the kinds of its events and futures, in source order.
INVENTORY: Final[dict[str, tuple[str, ...]]] = {
    "actors/_actor.py": ("runtime", "runtime"),  # started; an ask's reply
    "actors/_supervisor.py": ("runtime",),  # started
    "audit/_log.py": ("reply", "reply"),  # durable, written: an append's Deferred replies
    "cli/_terminal_client.py": ("internal", "internal"),  # the attach client's keys, detach
    "container/linux/_async.py": ("internal", "internal"),  # AsyncSandbox: readable, done
    "container/linux/_async_run.py": ("internal", "internal"),  # the reaper's wait, idle
    # LauncherClient (owned by the launcher actor): ended, hello, a request's reply, writable
    "container/linux/_launcher_client.py": ("internal", "internal", "reply", "internal"),
    "control/_async_client.py": ("reply",),  # a request's response, by id
    "control/_registry.py": ("internal",),  # a call's ``gone``: its own connection's
    "egress/_admission.py": ("internal",),  # ends_pending: the proxy's own admission core
    "egress/_channel.py": ("internal",),  # the receiver's closed (its owner's)
    "egress/_pump.py": ("internal",),  # one fd wait of a pump
    "journal/_writer.py": ("reply", "internal", "reply"),  # refusal, idle, a receipt
    "mcp/_agent_session.py": ("reply",),  # a request to the agent, by id
    "mcp/_http_server.py": ("reply", "internal"),  # a POST's answer; the server's interrupt
    "mcp/_http_streams.py": ("doorbell", "doorbell"),  # an SSE stream's ended, detached
    "mcp/_service.py": ("internal",),  # glove mcp serve's interrupt (its signal handler)
    "mcp/_upstream.py": ("reply",),  # a forwarded request's Deferred reply
    "mcp/_upstream_stdio.py": ("internal", "internal"),  # stderr ended, exited
    "session/_driver.py": ("internal",),  # _stop: the driver's own, to its contained task
    "session/_evaluation.py": ("backpressure",),  # the evaluator's room
    "session/_pty_drain.py": ("internal", "internal", "backpressure"),  # dirty, pressure, room
    "session/_registry.py": ("reply",),  # a session step's Deferred reply (its task's)
    "session/_sandbox.py": ("reply",),  # an AwaitResult's Deferred reply
    "session/_viewers.py": ("doorbell", "doorbell"),  # a viewer's wake; a session's end
    "wallet/_worker.py": ("internal",),  # closed: the worker's exit, seen by its owner
}


def _is_event_or_future(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "create_future":
            return True
        if isinstance(func, ast.Attribute) and func.attr == "Event" and not node.args:
            return isinstance(func.value, ast.Name) and func.value.id == "asyncio"
        for kw in node.keywords:  # field(default_factory=asyncio.Event)
            value = kw.value
            if (
                kw.arg == "default_factory"
                and isinstance(value, ast.Attribute)
                and value.attr == "Event"
            ):
                return True
    return False


def _found() -> Counter[str]:
    found: Counter[str] = Counter()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for node in ast.walk(parse_source(path.read_text())):
            if _is_event_or_future(node):
                found[rel] += 1
    return found


def test_every_event_and_future_is_listed_with_what_it_is() -> None:
    """The source holds exactly the events and futures listed (none crossing siblings)."""
    listed = Counter({module: len(kinds) for module, kinds in INVENTORY.items()})
    assert _found() == listed


def test_every_listed_kind_is_explained() -> None:
    kinds = {kind for listed in INVENTORY.values() for kind in listed}
    assert kinds <= set(KINDS)
