"""Paced streams: pulled at the pace the client reads, never ended for a slow reader."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec

from glove.control import CallContext, Limits, MethodRegistry
from glove.testing.control import RawPeer, serving

EVENTS = 5000
PAD_BYTES = 1000
#: A stalled reader may let the producer run ahead by what the socket buffers hold (a few
#: hundred KiB here), never by the whole stream.
MAX_PULLED_WHILE_STALLED = 2000


class Count(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    n: int


class Tick(msgspec.Struct, frozen=True):
    i: int
    pad: str


class Producer:
    """A paced and an unpaced copy of the same stream, counting what was pulled."""

    def __init__(self) -> None:
        self.pulled = 0
        self.registry = MethodRegistry()
        self.registry.stream("paced", Count, self.count, paced=True)
        self.registry.stream("unpaced", Count, self.count)

    async def count(self, params: Count, _call: CallContext) -> AsyncIterator[Tick]:
        for i in range(params.n):
            self.pulled += 1
            yield Tick(i, "x" * PAD_BYTES)


def _run(tmp_path: Path) -> Path:
    return tmp_path / "run"


async def test_a_stalled_reader_of_a_paced_stream_gets_everything_in_order(
    tmp_path: Path,
) -> None:
    """A client that reads nothing for a second then reads on gets every event of a paced
    stream, in order, and its end; meanwhile the handler was not pulled ahead of it."""
    producer = Producer()
    limits = Limits(stream_buffer_bytes=64 * 1024)
    async with serving(producer.registry, _run(tmp_path), limits=limits) as server:
        async with await RawPeer.open(server.paths) as peer:
            await peer.hello()
            await peer.send({"id": 7, "method": "paced", "params": {"n": EVENTS}})
            await asyncio.sleep(1.0)
            assert 0 < producer.pulled < MAX_PULLED_WHILE_STALLED
            seen = []
            while "event" in (reply := await peer.reply()):
                seen.append(reply["event"]["i"])
        assert reply == {"id": 7, "result": {"events": EVENTS}}
        assert seen == list(range(EVENTS))


async def test_the_same_stream_unpaced_overflows(tmp_path: Path) -> None:
    """The control experiment: unpaced, the stalled reader's stream ends with overflow."""
    producer = Producer()
    limits = Limits(stream_buffer_bytes=64 * 1024)
    async with serving(producer.registry, _run(tmp_path), limits=limits) as server:
        async with await RawPeer.open(server.paths) as peer:
            await peer.hello()
            await peer.send({"id": 7, "method": "unpaced", "params": {"n": EVENTS}})
            await asyncio.sleep(1.0)
            while "event" in (reply := await peer.reply()):
                pass
        assert reply["error"]["code"] == "stream_overflow"
