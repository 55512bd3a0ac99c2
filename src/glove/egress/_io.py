"""Small deadline-bound socket reads and writes the protocol handlers share."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Final

#: Bytes read per receive while a head, greeting or hello is being gathered.
HEAD_READ_BYTES: Final = 16 * 1024


class PeerGone(Exception):
    """The sandbox's side closed the connection before the message was complete."""


async def recv_some(sock: socket.socket, deadline: float, size: int = HEAD_READ_BYTES) -> bytes:
    """Receive at least one byte before the absolute ``deadline`` (``loop.time()``).

    Raises:
        PeerGone: end of file.
        TimeoutError: the deadline passed.
        OSError: the socket failed.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout_at(deadline):
        data = await loop.sock_recv(sock, size)
    if not data:
        raise PeerGone
    return data


async def send_all(sock: socket.socket, data: bytes, timeout: float) -> None:
    """Send ``data`` within ``timeout`` seconds.

    Raises:
        TimeoutError: the peer did not take it in time.
        OSError: the socket failed.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        await loop.sock_sendall(sock, data)


async def send_quietly(sock: socket.socket, data: bytes, timeout: float) -> None:
    """Send a last reply; a peer that is gone or slow is not an error any more."""
    with contextlib.suppress(OSError, TimeoutError):
        await send_all(sock, data, timeout)
