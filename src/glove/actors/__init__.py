"""Glove's actor runtime: bounded mailboxes, deadline-carrying messages, supervision.

See DESIGN.md §2 for the rules and ``docs/decisions/0001-asyncio-actors.md`` for why this
is built on asyncio rather than pykka.
"""

from glove.actors._actor import (
    DEFAULT_MAILBOX_SIZE,
    DEFAULT_TIMEOUT_S,
    NOT_NOW,
    Actor,
    ActorState,
)
from glove.actors._deadline import current_deadline, fresh_context, reset_deadline, set_deadline
from glove.actors._envelope import Deferred, Envelope
from glove.actors._running import running
from glove.actors._snapshot import (
    LoopLag,
    LoopLagMonitor,
    NodeSnapshot,
    TreeSnapshot,
    render_tree,
    snapshot,
)
from glove.actors._supervisor import ChildSpec, ExitRecord, Restart, Strategy, Supervisor
from glove.actors._tasks import Node, TaskOwner, race, settle, spawn_node, start_node
from glove.actors.errors import (
    ActorDead,
    ActorError,
    Busy,
    ChildFailed,
    DeadlineExceeded,
    DeadlineOverrun,
)

__all__ = [
    "DEFAULT_MAILBOX_SIZE",
    "DEFAULT_TIMEOUT_S",
    "NOT_NOW",
    "Actor",
    "ActorDead",
    "ActorError",
    "ActorState",
    "Busy",
    "ChildFailed",
    "ChildSpec",
    "DeadlineExceeded",
    "DeadlineOverrun",
    "Deferred",
    "Envelope",
    "ExitRecord",
    "LoopLag",
    "LoopLagMonitor",
    "Node",
    "NodeSnapshot",
    "Restart",
    "Strategy",
    "Supervisor",
    "TaskOwner",
    "TreeSnapshot",
    "current_deadline",
    "fresh_context",
    "race",
    "render_tree",
    "reset_deadline",
    "running",
    "set_deadline",
    "settle",
    "snapshot",
    "spawn_node",
    "start_node",
]
