"""Helpers of the synthetic-owner tests: an enabled owner, its guest end, framed I/O."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator
from typing import Any

from glove.actors import running
from glove.protocol import HEADER_BYTES, encode_frame
from glove.testing.wallet import OfflineWorld
from glove.wallet import (
    MAX_FRAME_BYTES,
    Authorities,
    StatusProcessor,
    SyntheticOwner,
    contracted,
)

REQUEST_DEADLINE_S = 0.3
WAIT_S = 5.0


def make_owner(
    world: OfflineWorld, authorities: Authorities | None = None, **kw: Any
) -> SyntheticOwner:
    """An enabled owner over ``authorities`` (the world's, contracted, by default)."""
    processor = StatusProcessor(
        world.binding(), authorities or contracted(world.authorities()), clock=world.clock
    )
    kw.setdefault("request_deadline_s", REQUEST_DEADLINE_S)
    return SyntheticOwner(processor, enabled=True, **kw)


@contextlib.asynccontextmanager
async def serving(owner: SyntheticOwner) -> AsyncIterator[socket.socket]:
    """Run the owner's worker and yield the guest end (closed afterwards)."""
    async with running(owner.worker):
        guest = owner.take_guest_endpoint()
        try:
            yield guest
        finally:
            guest.close()


async def send(guest: socket.socket, payload: bytes) -> None:
    """Send one framed payload from the guest end."""
    frame = encode_frame(payload, max_frame_bytes=MAX_FRAME_BYTES)
    await asyncio.get_running_loop().sock_sendall(guest, frame)


async def recv_exact(guest: socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes (or fewer at EOF) within the test's wait bound."""
    loop = asyncio.get_running_loop()
    data = b""
    async with asyncio.timeout(WAIT_S):
        while len(data) < size:
            chunk = await loop.sock_recv(guest, size - len(data))
            if not chunk:
                break
            data += chunk
    return data


async def reply(guest: socket.socket) -> dict[str, Any]:
    """Read one framed response from the guest end."""
    header = await recv_exact(guest, HEADER_BYTES)
    assert len(header) == HEADER_BYTES, header
    body = await recv_exact(guest, int.from_bytes(header, "big"))
    decoded: dict[str, Any] = json.loads(body)
    return decoded


async def at_eof(guest: socket.socket) -> bool:
    """True when the host end closed with nothing more to read."""
    try:
        return await recv_exact(guest, 1) == b""
    except ConnectionResetError:
        return True


def fd_count() -> int:
    """Descriptors open in this process."""
    return len(os.listdir("/proc/self/fd"))
