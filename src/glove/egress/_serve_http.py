"""The HTTP proxy listener's connections: forward proxying of ``http://`` and CONNECT.

One request per connection. The head is read under a deadline and a cap, decided, the
name resolved once and checked, the decision made durable, and only then is the upstream
connection opened:

* ``CONNECT host:port`` answers ``200 Connection established`` and copies bytes both ways.
  With an ``sni`` rule, the 200 comes first, then the client's ClientHello is read and its
  SNI compared with ``host``; a mismatch (or an Encrypted Client Hello) gets a TLS
  ``access_denied`` alert and no upstream connection.
* ``GET http://host/path`` (any method; ``read-only`` rules allow GET, HEAD and OPTIONS)
  is sent upstream in origin form with its ``Host`` rewritten to the checked authority,
  hop-by-hop headers removed and ``Connection: close``; the body is forwarded up to the end
  its framing declares and not one byte further; the response is copied until the upstream
  closes.

Refusals are a short ``text/plain`` reply whose body says what was refused and why and whose
``X-Glove-Egress`` header names the rule: 403 (the rules or the address check), 400 (a
malformed request), 502 (the name does not resolve, the connect failed), 503 (the audit log
is unavailable: nothing is connected unaudited), 504 (the connect timed out).
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

from glove.egress._addresses import IPAddress
from glove.egress._core import (
    EgressCore,
    Exchange,
    PeerGone,
    Refused,
    RefusedInTunnel,
    recv_some,
    send_all,
    send_quietly,
)
from glove.egress._http import (
    CONNECT_ESTABLISHED,
    ChunkedFramer,
    Framing,
    RequestHead,
    RequestHeadParser,
    Target,
    body_framing,
    error_response,
    forward_head,
    proxy_target,
)
from glove.egress._pump import Gate, GateError, Traffic, relay
from glove.egress._tls import ALERT_ACCESS_DENIED, ClientHello, ClientHelloParser
from glove.egress.errors import ConnectFailed, HttpHeadError, TlsHelloError

_STATUS = {
    "rules": 403,
    "address": 403,
    "malformed": 400,
    "resolve": 502,
    "lookup": 502,
    "audit": 503,
}


@dataclass(slots=True)
class Admitted:
    """A connection the rules, the address check and the audit log have let through.

    Attributes:
        addresses: the checked addresses, in the order to try them.
        port: the destination port.
        first: bytes of the sandbox's stream already read (after the head, or the hello).
        replied: the success reply was already sent (an SNI rule had to read the hello).
    """

    addresses: list[IPAddress]
    port: int
    first: bytes
    replied: bool


async def read_head(sock: socket.socket, parser: RequestHeadParser, timeout: float) -> RequestHead:
    """Read until ``parser`` has a complete head, within ``timeout`` seconds.

    Raises:
        HttpHeadError: the head is malformed or over its cap.
        PeerGone: the client closed first.
        TimeoutError: the deadline passed.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        head = parser.feed(await recv_some(sock, deadline))
        if head is not None:
            return head


