"""Copying bytes both ways between the sandbox's connection and the upstream one.

One task per direction, both owned and reaped by :func:`relay`, with a deadline on every
await. A direction that sees end of file half-closes its destination and ends; a tunnel ends
when both have, an HTTP exchange when the response has (the request side is cut at the end
of its body by a *gate*: bytes after it are never forwarded). A connection where neither
side moved a byte for ``idle_timeout`` seconds ends, as does a peer that stops reading for
that long (the send deadline). Resets and broken pipes end the whole connection; they are
the peers' business, reported in the outcome, never raised.

Two ways to copy, both bounded (nothing grows with what the peers send):

* **copy**: ``recv_into`` a buffer of :data:`CHUNK_BYTES` from a :class:`BufferPool`, then
  ``sendall``. Every direction starts here (no pipe to set up for a short exchange), and a
  direction with a gate (an HTTP request body) or without ``os.splice`` stays here.
* **splice** (Linux): socket to a pipe to socket, in the kernel, up to :data:`PIPE_BYTES`
  in flight; the bytes never enter Python. A gate-free direction switches to it after its
  first read of :data:`SPLICE_THRESHOLD_BYTES` or more (a bulk transfer).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from glove.actors import TaskOwner

#: Bytes read per receive on the copy path, in each direction.
CHUNK_BYTES: Final = 64 * 1024
#: Buffers kept for reuse (a fresh buffer costs a zeroing per connection): 2 MiB at most.
MAX_POOLED_BUFFERS: Final = 32
#: Pipe capacity asked for on the splice path (the kernel may cap it at pipe-max-size).
PIPE_BYTES: Final = 1024 * 1024
#: Bytes moved per splice call.
SPLICE_BYTES: Final = 1024 * 1024
#: One read this large moves a direction from the copy path to splice (a bulk transfer).
SPLICE_THRESHOLD_BYTES: Final = 64 * 1024
#: Seconds a connection may see no byte in either direction.
DEFAULT_IDLE_TIMEOUT_S: Final = 300.0
_F_SETPIPE_SZ: Final = 1031
_SPLICE_FLAGS: Final = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
HAVE_SPLICE: Final = hasattr(os, "splice")

Outcome = Literal["closed", "idle", "reset", "malformed-body"]
Gate = Callable[[memoryview], tuple[bytes | memoryview, bool]]
"""``gate(chunk) -> (what to forward now, done)``: where the request body ends.

