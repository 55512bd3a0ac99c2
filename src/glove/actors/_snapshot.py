"""A consistent, synchronous view of a live actor tree, and the loop-lag monitor.

:func:`snapshot` runs on the loop thread in one synchronous pass: nothing can change under
it, and it never touches a mailbox, so a stuck actor cannot block diagnostics. It reports
message *type names* only, never payloads (the wallet bridge carries secrets).
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

import msgspec

from glove.actors._actor import Actor
from glove.actors._supervisor import Supervisor

LOOP_LAG_INTERVAL_S: Final = 0.1
LOOP_LAG_WINDOW: Final = 50


class ExitInfo(msgspec.Struct, frozen=True):
    """A child exit as shown by diagnostics."""

    at: float
    child: str
    reason: str | None


class NodeSnapshot(msgspec.Struct, frozen=True, omit_defaults=True):
    """One node of the tree: an actor or a supervisor."""

    name: str
    kind: str
    state: str
    alive: bool = True
    restarts: int = 0
    mailbox_depth: int | None = None
    mailbox_capacity: int | None = None
    busy_with: str | None = None
    busy_for_s: float | None = None
    handled: int | None = None
    dropped_stale: int | None = None
    exit_reason: str | None = None
    #: The operating-system process an actor owns (``os_pid``: gloved's launcher).
    pid: int | None = None
    strategy: str | None = None
    intensity: int | None = None
    period_s: float | None = None
    exits: list[ExitInfo] = msgspec.field(default_factory=list)
    children: list[NodeSnapshot] = msgspec.field(default_factory=list)


class LoopLag(msgspec.Struct, frozen=True):
    """How late the event loop woke up, in milliseconds, over the recent window."""

    last_ms: float
    max_ms: float
    mean_ms: float
    samples: int


class TreeSnapshot(msgspec.Struct, frozen=True):
    """The whole tree plus the loop lag, taken at ``taken_at`` (wall clock)."""

    taken_at: float
    root: NodeSnapshot
    loop_lag: LoopLag | None


class LoopLagMonitor(Actor):
    """Measures how late the loop wakes from a fixed sleep: a blocking call shows here."""

    def __init__(self, name: str = "loop-lag", *, interval: float = LOOP_LAG_INTERVAL_S) -> None:
        super().__init__(name, mailbox_size=1)
        self.interval = interval
        self._samples: list[float] = []
        self._max_ms = 0.0

    async def on_start(self) -> None:
        """Start the sampling task."""
        self.spawn_task(self._sample(), name="sampler")

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(self.interval)
            lag_ms = max(0.0, (loop.time() - t0 - self.interval) * 1000.0)
            self._samples.append(lag_ms)
            del self._samples[:-LOOP_LAG_WINDOW]
            self._max_ms = max(self._max_ms, lag_ms)

    def stats(self) -> LoopLag | None:
        """The lag figures so far, or None before the first sample."""
        if not self._samples:
            return None
        return LoopLag(
            last_ms=round(self._samples[-1], 3),
            max_ms=round(self._max_ms, 3),
            mean_ms=round(sum(self._samples) / len(self._samples), 3),
            samples=len(self._samples),
        )


def _node(node: Actor | Supervisor, now: float, *, alive: bool, restarts: int) -> NodeSnapshot:
    reason = None if node.exit_reason is None else repr(node.exit_reason)
    if isinstance(node, Supervisor):
        return NodeSnapshot(
            name=node.name,
            kind="supervisor",
            state=node.state,
            alive=alive,
            restarts=restarts,
            exit_reason=reason,
            strategy=node.strategy,
            intensity=node.intensity,
            period_s=node.period,
            exits=[ExitInfo(round(e.at, 3), e.child, e.reason) for e in node.exits],
            children=[
                _node(child, now, alive=child_alive, restarts=node.restarts[name])
                for name, child, child_alive in node.children()
            ],
        )
    busy = node.busy
    pid = getattr(node, "os_pid", None)
    return NodeSnapshot(
        name=node.name,
        kind=type(node).__name__,
        state=node.state,
        alive=alive,
        restarts=restarts,
        mailbox_depth=node.mailbox_depth,
        mailbox_capacity=node.mailbox_capacity,
        busy_with=None if busy is None else busy[0],
        busy_for_s=None if busy is None else round(now - busy[1], 4),
        handled=node.handled,
        dropped_stale=node.dropped_stale,
        exit_reason=reason,
        pid=pid if isinstance(pid, int) else None,
    )


def _find_lag(node: Actor | Supervisor) -> LoopLagMonitor | None:
    if isinstance(node, LoopLagMonitor):
        return node
    if isinstance(node, Supervisor):
        for _, child, _ in node.children():
            if (found := _find_lag(child)) is not None:
                return found
    return None


def snapshot(root: Actor | Supervisor) -> TreeSnapshot:
    """Take a consistent view of the live tree under ``root`` (call on the loop thread)."""
    now = asyncio.get_running_loop().time()
    monitor = _find_lag(root)
    return TreeSnapshot(
        taken_at=time.time(),
        root=_node(root, now, alive=root.state in ("starting", "running"), restarts=0),
        loop_lag=None if monitor is None else monitor.stats(),
    )


def render_tree(tree: TreeSnapshot) -> str:
    """Render a snapshot as an indented text tree for people."""
    lines: list[str] = []

    def describe(n: NodeSnapshot) -> str:
        if n.kind == "supervisor":
            head = f"{n.name}  [{n.strategy} {n.intensity}/{n.period_s}s]  {n.state}"
        else:
            head = f"{n.name}  {n.kind}  {n.state}  mbox {n.mailbox_depth}/{n.mailbox_capacity}"
            if n.pid is not None:
                head += f"  pid {n.pid}"
            if n.busy_with is not None:
                head += f"  busy {n.busy_with} {n.busy_for_s:.3f}s"
        if n.restarts:
            head += f"  restarts={n.restarts}"
        if n.exit_reason:
            head += f"  exit={n.exit_reason}"
        return head

    def walk(n: NodeSnapshot, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.append(prefix + branch + describe(n))
        inner = prefix + ("" if top else ("   " if last else "│  "))
        for e in n.exits:
            stamp = time.strftime("%H:%M:%S", time.gmtime(e.at))
            if e.reason is None:
                lines.append(f"{inner}│ - {stamp} {e.child}: exited normally")
            else:
                lines.append(f"{inner}│ ! {stamp} {e.child}: {e.reason}")
        for i, child in enumerate(n.children):
            walk(child, inner, i == len(n.children) - 1, top=False)

    walk(tree.root, "", last=True, top=True)
    if tree.loop_lag is not None:
        lag = tree.loop_lag
        lines.append(f"loop lag: last {lag.last_ms} ms, max {lag.max_ms} ms, mean {lag.mean_ms} ms")
    return "\n".join(lines)