async def read_hello(
    sock: socket.socket, first: bytes, timeout: float
) -> tuple[ClientHello, bytes]:
    """Read the client's ClientHello (``first`` already arrived); return it and every byte read.

    Raises:
        TlsHelloError: not a TLS handshake, or malformed.
        PeerGone: the client closed first.
        TimeoutError: the deadline passed.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    parser = ClientHelloParser()
    seen = bytearray()
    data = first
    while True:
        seen += data
        hello = parser.feed(data) if data else None
        if hello is not None:
            return hello, bytes(seen)
        data = await recv_some(sock, deadline)


async def confirm_sni(
    core: EgressCore, ex: Exchange, client: socket.socket, first: bytes, success: bytes
) -> bytes:
    """Send ``success``, read the ClientHello, refuse unless its SNI is the requested host.

    Returns every byte read (to forward unchanged once connected).

    Raises:
        RefusedInTunnel: no valid hello in time, no SNI or another one, or an Encrypted
            Client Hello (the success reply is out: the caller answers with a TLS alert).
    """
    await send_all(client, success, core.limits.reply_timeout_s)
    try:
        hello, seen = await read_hello(client, first, core.limits.hello_timeout_s)
    except TlsHelloError as exc:
        raise RefusedInTunnel(f"not a valid TLS ClientHello: {exc}", ex.rule, "rules") from exc
    except (PeerGone, TimeoutError, OSError) as exc:
        raise RefusedInTunnel("no ClientHello before the deadline", ex.rule, "rules") from exc
    ex.sni = hello.server_name
    if hello.encrypted:
        raise RefusedInTunnel("an encrypted ClientHello hides the server name", ex.rule, "rules")
    if hello.server_name != ex.host:
        raise RefusedInTunnel(
            "the TLS server name does not match the requested host", ex.rule, "rules"
        )
    return seen


def body_gate(framing: Framing) -> Gate:
    """A gate that lets exactly the declared request body through."""
    kind, length = framing
    if kind == "chunked":
        framer = ChunkedFramer()

        def chunked(chunk: memoryview) -> tuple[int, bool]:
            if framer.done:
                return 0, True
            try:
                used = framer.feed(bytes(chunk))
            except HttpHeadError as exc:
                raise GateError(str(exc)) from exc
            return used, framer.done

        return chunked
    remaining = length

    def counted(chunk: memoryview) -> tuple[int, bool]:
        nonlocal remaining
        keep = min(remaining, len(chunk))
        remaining -= keep
        return keep, remaining == 0

    return counted


async def _admit(
    core: EgressCore, ex: Exchange, client: socket.socket, parser: RequestHeadParser
) -> tuple[RequestHead, Target, Framing, Admitted]:
    """Read and decide the request; return what to connect to once it is audited.

    Raises:
        Refused: the request is malformed, refused, unresolvable or unaudited.
    """
    try:
        head = await read_head(client, parser, core.limits.head_timeout_s)
        target = proxy_target(head)
        tunnel = head.method == "CONNECT"
        framing: Framing = ("none", 0) if tunnel else body_framing(head)
    except HttpHeadError as exc:
        raise Refused(f"malformed request: {exc}", None, "malformed", status=exc.status) from exc
    except (PeerGone, TimeoutError, OSError) as exc:
        raise Refused("no complete request before the deadline", None, "malformed") from exc
    ex.proto = "connect" if tunnel else "http"
    decision = core.decide(ex, target.host, target.port, method=head.method, tunnel=tunnel)
    assert ex.host is not None
    addresses = await core.addresses(ex, ex.host, target.port)
    admitted = Admitted(addresses, target.port, parser.trailing, replied=False)
    if tunnel and decision.rule is not None and decision.rule.sni:
        admitted.replied = True
        admitted.first = await confirm_sni(core, ex, client, parser.trailing, CONNECT_ESTABLISHED)
    await core.record_allow(ex, decision.reason)
    return head, target, framing, admitted


async def serve_http(core: EgressCore, client: socket.socket) -> None:
    """Serve one connection to the sandbox's HTTP proxy listener."""
    limits = core.limits
    ex = core.exchange("http")
    parser = RequestHeadParser()
    try:
        head, target, framing, admitted = await _admit(core, ex, client, parser)
    except Refused as refusal:
        await core.record_deny(ex, refusal)
        if isinstance(refusal, RefusedInTunnel):
            await send_quietly(client, ALERT_ACCESS_DENIED, limits.reply_timeout_s)
        else:
            await _reply_refusal(core, ex, client, refusal)
        return
    try:
        upstream, address = await core.connect(admitted.addresses, admitted.port)
    except ConnectFailed as exc:
        await core.record_end(ex, None, 0, 0, f"connect-{exc.why}")
        if not admitted.replied:
            status = 504 if exc.why == "timeout" else 502
            text = f"{ex.host}:{ex.port}: the upstream connection failed ({exc.why})"
            await send_quietly(client, error_response(status, text), limits.reply_timeout_s)
        return
    traffic = Traffic()
    with upstream:
        if head.method == "CONNECT":
            outcome = await _tunnel(core, client, upstream, admitted, traffic)
        else:
            outcome = await _forward(
                core, client, upstream, head=head, target=target, framing=framing,
                trailing=admitted.first, traffic=traffic,
            )  # fmt: skip
    await core.record_end(ex, address, traffic.up, traffic.down, outcome)


async def _tunnel(
    core: EgressCore,
    client: socket.socket,
    upstream: socket.socket,
    admitted: Admitted,
    traffic: Traffic,
) -> str:
    limits = core.limits
    try:
        if not admitted.replied:
            await send_all(client, CONNECT_ESTABLISHED, limits.reply_timeout_s)
        if admitted.first:
            await send_all(upstream, admitted.first, limits.idle_timeout_s)
            traffic.up += len(admitted.first)
        return await relay(
            client, upstream, traffic, idle_timeout=limits.idle_timeout_s, pool=core.buffers
        )
    except (OSError, TimeoutError):
        return "reset"


async def _forward(
    core: EgressCore,
    client: socket.socket,
    upstream: socket.socket,
    *,
    head: RequestHead,
    target: Target,
    framing: Framing,
    trailing: bytes,
    traffic: Traffic,
) -> str:
    idle = core.limits.idle_timeout_s
    try:
        gate = body_gate(framing)
        keep, _ = gate(memoryview(trailing))
        first = forward_head(head, target) + trailing[:keep]
        await send_all(upstream, first, idle)
        traffic.up += len(first)
        return await relay(
            client, upstream, traffic, idle_timeout=idle, gate=gate, pool=core.buffers
        )
    except GateError:
        return "malformed-body"  # the body's framing broke in its first bytes: nothing sent
    except (OSError, TimeoutError):
        return "reset"


async def _reply_refusal(
    core: EgressCore, ex: Exchange, client: socket.socket, refusal: Refused
) -> None:
    status = refusal.status or _STATUS[refusal.kind]
    where = f"{ex.method or 'request'} {ex.host}:{ex.port}" if ex.host else "the request"
    reply = error_response(status, f"{where} refused: {refusal.reason}", rule=refusal.rule)
    await send_quietly(client, reply, core.limits.reply_timeout_s)
