"""Test helpers for the control socket: an in-process server, and raw frames on a socket.

``serving`` runs a real :class:`~glove.control.ControlServer` (a real Unix socket, a real
bootstrap secret) on a registry the test builds; :class:`RawPeer` speaks frames by hand,
for tests about what a misbehaving client gets::

    registry = MethodRegistry()
    registry.unary("echo", EchoParams, echo)
    async with serving(registry, tmp_path / "run") as server:
        peer = await RawPeer.open(server.paths)
        await peer.hello()
        await peer.send({"id": 2, "method": "echo", "params": {"text": "hi"}})
        assert (await peer.reply())["result"] == {"text": "hi"}
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

from glove.actors import running
from glove.control import ControlServer, MethodRegistry, RuntimePaths, prepare_runtime_dir
from glove.protocol import CONTROL_MAX_RESPONSE_BYTES, HEADER_BYTES, PROTOCOL_VERSION

REPLY_DEADLINE_S: Final = 10.0


@asynccontextmanager
async def serving(
    registry: MethodRegistry, directory: Path, **server_options: Any
) -> AsyncIterator[ControlServer]:
    """Run a ControlServer for ``registry`` in ``directory`` (created 0700) for the block.

    ``server_options`` go to :class:`ControlServer` (``limits``, ``max_connections``, ...).

    Raises:
        RuntimeError: the server did not start (its exit reason is chained).
    """
    paths = prepare_runtime_dir(directory)
    server = ControlServer(paths, registry, **server_options)
    async with running(server):
        if server.state != "running":
            raise RuntimeError(f"the control server did not start: {server.state}") from (
                server.exit_reason
            )
        yield server


class RawPeer:
    """One client connection driven frame by frame (no client library in between)."""

    def __init__(
        self, paths: RuntimePaths, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.paths = paths
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, paths: RuntimePaths) -> RawPeer:
        """Connect to the socket in ``paths`` (nothing sent yet)."""
        reader, writer = await asyncio.open_unix_connection(str(paths.socket))
        return cls(paths, reader, writer)

    def secret(self) -> str:
        """The daemon's current bootstrap secret."""
        return self.paths.secret.read_text().strip()

    # Frames here are raw JSON objects on purpose: the fake peer sends malformed ones.
    async def hello(self, *, secret: str | None = None, request_id: int = 1) -> dict[str, Any]:
        """Send ``hello`` (with the real secret unless one is given) and return the reply."""
        await self.send(
            {
                "id": request_id,
                "method": "hello",
                "params": {
                    "secret": self.secret() if secret is None else secret,
                    "client": "raw-peer/1",
                    "protocol": PROTOCOL_VERSION,
                },
            }
        )
        return await self.reply()

    async def send(self, message: dict[str, Any] | bytes) -> None:
        """Send one frame: a dict as JSON, bytes as the exact payload."""
        payload = message if isinstance(message, bytes) else json.dumps(message).encode()
        await self.send_raw(len(payload).to_bytes(HEADER_BYTES, "big") + payload)

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (a partial frame, a bad header)."""
        self.writer.write(data)
        await self.writer.drain()

    async def reply(self, timeout: float = REPLY_DEADLINE_S) -> dict[str, Any]:
        """The next frame from the server, decoded.

        Raises:
            EOFError: the server closed the connection first.
            TimeoutError: nothing within ``timeout``.
        """
        async with asyncio.timeout(timeout):
            try:
                header = await self.reader.readexactly(HEADER_BYTES)
                size = int.from_bytes(header, "big")
                if size > CONTROL_MAX_RESPONSE_BYTES:
                    raise ValueError(f"the server sent a {size}-byte frame")
                body = await self.reader.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                raise EOFError("the server closed the connection") from exc
        value: dict[str, Any] = json.loads(body)
        return value

    async def closed(self, timeout: float = REPLY_DEADLINE_S) -> bool:
        """True when the server has closed the connection (EOF or reset) within ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                return await self.reader.read(1) == b""
        except ConnectionResetError:
            return True

    async def __aenter__(self) -> RawPeer:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close our end."""
        self.writer.close()
        try:
            async with asyncio.timeout(REPLY_DEADLINE_S):
                await self.writer.wait_closed()
        except (OSError, TimeoutError):
            pass


__all__ = ["RawPeer", "serving"]
