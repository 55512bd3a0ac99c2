"""The HTTP proxy listener's connections: forward proxying of ``http://`` and CONNECT.

One request per connection. The head is read under a deadline and a cap, decided, the
name resolved once and checked, the decision made durable, and only then is the upstream
connection opened:

* ``CONNECT host:port`` answers ``200 Connection established`` and copies bytes both ways.
  With an ``sni`` rule, the 200 comes first, then the client's ClientHello is read and its
  SNI compared with ``host``; a mismatch (or an Encrypted Client Hello) gets a TLS
  ``access_denied`` alert and no upstream connection.
* ``GET http://host/path`` (any method; ``read-only`` rules allow GET, HEAD and OPTIONS
  without a body) is sent upstream as :func:`~glove.egress._rewrite.rewrite_request`
  writes it: origin form, ``Host`` the checked authority, the framing the proxy counted,
  hop-by-hop headers removed, ``Connection: close``. The body is forwarded up to the end
  its framing declares and not one byte further, through a :class:`BodyGate` that lets
  each chunk line through only once it is complete and valid; the bytes that came with the
  head go through the gate *before* the decision, so a body that is malformed from its
  start is a 400 and nothing is connected. A body that turns out malformed later ends the
  exchange (a 400 if no response byte was relayed yet; the end record's ``outcome`` is
  ``malformed-body`` with its ``reason``). The response is copied until the upstream
  closes.
* A ``CONNECT`` with a body (``Transfer-Encoding``, or a ``Content-Length`` other than 0)
  is refused: whether the bytes after its head are a body or tunnel data is ambiguous.

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
from glove.egress._http import (
    CONNECT_ESTABLISHED,
    ChunkedFramer,
    Framing,
    RequestHead,
    RequestHeadParser,
    Target,
    body_framing,
    error_response,
    proxy_target,
)
from glove.egress._pump import GateError, Traffic, relay
from glove.egress._rewrite import rewrite_request
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


class BodyGate:
    """A pump gate that lets exactly the declared request body through, checked.

    ``Content-Length`` bodies pass as they arrive, cut at the length; chunked bodies pass
    through :class:`ChunkedFramer` (lines only once complete and valid, the last chunk and
    trailers only once the whole section is). :attr:`error` keeps why a body was refused.
    """

    def __init__(self, framing: Framing) -> None:
        """Gate a body framed as ``framing``."""
        kind, length = framing
        self._framer = ChunkedFramer() if kind == "chunked" else None
        self._remaining = length if kind == "length" else 0
        self.error: str | None = None

    @property
    def done(self) -> bool:
        """The whole body has been let through."""
        return self._framer.done if self._framer is not None else self._remaining == 0

    def __call__(self, chunk: memoryview) -> tuple[bytes | memoryview, bool]:
        """What of ``chunk`` to forward now, and whether the body is complete.

        Raises:
            GateError: the chunked framing is malformed (:attr:`error` says how).
        """
        if self.done:
            return b"", True
        if self._framer is None:
            keep = min(self._remaining, len(chunk))
            self._remaining -= keep
            return chunk[:keep], self._remaining == 0
        try:
            out = self._framer.forward(bytes(chunk))
        except HttpHeadError as exc:
            self.error = f"malformed request body: {exc}"
            raise GateError(self.error) from exc
        return out, self._framer.done


@dataclass(slots=True)
class Forward:
    """A plain-HTTP request the proxy will forward: its head, its gate, the first bytes."""

    head: bytes
    gate: BodyGate
    first: bytes | memoryview


def has_body(framing: Framing) -> bool:
    """The request carries content (chunked, even empty, or a length above 0)."""
    kind, length = framing
    return kind == "chunked" or length > 0


def request_framing(head: RequestHead) -> Framing:
    """The body framing of ``head``; a CONNECT has none.

    Raises:
        HttpHeadError: the framing is refused, or a CONNECT declares a body (whether the
            bytes after its head are a body or tunnel data would be ambiguous).
    """
    framing = body_framing(head)
    if head.method == "CONNECT" and has_body(framing):
        raise HttpHeadError("a CONNECT request with a body")
    return framing


def prepare_forward(head: RequestHead, target: Target, trailing: bytes) -> Forward:
    """Rewrite a plain-HTTP head and gate the body bytes that came with it (no I/O).

    Raises:
        HttpHeadError: the head cannot be forwarded as judged (``rewrite_request``), or
            the body's first bytes are malformed.
    """
    upstream = rewrite_request(head, target)
    gate = BodyGate(upstream.framing)
    try:
        first, _ = gate(memoryview(trailing))
    except GateError as exc:
        raise HttpHeadError(str(exc).removeprefix("malformed request body: ")) from exc
    return Forward(upstream.head, gate, first)


async def _admit(
    core: EgressCore, ex: Exchange, client: socket.socket, parser: RequestHeadParser
) -> tuple[Forward | None, Admitted]:
    """Read and decide the request; return what to connect to once it is audited.

    Everything that decides what the origin will read (the rewritten head, the framing,
    the body bytes already here) is settled before the rules are asked, so a request that
    cannot be forwarded exactly as judged is a 400 whatever the rules say, and nothing is
    connected.

    Raises:
        Refused: the request is malformed, refused, unresolvable or unaudited.
    """
    try:
        head = await read_head(client, parser, core.limits.head_timeout_s)
        target = proxy_target(head)
        tunnel = head.method == "CONNECT"
        ex.proto = "connect" if tunnel else "http"
        core.destination(ex, target.host, target.port, method=head.method)
        framing = request_framing(head)
        forward = None if tunnel else prepare_forward(head, target, parser.trailing)
    except HttpHeadError as exc:
        raise Refused(f"malformed request: {exc}", None, "malformed", status=exc.status) from exc
    except (PeerGone, TimeoutError, OSError) as exc:
        raise Refused("no complete request before the deadline", None, "malformed") from exc
    decision = core.decide(
        ex, target.host, target.port, method=head.method, tunnel=tunnel, body=has_body(framing)
    )
    assert ex.host is not None
    addresses = await core.addresses(ex, ex.host, target.port)
    admitted = Admitted(addresses, target.port, parser.trailing, replied=False)
    if tunnel and decision.rule is not None and decision.rule.sni:
        admitted.replied = True
        admitted.first = await confirm_sni(core, ex, client, parser.trailing, CONNECT_ESTABLISHED)
    await core.record_allow(ex, decision.reason)
    return forward, admitted


async def serve_http(core: EgressCore, client: socket.socket) -> None:
    """Serve one connection to the sandbox's HTTP proxy listener."""
    limits = core.limits
    ex = core.exchange("http")
    parser = RequestHeadParser()
    try:
        forward, admitted = await _admit(core, ex, client, parser)
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
    reason: str | None = None
    try:
        with upstream:
            if forward is None:
                outcome = await _tunnel(core, client, upstream, admitted, traffic)
            else:
                outcome = await _forward(core, client, upstream, forward, traffic)
                reason = forward.gate.error
    except asyncio.CancelledError:  # the session ends: its end record still gets written
        core.queue_end(ex, address, traffic.up, traffic.down, "stopped")
        raise
    if reason is not None and traffic.down == 0:
        await send_quietly(client, error_response(400, reason), limits.reply_timeout_s)
    await core.record_end(ex, address, traffic.up, traffic.down, outcome, reason=reason)


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
    forward: Forward,
    traffic: Traffic,
) -> str:
    idle = core.limits.idle_timeout_s
    try:
        first = forward.head + bytes(forward.first)
        await send_all(upstream, first, idle)
        traffic.up += len(first)
        return await relay(
            client, upstream, traffic, idle_timeout=idle, gate=forward.gate, pool=core.buffers
        )
    except (OSError, TimeoutError):
        return "reset"


async def _reply_refusal(
    core: EgressCore, ex: Exchange, client: socket.socket, refusal: Refused
) -> None:
    status = refusal.status or _STATUS[refusal.kind]
    where = f"{ex.method or 'request'} {ex.host}:{ex.port}" if ex.host else "the request"
    reply = error_response(status, f"{where} refused: {refusal.reason}", rule=refusal.rule)
    await send_quietly(client, reply, core.limits.reply_timeout_s)