What it returns is the part of ``chunk`` (and of bytes it held back from earlier chunks)
that it has checked; once ``done``, nothing more of this direction is forwarded.
"""


class GateError(Exception):
    """A gate found the request body malformed: the exchange ends, nothing more is sent."""


class _Idle(Exception):
    """Neither side moved a byte for the idle timeout (or a peer stopped reading)."""


@dataclass(slots=True)
class Traffic:
    """Bytes copied so far: ``up`` from the sandbox, ``down`` to it."""

    up: int = 0
    down: int = 0
    last: float = field(default=0.0)

    def count(self, amount: int, *, upward: bool, now: float) -> None:
        """Record ``amount`` bytes moved in one direction at loop time ``now``."""
        self.last = now
        if upward:
            self.up += amount
        else:
            self.down += amount


class BufferPool:
    """Reusable copy buffers; at most :data:`MAX_POOLED_BUFFERS` are kept."""

    def __init__(self, size: int = CHUNK_BYTES) -> None:
        """Hand out buffers of ``size`` bytes."""
        self._size = size
        self._free: list[bytearray] = []

    def take(self) -> bytearray:
        """A buffer (reused when one is free)."""
        return self._free.pop() if self._free else bytearray(self._size)

    def give(self, buffer: bytearray) -> None:
        """Return a buffer for reuse."""
        if len(self._free) < MAX_POOLED_BUFFERS:
            self._free.append(buffer)


async def _ready(
    loop: asyncio.AbstractEventLoop, fd: int, *, write: bool, idle: float, traffic: Traffic
) -> None:
    """Wait until ``fd`` is readable (or writable), within the idle rule."""
    while True:
        waiter: asyncio.Future[None] = loop.create_future()

        def wake(waiter: asyncio.Future[None] = waiter) -> None:
            if not waiter.done():
                waiter.set_result(None)

        if write:
            loop.add_writer(fd, wake)
        else:
            loop.add_reader(fd, wake)
        try:
            async with asyncio.timeout(idle):
                await waiter
            return
        except TimeoutError:
            if write or loop.time() - traffic.last >= idle:
                raise _Idle from None
        finally:
            if write:
                loop.remove_writer(fd)
            else:
                loop.remove_reader(fd)


async def _splice(
    src: socket.socket, dst: socket.socket, traffic: Traffic, *, upward: bool, idle: float
) -> None:
    loop = asyncio.get_running_loop()
    pipe_read, pipe_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe_write, _F_SETPIPE_SZ, PIPE_BYTES)
        source, sink = src.fileno(), dst.fileno()
        while True:
            try:
                moved = os.splice(source, pipe_write, SPLICE_BYTES, flags=_SPLICE_FLAGS)
            except BlockingIOError:
                await _ready(loop, source, write=False, idle=idle, traffic=traffic)
                continue
            if moved == 0:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            left = moved
            while left:
                try:
                    left -= os.splice(pipe_read, sink, left, flags=_SPLICE_FLAGS)
                except BlockingIOError:
                    await _ready(loop, sink, write=True, idle=idle, traffic=traffic)
            traffic.count(moved, upward=upward, now=loop.time())
    finally:
        os.close(pipe_read)
        os.close(pipe_write)


async def _copy(
    src: socket.socket,
    dst: socket.socket,
    traffic: Traffic,
    *,
    upward: bool,
    idle: float,
    gate: Gate | None,
    pool: BufferPool,
    splice_after: int | None = None,
) -> bool:
    """Copy until end of file (True: half-closed) or, with ``splice_after``, until one read
    brings that many bytes (False: the caller continues with splice; a bulk transfer).
    """
    loop = asyncio.get_running_loop()
    buffer = pool.take()
    view = memoryview(buffer)
    try:
        while True:
            try:
                async with asyncio.timeout(idle):
                    count = await loop.sock_recv_into(src, view)
            except TimeoutError:
                if loop.time() - traffic.last >= idle:
                    raise _Idle from None
                continue  # the other direction is busy (a long download): keep waiting
            if count == 0:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return True
            chunk: bytes | memoryview = view[:count]
            done = False
            if gate is not None:
                chunk, done = gate(view[:count])
            if chunk:
                try:
                    async with asyncio.timeout(idle):
                        await loop.sock_sendall(dst, chunk)
                except TimeoutError:
                    raise _Idle from None  # the peer stopped reading
                traffic.count(len(chunk), upward=upward, now=loop.time())
            if done:
                return True  # the request body ended: nothing after it is forwarded
            if splice_after is not None and count >= splice_after:
                return False
    finally:
        pool.give(buffer)


async def _direction(
    src: socket.socket,
    dst: socket.socket,
    traffic: Traffic,
    *,
    upward: bool,
    idle: float,
    gate: Gate | None,
    pool: BufferPool,
) -> None:
    if gate is not None or not HAVE_SPLICE:
        await _copy(src, dst, traffic, upward=upward, idle=idle, gate=gate, pool=pool)
        return
    # Small exchanges (a request, a short response) stay on the copy path, which costs no
    # pipe; the first large read switches the direction to splice for the rest.
    ended = await _copy(
        src, dst, traffic, upward=upward, idle=idle, gate=None, pool=pool,
        splice_after=SPLICE_THRESHOLD_BYTES,
    )  # fmt: skip
    if not ended:
        await _splice(src, dst, traffic, upward=upward, idle=idle)


async def relay(
    client: socket.socket,
    upstream: socket.socket,
    traffic: Traffic,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
    gate: Gate | None = None,
    pool: BufferPool | None = None,
) -> Outcome:
    """Copy until the exchange ends; return how it ended. Both sockets must be non-blocking.

    With ``gate`` (an HTTP request) the exchange ends when the response does; without it
    (a tunnel) when both directions have reached end of file.
    """
    loop = asyncio.get_running_loop()
    buffers = pool if pool is not None else BufferPool()
    traffic.last = loop.time()
    # Two tasks this coroutine owns and always reaps (not a TaskGroup: CPython 3.11.2's
    # leaves a stray cancellation on its parent when a child fails during __aexit__).
    directions = TaskOwner("egress-exchange")
    up = directions.start(
        _direction(client, upstream, traffic, upward=True, idle=idle_timeout, gate=gate,
                   pool=buffers), name="up", report=False,
    )  # fmt: skip
    down = directions.start(
        _direction(upstream, client, traffic, upward=False, idle=idle_timeout, gate=None,
                   pool=buffers), name="down", report=False,
    )  # fmt: skip
    outcome: Outcome = "closed"
    try:
        running = {up, down}
        while running:
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            failed = [t.exception() for t in done if not t.cancelled() and t.exception()]
            if failed:
                outcome = _outcome(failed[0])
                break
            if gate is not None and down in done:
                break  # the response is complete: the request side ends with it
    finally:
        await directions.close()
    return outcome


def _outcome(error: BaseException | None) -> Outcome:
    """How a direction's failure ends the exchange.

    Raises:
        BaseException: anything that is not a peer's doing (a bug) propagates.
    """
    if isinstance(error, _Idle):
        return "idle"
    if isinstance(error, GateError):
        return "malformed-body"
    if isinstance(error, OSError):
        return "reset"
    assert error is not None
    raise error
