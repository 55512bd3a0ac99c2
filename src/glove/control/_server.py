"""The control actor: the owner-only Unix socket, its bootstrap secret, and connection caps.

At start it writes a fresh ``bootstrap-secret`` (``glove.control._auth``), then binds
``gloved.sock`` (0600) in the verified 0700 runtime directory; at stop it removes both.

Each connection is checked with ``SO_PEERCRED`` as it is accepted, before a single byte is
read from it: a peer of another uid gets one ``peer_rejected`` error frame and is closed.
Two caps follow (every admitted peer is the owner's uid, so both are per uid):

* ``max_handshaking``: connections accepted but not yet past ``hello``. They cost a
  socket and a hello deadline each; a flood of half-open connections fills this cap, never
  the other one, and each of them is closed when its hello deadline passes.
* ``max_connections``: authenticated connections. A connection that would exceed it is
  told ``busy`` (at accept, or as the answer to its ``hello``) and closed.

What one connection does after that is ``glove.control._connection``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from typing import Final

from glove._version import __version__
from glove.actors import Actor
from glove.control._address import socket_address
from glove.control._auth import (
    PeerCredentials,
    peer_credentials,
    remove_secret,
    write_secret,
)
from glove.control._connection import Connection, Limits
from glove.control._paths import SOCKET_MODE, RuntimePaths
from glove.control._registry import MethodRegistry
from glove.protocol import (
    CONTROL_MAX_RESPONSE_BYTES,
    PROTOCOL_VERSION,
    HelloResult,
    encode,
    encode_frame,
    error_response,
)

_log = logging.getLogger(__name__)

#: Authenticated connections at once (a controller multiplexes; the CLI opens one a call).
MAX_CONNECTIONS: Final = 128
#: Connections between accept and a completed ``hello``.
MAX_HANDSHAKING: Final = 64
#: The kernel's queue of connections not yet accepted, and how many asyncio accepts in one
#: go. Small enough that a burst is accepted in batches with hellos answered in between
#: (one batch of 1,000 would fill the handshake cap at once and refuse the rest); a client
#: that finds it full gets EAGAIN from a non-blocking connect and retries (AsyncClient
#: does), a blocking connect waits.
LISTEN_BACKLOG: Final = 128
#: A refused connection (busy, peer_rejected) is half-closed after its error frame and
#: closed this much later, unread: closing at once with the peer's hello unread would make
#: the kernel reset the peer, which could then lose the error frame and see only "broken
#: pipe".
REFUSAL_LINGER_S: Final = 1.0
#: Refused connections lingering at once; past this they are closed immediately.
MAX_LINGERING: Final = 512
SERVER_NAME: Final = "gloved"


class ControlServer(Actor):
    """Owns the listening socket, the bootstrap secret, and every connection task."""

    def __init__(
        self,
        paths: RuntimePaths,
        registry: MethodRegistry,
        *,
        limits: Limits | None = None,
        max_connections: int = MAX_CONNECTIONS,
        max_handshaking: int = MAX_HANDSHAKING,
    ) -> None:
        super().__init__("control", mailbox_size=16)
        self.paths = paths
        self.registry = registry
        self.limits = limits or Limits()
        self.max_connections = max_connections
        self.max_handshaking = max_handshaking
        self.rejected_peers = 0
        self.refused_busy = 0
        self.accepted = 0
        self._handshaking: set[Connection] = set()
        self._authenticated: set[Connection] = set()
        self._ids = itertools.count(1)
        self._secret = b""
        self._server: asyncio.Server | None = None
        self._lingering: dict[asyncio.StreamWriter, asyncio.TimerHandle] = {}

    @property
    def connections(self) -> int:
        """Connections open now (handshaking and authenticated)."""
        return len(self._handshaking) + len(self._authenticated)

    async def on_start(self) -> None:
        """Write a fresh bootstrap secret, then bind the socket (0600).

        Raises:
            UnsafeRuntimeDir: the runtime directory is no longer owner-only.
            OSError: the secret or the socket could not be created.
        """
        self._secret = write_secret(self.paths.directory)
        # Bound and listening under a private name, then renamed into place: a client that
        # sees gloved.sock can connect at once (never ECONNREFUSED between bind and listen),
        # and a stale socket of a dead instance is replaced atomically (we hold the lock).
        staging = self.paths.socket.with_name(f".{self.paths.socket.name}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
        old_umask = os.umask(0o177)
        try:
            with socket_address(staging) as address:
                self._server = await asyncio.start_unix_server(
                    self._accept, path=address, backlog=LISTEN_BACKLOG
                )
        finally:
            os.umask(old_umask)
        staging.chmod(SOCKET_MODE)
        staging.rename(self.paths.socket)

    async def on_stop(self) -> None:
        """Stop listening; remove the socket and the secret."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer, timer in self._lingering.items():
            timer.cancel()
            writer.close()
        self._lingering.clear()
        with contextlib.suppress(FileNotFoundError):
            self.paths.socket.unlink()
        remove_secret(self.paths.directory)

    def hello_result(self) -> HelloResult:
        """What ``hello`` answers: who we are and the methods available now."""
        return HelloResult(
            server=SERVER_NAME,
            version=__version__,
            protocol=PROTOCOL_VERSION,
            pid=os.getpid(),
            methods=self.registry.available(),
        )

    # -- accepting --------------------------------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            peer = peer_credentials(writer.get_extra_info("socket"))
        except OSError as exc:
            _log.warning("control: no peer credentials (%r); closing", exc)
            writer.close()
            return
        if peer.uid != os.getuid():
            # Refused before any frame is read: we never look at what this peer sent.
            self.rejected_peers += 1
            _log.warning(
                "control: refused pid %d of uid %d (we are uid %d)", peer.pid, peer.uid, os.getuid()
            )
            self._refuse(writer, "peer_rejected", "this daemon serves its owner only")
            return
        if self.state != "running":
            self._refuse(writer, "shutting_down", "gloved is stopping")
            return
        if len(self._authenticated) >= self.max_connections:
            self._busy(writer, f"{self.max_connections} connections already open")
            return
        if len(self._handshaking) >= self.max_handshaking:
            self._busy(writer, f"{self.max_handshaking} connections are already saying hello")
            return
        self.accepted += 1
        conn = self._connection(peer, reader, writer)
        self._handshaking.add(conn)
        self.spawn_task(self._serve(conn), name=f"conn-{conn.conn_id}")

    def _connection(
        self, peer: PeerCredentials, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Connection:
        return Connection(
            conn_id=next(self._ids),
            peer=peer,
            reader=reader,
            writer=writer,
            registry=self.registry,
            secret=self._secret,
            limits=self.limits,
            hello_result=self.hello_result,
            admit=self._admit,
        )

    def _admit(self, conn: Connection) -> bool:
        """Move a connection past hello, unless the authenticated cap is reached."""
        if len(self._authenticated) >= self.max_connections:
            self.refused_busy += 1
            return False
        self._handshaking.discard(conn)
        self._authenticated.add(conn)
        return True

    async def _serve(self, conn: Connection) -> None:
        try:
            await conn.serve()
        finally:
            self._handshaking.discard(conn)
            self._authenticated.discard(conn)

    def _busy(self, writer: asyncio.StreamWriter, message: str) -> None:
        self.refused_busy += 1
        self._refuse(writer, "busy", message)

    def _refuse(self, writer: asyncio.StreamWriter, code: str, message: str) -> None:
        frame = encode_frame(
            encode(error_response(0, code, message)), max_frame_bytes=CONTROL_MAX_RESPONSE_BYTES
        )
        with contextlib.suppress(OSError):
            writer.write(frame)
        if len(self._lingering) >= MAX_LINGERING or not writer.can_write_eof():
            writer.close()
            return
        transport = writer.transport
        if isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()  # we never read what a refused peer sent
        with contextlib.suppress(OSError):
            writer.write_eof()  # the peer reads our frame, then EOF
        timer = asyncio.get_running_loop().call_later(REFUSAL_LINGER_S, self._unlinger, writer)
        self._lingering[writer] = timer

    def _unlinger(self, writer: asyncio.StreamWriter) -> None:
        self._lingering.pop(writer, None)
        writer.close()
