"""Small real upstream servers on host loopback for the proxy tests."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

#: Seconds an upstream waits for stray bytes after a request (to prove none come).
STRAY_WAIT_S = 0.2


@dataclass
class Upstream:
    """A running upstream: its port, how many connections it accepted, what it received."""

    port: int
    accepted: int = 0
    received: list[bytes] = field(default_factory=list)


async def _http(up: Upstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    up.accepted += 1
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        chunked = b"transfer-encoding: chunked" in head.lower()
        body = await reader.readexactly(length) if length else b""
        if chunked:
            body = await reader.readuntil(b"0\r\n\r\n")
        stray = b""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STRAY_WAIT_S):
                stray = await reader.read(65536)
        up.received.append(head + body + stray)
        reply = b"upstream saw " + head.split(b"\r\n", 1)[0] + b" body=" + body
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(reply)
            + reply
        )
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _echo(up: Upstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    up.accepted += 1
    try:
        while data := await reader.read(65536):
            up.received.append(data)
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _hello(up: Upstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    up.accepted += 1
    try:
        line = await reader.readline()
        up.received.append(line)
        writer.write(b"tls says " + line)
        await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


@asynccontextmanager
async def upstream(kind: str, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[Upstream]:
    """Run an ``http``, ``echo`` or ``tls-line`` server on 127.0.0.1 for the block."""
    up = Upstream(0)
    handler = {"http": _http, "echo": _echo, "tls-line": _hello}[kind]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handler(up, reader, writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    up.port = server.sockets[0].getsockname()[1]
    async with server:
        yield up
