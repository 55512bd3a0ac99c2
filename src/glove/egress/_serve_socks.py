"""The SOCKS5 listener's connections: CONNECT with the proxy resolving names.

The same decision path as the HTTP proxy (:mod:`glove.egress._admission`); a refusal is the
RFC 1928 reply that fits (the protocol has no text, so the audit record and
``glove network check`` name the rule):

==========================================  =======================================
refused because                             reply
==========================================  =======================================
the rules, or the address check             ``0x02`` connection not allowed by ruleset
the name does not resolve                   ``0x04`` host unreachable
the connect was refused / timed out         ``0x05`` / ``0x04``
BIND or UDP ASSOCIATE                       ``0x07`` command not supported
an unknown address type                     ``0x08`` address type not supported
the audit log is unavailable, anything else ``0x01`` general failure
==========================================  =======================================

With an ``sni`` rule the success reply comes first, then the ClientHello is checked as for
CONNECT; a mismatch gets a TLS ``access_denied`` alert.
"""

from __future__ import annotations

import asyncio
import socket

from glove.egress._admission import (
    EgressCore,
    Exchange,
    PeerGone,
    Refused,
    RefusedInTunnel,
    recv_some,
    send_all,
    send_quietly,
)
from glove.egress._pump import Traffic, relay
from glove.egress._serve_http import Admitted, confirm_sni
from glove.egress._socks5 import (
    CMD_CONNECT,
    MAX_GREETING_BYTES,
    METHOD_NO_AUTH,
    REPLY_COMMAND_NOT_SUPPORTED,
    REPLY_CONNECTION_REFUSED,
    REPLY_GENERAL_FAILURE,
    REPLY_HOST_UNREACHABLE,
    REPLY_NOT_ALLOWED,
    REPLY_SUCCEEDED,
    Socks5Greeting,
    Socks5Parser,
    Socks5Request,
    reply,
)
from glove.egress._tls import ALERT_ACCESS_DENIED
from glove.egress.errors import ConnectFailed, Socks5Error

_REPLY = {
    "rules": REPLY_NOT_ALLOWED,
    "address": REPLY_NOT_ALLOWED,
    "malformed": REPLY_GENERAL_FAILURE,
    "resolve": REPLY_HOST_UNREACHABLE,
    "lookup": REPLY_HOST_UNREACHABLE,
    "audit": REPLY_GENERAL_FAILURE,
}
_CONNECT_REPLY = {"refused": REPLY_CONNECTION_REFUSED, "timeout": REPLY_HOST_UNREACHABLE}


class _NoReply(Refused):
    """A refusal the protocol has no reply for (not SOCKS5 at all)."""


class _Coded(Refused):
    """A refusal with its own SOCKS5 reply code (command or address type not supported)."""

    def __init__(self, reason: str, code: int) -> None:
        super().__init__(reason, None, "malformed")
        self.code = code


async def _read_request(
    core: EgressCore, client: socket.socket, parser: Socks5Parser
) -> Socks5Request:
    """Socks5Greeting, method reply, request, all within the head deadline.

    Raises:
        Refused: a malformed exchange, no acceptable method, or the deadline.
    """
    deadline = asyncio.get_running_loop().time() + core.limits.head_timeout_s
    try:
        event = parser.feed(b"")
        while not isinstance(event, Socks5Greeting):
            event = parser.feed(await recv_some(client, deadline, MAX_GREETING_BYTES))
        await send_all(client, event.reply, core.limits.reply_timeout_s)
        if METHOD_NO_AUTH not in event.methods:
            raise _NoReply("the client offered no acceptable method (no-auth)", None, "malformed")
        request = parser.feed(b"")
        while not isinstance(request, Socks5Request):
            request = parser.feed(await recv_some(client, deadline, MAX_GREETING_BYTES))
    except Socks5Error as exc:
        if exc.reply_code is None:
            raise _NoReply(f"malformed SOCKS5: {exc}", None, "malformed") from exc
        raise _Coded(f"malformed SOCKS5: {exc}", exc.reply_code) from exc
    except (PeerGone, TimeoutError, OSError) as exc:
        raise _NoReply("no complete SOCKS5 request before the deadline", None, "malformed") from exc
    return request


async def _admit(
    core: EgressCore, ex: Exchange, client: socket.socket, parser: Socks5Parser
) -> Admitted:
    """Read and decide the request; return what to connect to once it is audited.

    Raises:
        Refused: malformed, not CONNECT, refused, unresolvable or unaudited.
    """
    request = await _read_request(core, client, parser)
    if request.command != CMD_CONNECT:
        ex.host, ex.port = request.host[:255], request.port
        raise _Coded("only CONNECT is served", REPLY_COMMAND_NOT_SUPPORTED)
    decision = core.decide(ex, request.host, request.port, method="CONNECT", tunnel=True)
    assert ex.host is not None
    addresses = await core.addresses(ex, ex.host, request.port)
    admitted = Admitted(addresses, request.port, parser.trailing, replied=False)
    if decision.rule is not None and decision.rule.sni:
        admitted.replied = True
        admitted.first = await confirm_sni(
            core, ex, client, parser.trailing, reply(REPLY_SUCCEEDED)
        )
    await core.record_allow(ex, decision.reason)
    return admitted


async def serve_socks(core: EgressCore, client: socket.socket) -> None:
    """Serve one connection to the sandbox's SOCKS5 listener."""
    limits = core.limits
    ex = core.exchange("socks5")
    ex.method = "CONNECT"
    parser = Socks5Parser()
    try:
        admitted = await _admit(core, ex, client, parser)
    except Refused as refusal:
        await core.record_deny(ex, refusal)
        if isinstance(refusal, RefusedInTunnel):
            await send_quietly(client, ALERT_ACCESS_DENIED, limits.reply_timeout_s)
        elif not isinstance(refusal, _NoReply):
            code = refusal.code if isinstance(refusal, _Coded) else _REPLY[refusal.kind]
            await send_quietly(client, reply(code), limits.reply_timeout_s)
        return
    try:
        upstream, address = await core.connect(admitted.addresses, admitted.port)
    except ConnectFailed as exc:
        await core.record_end(ex, None, 0, 0, f"connect-{exc.why}")
        if not admitted.replied:
            code = _CONNECT_REPLY.get(exc.why, REPLY_HOST_UNREACHABLE)
            await send_quietly(client, reply(code), limits.reply_timeout_s)
        return
    traffic = Traffic()
    with upstream:
        try:
            if not admitted.replied:
                await send_all(client, reply(REPLY_SUCCEEDED), limits.reply_timeout_s)
            if admitted.first:
                await send_all(upstream, admitted.first, limits.idle_timeout_s)
                traffic.up += len(admitted.first)
            outcome = await relay(
                client, upstream, traffic, idle_timeout=limits.idle_timeout_s, pool=core.buffers
            )
        except (OSError, TimeoutError):
            outcome = "reset"
        except asyncio.CancelledError:  # the session ends: its end record still gets written
            core.queue_end(ex, address, traffic.up, traffic.down, "stopped")
            raise
    await core.record_end(ex, address, traffic.up, traffic.down, outcome)
