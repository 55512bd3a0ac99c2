"""The host end of an inherited descriptor channel: one kind byte carrying one descriptor.

The one descriptor receiver: the egress proxy's and ``glove run``'s MCP channel
(:class:`glove.mcp.ConnectionReceiver`, kind ``c`` alone) are this class, so the one helper
in the sandbox (``glove-egress``, or ``glove-relay`` for MCP alone) is read the same way
whatever it serves:

========  =========================================  ======================================
kind      what the descriptor is                      families accepted
========  =========================================  ======================================
``h``     a connection to the HTTP proxy listener     AF_INET, AF_INET6 (TCP)
``s``     a connection to the SOCKS5 listener         AF_INET, AF_INET6 (TCP)
``d``     a DNS stream (a TCP client, or a            AF_INET, AF_INET6, AF_UNIX
          socketpair carrying one UDP query)
``c``     an MCP client connection (``glove run``)    AF_UNIX
========  =========================================  ======================================

Each message is read with ``recvmsg`` for one byte and one descriptor. A message with a kind
nobody registered, without exactly one descriptor, with cut control data (``MSG_CTRUNC``),
or whose descriptor is not a *connected stream socket* of an accepted family, is closed and
counted, never served. A connection beyond ``max_live`` live ones is closed on arrival. End
of file (the helper exited) ends receiving and sets :attr:`closed`. Every descriptor
received is either handed to its kind's callback (which then owns it) or closed here.

The kind byte grants nothing: whatever the sandbox sends is parsed by that kind's protocol
with that kind's rules, so a helper that lies about a kind only talks a protocol badly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

_log = logging.getLogger(__name__)

#: One byte per ``recvmsg``: a message is one byte carrying one descriptor.
MESSAGE_BYTES: Final = 1
FDS_PER_MESSAGE: Final = 1
MAX_MESSAGES_PER_WAKEUP: Final = 32
#: Refusals logged per channel; later ones are only counted.
MAX_REFUSALS_LOGGED: Final = 16
INET_FAMILIES: Final = frozenset({socket.AF_INET, socket.AF_INET6})
UNIX_FAMILIES: Final = frozenset({socket.AF_UNIX})
_FAMILY_NAMES: Final[dict[int, str]] = {
    socket.AF_INET: "TCP",
    socket.AF_INET6: "TCP",
    socket.AF_UNIX: "Unix",
}


def _families(families: frozenset[int]) -> str:
    """``families`` as a log names them: ``Unix``, ``TCP`` or ``TCP or Unix``."""
    return " or ".join(sorted({_FAMILY_NAMES.get(family, str(family)) for family in families}))


@dataclass(frozen=True, slots=True)
class Kind:
    """What one kind byte means: the families accepted and who takes the socket."""

    families: frozenset[int]
    take: Callable[[bytes, socket.socket], None]


def connected_stream(fd: int, families: frozenset[int]) -> socket.socket | None:
    """Own ``fd``; return it as a socket if it is a connected stream of ``families``, else close."""
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        sock = socket.socket(fileno=fd)
    except OSError:
        os.close(fd)
        return None
    try:
        domain = sock.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
        kind = sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
        listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        if domain in families and kind == socket.SOCK_STREAM and not listening:
            sock.getpeername()  # ENOTCONN for a socket that was never connected
            return sock
    except OSError:
        pass
    sock.close()
    return None


class ChannelReceiver:
    """Reads the host end of the channel on the running loop and dispatches by kind."""

    def __init__(
        self,
        channel: socket.socket,
        kinds: Mapping[bytes, Kind],
        *,
        live: Callable[[], int],
        max_live: int,
    ) -> None:
        """Take ownership of ``channel``; call :meth:`start` to begin reading."""
        self._channel = channel
        self._kinds = dict(kinds)
        self._live = live
        self._max = max_live
        self.accepted = 0
        self.refused = 0
        self.closed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Start reading the channel on the running loop."""
        self._channel.setblocking(False)
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._channel.fileno(), self._on_readable)

    def close(self) -> None:
        """Stop reading and close the channel (idempotent)."""
        if self.closed.is_set():
            return
        if self._loop is not None:
            self._loop.remove_reader(self._channel.fileno())
        self._channel.close()
        self.closed.set()

    def _on_readable(self) -> None:
        for _ in range(MAX_MESSAGES_PER_WAKEUP):
            try:
                data, fds, flags, _ = socket.recv_fds(self._channel, MESSAGE_BYTES, FDS_PER_MESSAGE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                _log.warning("the sandbox channel failed: %s", exc)
                self.close()
                return
            if not data and not fds:
                self.close()  # the helper exited: no more connections
                return
            self._take(data, fds, flags)

    def _take(self, data: bytes, fds: list[int], flags: int) -> None:
        kind = self._kinds.get(data)
        if flags & socket.MSG_CTRUNC or len(fds) != FDS_PER_MESSAGE or kind is None:
            for fd in fds:
                os.close(fd)
            self._refuse("a malformed message (not one known kind byte with one descriptor)")
            return
        sock = connected_stream(fds[0], kind.families)
        if sock is None:
            what = f"{_families(kind.families)} stream socket"
            self._refuse(f"a kind {data!r} descriptor that is not a connected {what}")
            return
        if self._live() >= self._max:
            sock.close()
            self._refuse(f"a connection beyond the limit of {self._max}")
            return
        self.accepted += 1
        kind.take(data, sock)

    def _refuse(self, what: str) -> None:
        self.refused += 1
        if self.refused <= MAX_REFUSALS_LOGGED:
            _log.warning("refused %s from the sandbox", what)
