"""Copying bytes both ways between the sandbox's connection and the upstream one.

One coroutine per direction, both in one :class:`asyncio.TaskGroup`, each with a fixed
buffer (:data:`CHUNK_BYTES`: nothing grows with what the peers send) and a deadline on every
await. A direction that sees end of file half-closes its destination and ends; a tunnel ends
when both have, an HTTP exchange when the response has (the request side is cut at the end
of its body by a *gate*: bytes after it are never forwarded). A connection where neither
side moved a byte for ``idle_timeout`` seconds ends, as does a peer that stops reading for
that long (the send deadline). Resets and broken pipes end the whole connection; they are
the peers' business, reported in the outcome, never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

#: Bytes read per receive, in each direction.
CHUNK_BYTES: Final = 256 * 1024
#: Seconds a connection may see no byte in either direction.
DEFAULT_IDLE_TIMEOUT_S: Final = 300.0

Outcome = Literal["closed", "idle", "reset", "malformed-body"]
Gate = Callable[[memoryview], tuple[int, bool]]
"""``gate(chunk) -> (bytes to forward, done)``: where the request body ends."""


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


async def _recv(
    loop: asyncio.AbstractEventLoop,
    sock: socket.socket,
    view: memoryview,
    traffic: Traffic,
    idle: float,
) -> int:
    while True:
        try:
            async with asyncio.timeout(idle):
                return await loop.sock_recv_into(sock, view)
        except TimeoutError:
            if loop.time() - traffic.last >= idle:
                raise _Idle from None
            # The other direction is busy (a long download): keep waiting.


async def _send(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, data: memoryview, idle: float
) -> None:
    try:
        async with asyncio.timeout(idle):
            await loop.sock_sendall(sock, data)
    except TimeoutError:
        raise _Idle from None  # the peer stopped reading


def _half_close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


async def _copy(
    src: socket.socket,
    dst: socket.socket,
    traffic: Traffic,
    *,
    upward: bool,
    idle: float,
    gate: Gate | None,
) -> None:
    loop = asyncio.get_running_loop()
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    while True:
        count = await _recv(loop, src, view, traffic, idle)
        if count == 0:
            _half_close(dst)
            return
        chunk = view[:count]
        done = False
        if gate is not None:
            keep, done = gate(chunk)
            chunk = chunk[:keep]
        if chunk:
            await _send(loop, dst, chunk, idle)
            traffic.last = loop.time()
            if upward:
                traffic.up += len(chunk)
            else:
                traffic.down += len(chunk)
        if done:
            return  # the request body ended: nothing after it is forwarded


async def relay(
    client: socket.socket,
    upstream: socket.socket,
    traffic: Traffic,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
    gate: Gate | None = None,
) -> Outcome:
    """Copy until the exchange ends; return how it ended. Both sockets must be non-blocking.

    With ``gate`` (an HTTP request) the exchange ends when the response does; without it
    (a tunnel) when both directions have reached end of file.
    """
    loop = asyncio.get_running_loop()
    traffic.last = loop.time()
    outcome: Outcome = "closed"
    try:
        async with asyncio.TaskGroup() as group:
            up = group.create_task(
                _copy(client, upstream, traffic, upward=True, idle=idle_timeout, gate=gate)
            )
            down = group.create_task(
                _copy(upstream, client, traffic, upward=False, idle=idle_timeout, gate=None)
            )
            if gate is not None:
                down.add_done_callback(lambda _: up.cancel())
    except* _Idle:
        outcome = "idle"
    except* OSError:
        outcome = "reset"
    except* GateError:
        outcome = "malformed-body"
    return outcome
