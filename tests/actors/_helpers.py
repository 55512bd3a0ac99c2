"""Small real actors used to drive the runtime in tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec

from glove.actors import Actor, Deferred


class Sleep(msgspec.Struct, frozen=True):
    """Hold the actor busy for ``seconds``."""

    seconds: float


class Record(msgspec.Struct, frozen=True):
    """Append ``value`` to the actor's applied list and reply with it."""

    value: str


class Boom(msgspec.Struct, frozen=True):
    """Make the handler raise ``ValueError``."""


class AskOther(msgspec.Struct, frozen=True):
    """Ask ``Sleep(seconds)`` of the other actor with a generous timeout."""

    seconds: float
    timeout: float


class Later(msgspec.Struct, frozen=True):
    """Reply with a deferred future the test resolves."""


class Worker(Actor):
    """An actor that records what it applied and where it stopped."""

    def __init__(
        self,
        name: str = "worker",
        log: list[str] | None = None,
        *,
        mailbox_size: int = 8,
        other: Actor | None = None,
        stop_delay: float = 0.0,
    ) -> None:
        super().__init__(name, mailbox_size=mailbox_size)
        self.applied: list[str] = []
        self.log = log if log is not None else []
        self.other = other
        self.stop_delay = stop_delay
        self.pending: list[asyncio.Future[object]] = []

    async def on_stop(self) -> None:
        if self.stop_delay:
            try:
                await asyncio.sleep(self.stop_delay)
            except asyncio.CancelledError:
                # A wedged child: it ignores the first cancel to prove grace bounds teardown.
                await asyncio.sleep(self.stop_delay)
        self.log.append(self.name)

    async def handle(self, msg: object) -> object:
        match msg:
            case Sleep(seconds):
                await asyncio.sleep(seconds)
                return seconds
            case Record(value):
                self.applied.append(value)
                return value
            case Boom():
                raise ValueError(f"{self.name} exploded")
            case AskOther(seconds, timeout):
                assert self.other is not None
                return await self.other.ask(Sleep(seconds), timeout=timeout)
            case Later():
                fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
                self.pending.append(fut)
                return Deferred(fut)
        raise TypeError(type(msg).__name__)


async def until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll the loop until ``cond()`` holds, failing after ``timeout`` seconds (a bound for a
    hang, generous for a loaded machine: it returns as soon as ``cond()`` holds)."""
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)
