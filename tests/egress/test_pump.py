"""The relay: both copy paths move every byte, count it, half-close, idle out, and gate bodies."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket

import pytest

from glove.egress import _pump
from glove.egress._pump import Traffic, relay

STEP_S = 20.0
BULK_BYTES = 8 * 1024 * 1024 + 17


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        left = socket.create_connection(server.getsockname())
        right, _ = server.accept()
    for sock in (left, right):
        sock.setblocking(False)
    return left, right


@pytest.fixture(params=["splice", "copy"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on the splice path and on the copy-only path."""
    if request.param == "copy":
        monkeypatch.setattr(_pump, "HAVE_SPLICE", False)
    return str(request.param)


async def test_bulk_both_ways_is_exact_and_counted(path: str) -> None:
    """Megabytes each way arrive intact (same digest), counted byte for byte, then EOF."""
    sandbox, client = _tcp_pair()
    upstream, origin = _tcp_pair()
    payload_up, payload_down = os.urandom(BULK_BYTES), os.urandom(BULK_BYTES - 5)
    traffic = Traffic()
    loop = asyncio.get_running_loop()

    async def side(sock: socket.socket, payload: bytes) -> bytes:
        async def send() -> None:
            await loop.sock_sendall(sock, payload)
            sock.shutdown(socket.SHUT_WR)

        sender = loop.create_task(send())
        got = bytearray()
        while chunk := await loop.sock_recv(sock, 1 << 20):
            got += chunk
        await sender
        return bytes(got)

    with sandbox, client, upstream, origin:
        async with asyncio.timeout(STEP_S):
            outcome, at_origin, at_client = await asyncio.gather(
                relay(client, upstream, traffic, idle_timeout=5),
                side(origin, payload_down),
                side(sandbox, payload_up),
            )
    assert outcome == "closed"
    assert hashlib.sha256(at_origin).digest() == hashlib.sha256(payload_up).digest()
    assert hashlib.sha256(at_client).digest() == hashlib.sha256(payload_down).digest()
    assert (traffic.up, traffic.down) == (len(payload_up), len(payload_down))


async def test_a_silent_connection_idles_out(path: str) -> None:
    """No byte either way for the idle timeout ends the relay as idle."""
    sandbox, client = _tcp_pair()
    upstream, origin = _tcp_pair()
    with sandbox, client, upstream, origin:
        async with asyncio.timeout(STEP_S):
            assert await relay(client, upstream, Traffic(), idle_timeout=0.2) == "idle"


async def test_a_reset_ends_the_relay(path: str) -> None:
    """A peer that resets ends the exchange as reset, never raises."""
    sandbox, client = _tcp_pair()
    upstream, origin = _tcp_pair()
    origin.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with sandbox, client, upstream:
        origin.close()  # RST
        sandbox.sendall(b"x" * 1000)
        async with asyncio.timeout(STEP_S):
            assert await relay(client, upstream, Traffic(), idle_timeout=5) in ("reset", "closed")


async def test_a_gate_stops_the_upload_at_the_end_of_the_body() -> None:
    """With a gate, bytes after the body are not forwarded; the response ends the exchange."""
    sandbox, client = _tcp_pair()
    upstream, origin = _tcp_pair()
    loop = asyncio.get_running_loop()
    remaining = 5

    def gate(chunk: memoryview) -> tuple[memoryview, bool]:
        nonlocal remaining
        keep = min(remaining, len(chunk))
        remaining -= keep
        return chunk[:keep], remaining == 0

    with sandbox, client, upstream, origin:
        await loop.sock_sendall(sandbox, b"helloSMUGGLED")
        task = loop.create_task(relay(client, upstream, Traffic(), idle_timeout=5, gate=gate))
        async with asyncio.timeout(STEP_S):
            assert await loop.sock_recv(origin, 100) == b"hello"
            await loop.sock_sendall(origin, b"response")
            origin.shutdown(socket.SHUT_WR)
            assert await task == "closed"
            assert await loop.sock_recv(sandbox, 100) == b"response"
        origin.setblocking(True)
        origin.settimeout(0.2)
        with pytest.raises(TimeoutError):
            origin.recv(100)  # nothing after the body ever arrived
