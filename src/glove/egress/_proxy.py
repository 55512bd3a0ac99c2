"""The per-session egress proxy: an actor that serves what the sandbox's helper hands over.

Process shape::

    host (this actor, in the session tree)          sandbox (own, route-less netns)
      channel: host end of a socketpair  <--------   glove-egress (one PID): listens on
        one kind byte + one fd per message             127.0.0.1:3128 (h), :1080 (s),
      ChannelReceiver -> one task per connection       :53 udp/tcp (d); spawns COMMAND
        h: HTTP forward / CONNECT (_serve_http)
        s: SOCKS5 CONNECT (_serve_socks)             COMMAND reaches the network only
        d: DNS stream (_serve_dns)                     through those listeners
      audit sink (the AuditLog actor)
      upstream sockets: host network, after the decision is durable

The actor owns the channel and every connection task (``spawn_task``: cancelled when it
stops). It never sends a descriptor into the sandbox; the only sockets it opens are upstream
connections to addresses it checked. When it stops or crashes, the channel closes, the
helper sees end of file and closes its listeners: the sandbox's network ends, it never opens.

Faults a connection can cause (a malformed request, a peer that resets or stalls, an
upstream that refuses) end that connection only; an exception that escapes a handler is a
bug and crashes the actor, which its supervisor (one strike in a session) turns into the end
of the session: fail closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Final

import msgspec

from glove.actors import Actor
from glove.egress._admission import (
    END_FLUSH_INTERVAL_S,
    AuditSink,
    EgressCore,
    EgressStats,
    ProxyLimits,
)
from glove.egress._channel import INET_FAMILIES, UNIX_FAMILIES, ChannelReceiver, Kind
from glove.egress._listeners import KIND_DNS, KIND_HTTP, KIND_SOCKS
from glove.egress._resolve import Resolver
from glove.egress._rules import RuleSet
from glove.egress._serve_dns import serve_dns
from glove.egress._serve_http import serve_http
from glove.egress._serve_socks import serve_socks
from glove.egress.errors import EgressError

_log = logging.getLogger(__name__)

#: Mailbox of the proxy actor (it gets only stats requests; connections come by channel).
PROXY_MAILBOX: Final = 64
#: Seconds the proxy waits, when it stops, for its last end records to be appended.
FINAL_FLUSH_TIMEOUT_S: Final = 2.0

Handler = Callable[[EgressCore, socket.socket], Awaitable[None]]


class GetStats(msgspec.Struct, frozen=True):
    """Ask the proxy for its :class:`EgressStats`."""


class EgressProxy(Actor):
    """The audited, rule-checked proxy of one session, fed through an inherited channel.

    Start it under the session's supervisor (or with :func:`glove.actors.running`); pass
    the guest end of the same socketpair to the sandbox as the helper's descriptor.
    """

    def __init__(
        self,
        channel: socket.socket,
        rules: RuleSet,
        audit: AuditSink,
        *,
        session: str,
        resolver: Resolver | None = None,
        limits: ProxyLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str = "egress",
        other_kinds: Mapping[bytes, Kind] | None = None,
        local_names: Iterable[str] = (),
    ) -> None:
        """Serve ``rules`` on the host end ``channel`` (owned from now on) for ``session``.

        ``other_kinds`` adds kinds this channel also carries, served by someone else: under
        ``glove run`` with ``glove-egress --mcp``, ``{b"c": Kind(UNIX_FAMILIES, attach)}``
        hands MCP connections to the mediation (their callback owns the socket).
        ``local_names`` (the sandbox's host name) resolve to loopback, as ``localhost`` does.
        """
        super().__init__(name, mailbox_size=PROXY_MAILBOX)
        self.core = EgressCore(
            rules,
            audit,
            session=session,
            resolver=resolver,
            limits=limits,
            clock=clock,
            local_names=frozenset(local_names),
        )
        self._channel = channel
        self._receiver: ChannelReceiver | None = None
        self._live = 0
        self._other_kinds = dict(other_kinds or {})
        clash = set(self._other_kinds) & {KIND_HTTP, KIND_SOCKS, KIND_DNS}
        if clash:
            raise ValueError(f"kinds {sorted(clash)} are the proxy's own")
        self._handlers: dict[bytes, Handler] = {
            KIND_HTTP: serve_http,
            KIND_SOCKS: serve_socks,
            KIND_DNS: serve_dns,
        }

    @property
    def stats(self) -> EgressStats:
        """The counters now (read on the loop thread; no mailbox round trip)."""
        return self.core.stats()

    @property
    def live_connections(self) -> int:
        """Connections being served now."""
        return self._live

    @property
    def receiver(self) -> ChannelReceiver | None:
        """The channel reader once started (its ``closed`` event: the helper is gone)."""
        return self._receiver

    async def on_start(self) -> None:
        """Start reading the channel."""
        kinds = {
            KIND_HTTP: Kind(INET_FAMILIES, self._take),
            KIND_SOCKS: Kind(INET_FAMILIES, self._take),
            KIND_DNS: Kind(INET_FAMILIES | UNIX_FAMILIES, self._take),
            **self._other_kinds,
        }
        self._receiver = ChannelReceiver(
            self._channel,
            kinds,
            live=lambda: self._live,
            max_live=self.core.limits.max_connections,
        )
        self._receiver.start()
        self.spawn_task(self._flush_ends(), name="end-records")

    async def on_stop(self) -> None:
        """Close the channel (the helper closes its listeners), then append the last end records."""
        if self._receiver is not None:
            self._receiver.close()
        else:
            self._channel.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FINAL_FLUSH_TIMEOUT_S):
                await self.core.flush_ends()

    async def _flush_ends(self) -> None:
        # End records wait at most END_FLUSH_INTERVAL_S for a decision record to share a
        # group commit with; then they go on their own.
        while True:
            await self.core.ends_pending.wait()
            await asyncio.sleep(END_FLUSH_INTERVAL_S)
            self.core.ends_pending.clear()
            await self.core.flush_ends()

    async def handle(self, msg: object) -> object:
        """Answer :class:`GetStats`.

        Raises:
            TypeError: any other message (a bug in the caller: the actor crashes).
        """
        if isinstance(msg, GetStats):
            return self.core.stats()
        raise TypeError(f"egress proxy got unexpected message {type(msg).__name__}")

    def _take(self, kind: bytes, sock: socket.socket) -> None:
        self._live += 1
        try:
            self.spawn_task(self._serve(self._handlers[kind], sock), name=f"conn-{kind.decode()}")
        except BaseException:
            self._live -= 1
            sock.close()
            raise

    async def _serve(self, handler: Handler, sock: socket.socket) -> None:
        try:
            with sock:
                sock.setblocking(False)
                await handler(self.core, sock)
        except (OSError, TimeoutError, EgressError) as exc:
            _log.debug("an egress connection ended: %r", exc)
        finally:
            self._live -= 1
