"""The control actor: an owner-only Unix socket that turns frames into method calls.

Each connection is checked with ``SO_PEERCRED`` as it is accepted, before a single byte is
read from it: a peer of another uid gets one ``peer_rejected`` error frame and is closed.
Frames are length-prefixed JSON (``glove.protocol``) with a named size cap. An oversized,
truncated or malformed frame gets a typed error and that connection closes; the other
connections are not affected. Every read and write has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import msgspec

from glove.actors import Actor
from glove.control._paths import SOCKET_MODE, RuntimePaths
from glove.errors import GloveError
from glove.protocol import (
    CONTROL_MAX_FRAME_BYTES,
    ErrorBody,
    FrameDecoder,
    ProtocolError,
    Request,
    Response,
    TruncatedFrame,
    decode_request,
    encode,
    encode_frame,
)
from glove.protocol.control import CONTROL_IDLE_DEADLINE_S, CONTROL_READ_DEADLINE_S

_log = logging.getLogger(__name__)

MAX_CONNECTIONS: Final = 64
WRITE_DEADLINE_S: Final = 5.0
READ_CHUNK_BYTES: Final = 64 * 1024
_UCRED: Final = struct.Struct("3i")

Method = Callable[[dict[str, Any]], Awaitable[object]]


class MethodError(GloveError):
    """A method refused a request; the client gets ``code`` and the connection stays open."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def peer_uid(sock: socket.socket) -> int:
    """Return the uid of the process on the other end of a Unix stream socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    _pid, uid, _gid = _UCRED.unpack(raw)
    return int(uid)


class ControlServer(Actor):
    """Owns the listening socket and every connection task."""

    def __init__(
        self,
        paths: RuntimePaths,
        methods: Mapping[str, Method],
        *,
        max_frame_bytes: int = CONTROL_MAX_FRAME_BYTES,
        read_deadline_s: float = CONTROL_READ_DEADLINE_S,
        idle_deadline_s: float = CONTROL_IDLE_DEADLINE_S,
    ) -> None:
        super().__init__("control", mailbox_size=16)
        self.paths = paths
        self.methods = dict(methods)
        self.max_frame_bytes = max_frame_bytes
        self.read_deadline_s = read_deadline_s
        self.idle_deadline_s = idle_deadline_s
        self.rejected_peers = 0
        self.protocol_errors = 0
        self._connections = 0
        self._server: asyncio.Server | None = None

    async def on_start(self) -> None:
        """Bind the socket (0600) in the verified owner-only directory."""
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()  # a stale socket of a dead instance (we hold the lock)
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._accept, path=str(self.paths.socket), limit=READ_CHUNK_BYTES
            )
        finally:
            os.umask(old_umask)
        self.paths.socket.chmod(SOCKET_MODE)

    async def on_stop(self) -> None:
        """Stop listening and remove the socket."""
        if self._server is not None:
            self._server.close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock: socket.socket = writer.get_extra_info("socket")
        uid = peer_uid(sock)
        if uid != os.getuid():
            # Refused before any frame is read: we never look at what this peer sent.
            self.rejected_peers += 1
            _log.warning("control: refused a peer of uid %d (we are uid %d)", uid, os.getuid())
            self._reply_and_close(writer, "peer_rejected", "this daemon serves its owner only")
            return
        if self._connections >= MAX_CONNECTIONS:
            self._reply_and_close(writer, "busy", f"{MAX_CONNECTIONS} connections already open")
            return
        self._connections += 1
        self.spawn_task(self._serve(reader, writer), name=f"conn-{sock.fileno()}")

    def _reply_and_close(self, writer: asyncio.StreamWriter, code: str, message: str) -> None:
        response = Response(id=0, error=ErrorBody(code, message))
        with contextlib.suppress(OSError):
            writer.write(encode_frame(encode(response), max_frame_bytes=self.max_frame_bytes))
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(max_frame_bytes=self.max_frame_bytes)
        try:
            while (payload := await self._read_frame(reader, decoder)) is not None:
                request = decode_request(payload)
                response = await self._dispatch(request)
                await self._write(writer, response)
        except ProtocolError as exc:
            self.protocol_errors += 1
            with contextlib.suppress(OSError, TimeoutError):
                await self._write(writer, Response(id=0, error=ErrorBody(exc.code, str(exc))))
        except (OSError, TimeoutError) as exc:
            _log.info("control: connection ended: %r", exc)
        finally:
            self._connections -= 1
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(WRITE_DEADLINE_S):
                    await writer.wait_closed()

    async def _read_frame(
        self, reader: asyncio.StreamReader, decoder: FrameDecoder
    ) -> bytes | None:
        """Read one frame: idle deadline until it starts, read deadline to complete it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.read_deadline_s if decoder.pending else None
        while True:
            frame = decoder.next_frame()
            if frame is not None:
                return frame
            wait = self.idle_deadline_s if deadline is None else deadline - loop.time()
            try:
                async with asyncio.timeout(max(wait, 0.0)):
                    chunk = await reader.read(min(READ_CHUNK_BYTES, max(decoder.wanted, 1)))
            except TimeoutError:
                if deadline is None:
                    return None  # idle connection: end it quietly
                raise TruncatedFrame(
                    f"frame not completed within {self.read_deadline_s}s"
                ) from None
            if not chunk:
                decoder.close()
                return None
            decoder.feed(chunk)
            if deadline is None:
                deadline = loop.time() + self.read_deadline_s

    async def _dispatch(self, request: Request) -> Response:
        method = self.methods.get(request.method)
        if method is None:
            return Response(
                id=request.id,
                error=ErrorBody("method_not_found", f"unknown method {request.method!r}"),
            )
        try:
            result = await method(request.params)
        except MethodError as exc:
            return Response(id=request.id, error=ErrorBody(exc.code, str(exc)))
        return Response(id=request.id, result=msgspec.to_builtins(result))

    async def _write(self, writer: asyncio.StreamWriter, response: Response) -> None:
        writer.write(encode_frame(encode(response), max_frame_bytes=self.max_frame_bytes))
        async with asyncio.timeout(WRITE_DEADLINE_S):
            await writer.drain()
