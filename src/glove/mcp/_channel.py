"""The channel between a sandbox and the mediation: the guest directory and the host end.

``glove run`` and a ``gloved`` session with tools: an agent in the sandbox, its MCP tools
mediated on the host.

The channel is an **inherited descriptor**: the host makes a Unix socketpair, keeps one
end and passes the other into the sandbox as descriptor :data:`GUEST_CHANNEL_FD`. A fresh
private directory (mode 0700, removed afterwards) holding two standard-library scripts
and nothing else is bound **read-only** at :data:`GUEST_DIR`:

* ``/opt/glove/glove-relay`` (the in-sandbox helper :mod:`glove.egress.helper` in its
  MCP-only mode, chosen by that name) is the sandbox's command: it
  listens on the abstract name ``@glove-mcp`` inside the sandbox's own network namespace,
  starts the agent (which inherits neither the channel nor the listener), and sends each
  accepted connection to the host over the channel with ``SCM_RIGHTS``;
* ``/opt/glove/glove-mcp`` (:mod:`glove.mcp.shim`, ``GLOVE_MCP_COMMAND``) is the stdio
  MCP server command the agent launches; it connects to ``@glove-mcp``
  (``GLOVE_MCP_SOCKET``).

Why a relay and not the descriptor itself in the agent: stock MCP clients close every
descriptor above 2 when they spawn a stdio server (Python's ``close_fds``), so a
descriptor handed to the agent would never reach the shim. A name the shim connects to
survives that, and the relay turns each connection back into a descriptor for the host.

On the host, :class:`ConnectionReceiver` reads the channel, accepts only connected
``AF_UNIX`` stream sockets, caps the number of live agent connections, and attaches each
one to the mediation as one more agent endpoint. Nothing of the upstreams (processes,
files, sockets) is visible inside: they run in the host's namespaces, the sandbox has its
own pid, mount and (route-less) network namespaces, and the channel is the only way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import tempfile
from collections.abc import Callable, Coroutine
from importlib import resources
from pathlib import Path
from typing import Any, Final

import msgspec

from glove.actors import Actor, settle
from glove.egress import UNIX_FAMILIES, ChannelReceiver, Kind, write_helper
from glove.mcp._service import READ_LIMIT_BYTES, Mediation

_log = logging.getLogger(__name__)

GUEST_DIR: Final = "/opt/glove"
SHIM_NAME: Final = "glove-mcp"
RELAY_NAME: Final = "glove-relay"
GUEST_CHANNEL_FD: Final = 3
ABSTRACT_NAME: Final = "@glove-mcp"
ENV_COMMAND: Final = "GLOVE_MCP_COMMAND"
ENV_SOCKET: Final = "GLOVE_MCP_SOCKET"
CONNECTION_BYTE: Final = b"c"
#: Live agent connections (MCP clients in the agent) at once; more are closed on arrival.
MAX_AGENT_CONNECTIONS: Final = 32
#: Refusals logged per session; later ones are only counted.
MAX_REFUSALS_LOGGED: Final = 16


class GuestSetup(msgspec.Struct, frozen=True):
    """What the sandbox needs for ``glove run``.

    Attributes:
        bind_dir: the host directory to bind read-only at :data:`GUEST_DIR`.
        env: variables to add to the sandbox's environment.
        pass_fds: ``{fd inside: fd here}``, for ``SandboxSpec.pass_fds``.
    """

    bind_dir: str
    env: dict[str, str]
    pass_fds: dict[int, int]

    def command(self, argv: list[str] | tuple[str, ...]) -> tuple[str, ...]:
        """The sandbox's command line: the relay, then the agent's ``argv``."""
        return (f"{GUEST_DIR}/{RELAY_NAME}", str(GUEST_CHANNEL_FD), "--", *argv)


def guest_env() -> dict[str, str]:
    """The variables that tell the agent where its MCP server is."""
    return {ENV_COMMAND: f"{GUEST_DIR}/{SHIM_NAME}", ENV_SOCKET: ABSTRACT_NAME}


class ConnectionReceiver(ChannelReceiver):
    """Receives agent connections that ``glove-relay`` sends over the host end of the channel.

    The one descriptor receiver (:class:`glove.egress.ChannelReceiver`) with one kind: a
    message is one byte (``b"c"``) carrying one descriptor (``SCM_RIGHTS``). A descriptor
    that is not a connected ``AF_UNIX`` stream socket, a message without exactly one
    descriptor or whose descriptors were cut (``MSG_CTRUNC``), or a connection beyond
    ``max_connections`` live ones is closed and logged, never served. Every descriptor
    received is either handed to ``on_connection`` (which then owns it) or closed here.
    End of file on the channel (the relay is gone) ends receiving.
    """

    def __init__(
        self,
        channel: socket.socket,
        on_connection: Callable[[socket.socket], None],
        live_connections: Callable[[], int],
        *,
        max_connections: int = MAX_AGENT_CONNECTIONS,
    ) -> None:
        """Take ownership of ``channel`` (the host end); call :meth:`start` to begin."""

        def take(kind: bytes, sock: socket.socket) -> None:
            del kind  # always CONNECTION_BYTE: the only kind registered
            on_connection(sock)

        super().__init__(
            channel,
            {CONNECTION_BYTE: Kind(UNIX_FAMILIES, take)},
            live=live_connections,
            max_live=max_connections,
        )


def prepare_guest_dir(*, relay: bool = True) -> Path:
    """Create the private host directory bound read-only at :data:`GUEST_DIR` (0700).

    With ``relay`` the in-sandbox helper (:func:`glove.egress.write_helper`) is written as
    ``glove-relay``, the name that starts its MCP-only mode. Without it (network ``proxy``:
    the egress helper relays MCP itself, ``glove-egress --mcp``) only the shim is written.
    """
    private = Path(tempfile.mkdtemp(prefix="glove-run-"))
    private.chmod(0o700)
    shim = private / SHIM_NAME
    shim.write_bytes(resources.files("glove.mcp").joinpath("shim.py").read_bytes())
    shim.chmod(0o555)
    if relay:
        write_helper(private, RELAY_NAME)
    return private


class _Attacher:
    """Turns received sockets into agent endpoints of ``mediation``; owns them until then.

    Each attach runs as a task of the owning actor (``spawn``): a connection that cannot be
    wrapped is closed and logged; anything else is a bug that crashes the owner.
    """

    def __init__(
        self,
        mediation: Mediation,
        spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
    ) -> None:
        self._mediation = mediation
        self._spawn = spawn
        self._pending: set[asyncio.Task[None]] = set()

    def live(self) -> int:
        return len(self._mediation.endpoints) + len(self._pending)

    def __call__(self, sock: socket.socket) -> None:
        task = self._spawn(self._attach(sock))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _attach(self, sock: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=sock, limit=READ_LIMIT_BYTES)
        except OSError as exc:
            sock.close()
            _log.warning("an agent connection could not be served: %s", exc)
            return
        except BaseException:
            sock.close()
            raise
        if self._mediation.supervisor.state != "running":
            writer.close()  # the session is ending: nothing will serve it
            return
        self._mediation.attach(reader, writer)

    async def cancel(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await settle(*self._pending)


class AgentChannel(Actor):
    """The host end of ``glove run``'s channel, as an actor of the session tree.

    Once the mediation is ready it reads the channel (:class:`ConnectionReceiver`) and turns
    each connection into an agent endpoint of the mediation; at stop it closes the channel
    and every connection not yet attached. It owns ``host_end`` from construction on.

    With ``host_end=None`` it reads no channel of its own: another reader of the sandbox's
    channel (the egress proxy, when ``glove-egress --mcp`` relays MCP connections as kind
    ``c``) hands each connection to :meth:`take`.
    """

    def __init__(self, host_end: socket.socket | None, mediation: Mediation) -> None:
        super().__init__("channel", mailbox_size=1)
        self._host_end = host_end
        self._mediation = mediation
        self._receiver: ConnectionReceiver | None = None
        self._attacher: _Attacher | None = None
        self.refused = 0

    async def on_start(self) -> None:
        """Wait for the mediation to be ready, then start receiving connections."""
        await self._mediation.ready.wait()
        self._attacher = _Attacher(
            self._mediation, lambda coro: self.spawn_task(coro, name="attach")
        )
        if self._host_end is not None:
            self._receiver = ConnectionReceiver(self._host_end, self._attacher, self._attacher.live)
            self._receiver.start()

    def take(self, kind: bytes, sock: socket.socket) -> None:
        """Attach one MCP connection another channel reader received (it owns ``sock`` now).

        Closed instead when the channel is not ready or already holds
        :data:`MAX_AGENT_CONNECTIONS` live connections.
        """
        del kind  # always CONNECTION_BYTE: the reader dispatches by kind
        attacher = self._attacher
        if attacher is None or self.state != "running" or attacher.live() >= MAX_AGENT_CONNECTIONS:
            sock.close()
            self.refused += 1
            if self.refused <= MAX_REFUSALS_LOGGED:
                _log.warning("refused an MCP connection from the sandbox (not ready or full)")
            return
        attacher(sock)

    async def on_stop(self) -> None:
        """Close the channel and every connection not yet attached."""
        if self._receiver is not None:
            self._receiver.close()
        elif self._host_end is not None:
            self._host_end.close()
        if self._attacher is not None:
            await self._attacher.cancel()

    def force_kill(self) -> None:
        """Close the channel at once."""
        if self._host_end is not None:
            with contextlib.suppress(OSError):
                self._host_end.close()
