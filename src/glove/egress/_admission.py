"""Admission: what every egress protocol shares: decide, resolve once, check, audit, connect.

:class:`EgressCore` holds the rules, the resolver, the audit sink and the counters of one
session's proxy; the protocol handlers (:mod:`._serve_http`, :mod:`._serve_socks`,
:mod:`._serve_dns`) call it in a fixed order, the same for every protocol:

1. :meth:`EgressCore.decide` the host and port against the rules (no lookup yet);
2. :meth:`EgressCore.addresses`: resolve the name **once** (or take the literal, or
   ``localhost``) and keep only the addresses the address check passes;
3. :meth:`EgressCore.record` the decision in the audit log and wait until it is durable;
   an audit failure refuses the connection (no audit, no connection);
4. :meth:`EgressCore.connect` to one of exactly those addresses.

A refusal at any step is one audit record (``decision: deny``) and a reply that names the
rule; an allowed connection is the decision record before the connect and an ``egress.end``
record after it, with the bytes each way and the duration (decision 0016).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

import msgspec

from glove.actors import settle
from glove.audit.errors import AuditError, AuditUnavailable
from glove.egress._addresses import IPAddress
from glove.egress._pump import BufferPool
from glove.egress._resolve import Resolver, SystemResolver, fixed_addresses
from glove.egress._rules import Decision, RuleSet, normalize_host
from glove.egress.errors import ConnectFailed, ResolveFailed, RuleError

#: Distinct denied destinations counted one by one; the rest are summed in ``denied_other``.
MAX_DENIED_DESTINATIONS: Final = 256
#: Most candidate addresses tried for one connection.
MAX_CANDIDATES: Final = 4
#: Denied destinations named in the one-line exit summary.
SUMMARY_DESTINATIONS: Final = 3
#: End records queued before they are appended regardless of the next decision.
MAX_PENDING_ENDS: Final = 64
#: Seconds an end record may wait to share a group commit.
END_FLUSH_INTERVAL_S: Final = 0.05

#: Bytes read per receive while a head, greeting or hello is being gathered.
HEAD_READ_BYTES: Final = 16 * 1024


class PeerGone(Exception):
    """The sandbox's side closed the connection before the message was complete."""


async def recv_some(sock: socket.socket, deadline: float, size: int = HEAD_READ_BYTES) -> bytes:
    """Receive at least one byte before the absolute ``deadline`` (``loop.time()``).

    Raises:
        PeerGone: end of file.
        TimeoutError: the deadline passed.
        OSError: the socket failed.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout_at(deadline):
        data = await loop.sock_recv(sock, size)
    if not data:
        raise PeerGone
    return data


async def send_all(sock: socket.socket, data: bytes, timeout: float) -> None:
    """Send ``data`` within ``timeout`` seconds.

    Raises:
        TimeoutError: the peer did not take it in time.
        OSError: the socket failed.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        await loop.sock_sendall(sock, data)


async def send_quietly(sock: socket.socket, data: bytes, timeout: float) -> None:
    """Send a last reply; a peer that is gone or slow is not an error any more."""
    with contextlib.suppress(OSError, TimeoutError):
        await send_all(sock, data, timeout)


RefusalKind = Literal["rules", "address", "resolve", "lookup", "malformed", "audit"]


class AuditSink(Protocol):
    """Where records go: :class:`glove.audit.AuditLog` (``append`` returns once durable)."""

    async def append(self, record: Mapping[str, object]) -> object:
        """Append ``record`` durably.

        Raises:
            AuditError: the record is not durable; the caller must refuse.
        """
        ...


class ProxyLimits(msgspec.Struct, frozen=True):
    """Deadlines (seconds) and bounds of one proxy.

    Attributes:
        head_timeout_s: to receive a complete HTTP head or SOCKS5 request.
        hello_timeout_s: to receive the TLS ClientHello when a rule checks the SNI.
        connect_timeout_s: to connect upstream, all candidate addresses together.
        idle_timeout_s: a connection with no byte either way for this long ends.
        reply_timeout_s: to write a reply (403, a SOCKS5 reply, a DNS answer).
        dns_idle_timeout_s: a DNS stream with no query for this long ends.
        audit_timeout_s: for one audit append to be durable (then: refused, unaudited).
        max_connections: live connections at once; more are closed on arrival.
    """

    head_timeout_s: float = 10.0
    hello_timeout_s: float = 10.0
    connect_timeout_s: float = 10.0
    idle_timeout_s: float = 300.0
    reply_timeout_s: float = 5.0
    dns_idle_timeout_s: float = 10.0
    audit_timeout_s: float = 5.0
    max_connections: int = 256


class DeniedDestination(msgspec.Struct, frozen=True):
    """One refused destination and how often (for ``--json-status`` and the exit summary)."""

    host: str
    port: int | None
    rule: str | None
    count: int


class EgressStats(msgspec.Struct, frozen=True):
    """Counters of one proxy since it started."""

    connections: int
    allowed: int
    denied: int
    dns_answered: int
    dns_refused: int
    bytes_up: int
    bytes_down: int
    audit_failures: int
    denied_destinations: list[DeniedDestination]
    denied_other: int

    def json_status(self) -> dict[str, object]:
        """The ``egress`` object of ``glove exec --json-status``: counts and each denial."""
        return {
            "connections": self.connections,
            "allowed": self.allowed,
            "denied": self.denied,
            "dns_answered": self.dns_answered,
            "dns_refused": self.dns_refused,
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
            "audit_failures": self.audit_failures,
            "denied_destinations": [
                {"host": d.host, "port": d.port, "rule": d.rule, "count": d.count}
                for d in self.denied_destinations
            ],
            "denied_other": self.denied_other,
        }

    def summary(self) -> str | None:
        """One line for ``glove exec``'s exit summary when something was refused, else None."""
        refused = self.denied + self.dns_refused
        if not refused:
            return None
        shown = ", ".join(
            f"{d.host}{'' if d.port is None else f':{d.port}'} x{d.count}"
            for d in self.denied_destinations[:SUMMARY_DESTINATIONS]
        )
        more = (
            len(self.denied_destinations) - SUMMARY_DESTINATIONS + (1 if self.denied_other else 0)
        )
        tail = f" and {more} more" if more > 0 else ""
        return (
            f"egress: {self.denied} connection(s) and {self.dns_refused} DNS lookup(s) refused "
            f"({shown}{tail}); see the audit log or glove network check"
        )


class Refused(Exception):
    """A refusal to reply with: the fixed reason, the rule that decided (if any), its kind.

    ``status`` overrides the HTTP status a kind maps to (a malformed head's 414 or 431).
    """

    def __init__(
        self, reason: str, rule: str | None, kind: RefusalKind, *, status: int | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.rule = rule
        self.kind = kind
        self.status = status


class RefusedInTunnel(Refused):
    """A refusal after the success reply went out (an SNI check): answer with a TLS alert."""


@dataclass(slots=True)
class Exchange:
    """The audit fields of one connection or request, filled in as it proceeds."""

    conn: int
    proto: str
    started: float
    method: str | None = None
    host: str | None = None
    port: int | None = None
    addresses: list[str] = field(default_factory=list)
    rule: str | None = None
    sni: str | None = None


class EgressCore:
    """The decision path shared by the HTTP, SOCKS5 and DNS handlers of one session."""

    def __init__(
        self,
        rules: RuleSet,
        audit: AuditSink,
        *,
        session: str,
        resolver: Resolver | None = None,
        limits: ProxyLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        local_names: frozenset[str] = frozenset(),
    ) -> None:
        """Serve ``rules`` for ``session``, auditing to ``audit``.

        ``local_names`` are the sandbox's own host names: DNS answers them with loopback
        (the sandbox itself), as it does ``localhost``; they never reach a resolver.
        """
        self.rules = rules
        self.local_names = frozenset(normalize_host(name) for name in local_names)
        self.audit = audit
        self.session = session
        self.resolver: Resolver = resolver if resolver is not None else SystemResolver()
        self.limits = limits if limits is not None else ProxyLimits()
        self.clock = clock
        self._next = 0
        self.connections = 0
        self.allowed = 0
        self.denied = 0
        self.dns_answered = 0
        self.dns_refused = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.audit_failures = 0
        self._denied: Counter[tuple[str, int | None, str | None]] = Counter()
        self._denied_other = 0
        self.buffers = BufferPool()
        self._ends: list[dict[str, object]] = []
        self.ends_pending = asyncio.Event()
        """Set when an end record is queued (the actor's flusher waits on it)."""

    def exchange(self, proto: str) -> Exchange:
        """Start the audit fields of a new connection (or DNS query: ``proto`` ``dns``)."""
        self._next += 1
        if proto != "dns":
            self.connections += 1
        return Exchange(self._next, proto, self.clock())

    def stats(self) -> EgressStats:
        """A snapshot of the counters, denied destinations most frequent first."""
        denied = [
            DeniedDestination(host, port, rule, count)
            for (host, port, rule), count in self._denied.most_common()
        ]
        return EgressStats(
            connections=self.connections,
            allowed=self.allowed,
            denied=self.denied,
            dns_answered=self.dns_answered,
            dns_refused=self.dns_refused,
            bytes_up=self.bytes_up,
            bytes_down=self.bytes_down,
            audit_failures=self.audit_failures,
            denied_destinations=denied,
            denied_other=self._denied_other,
        )

    def _count_denied(self, ex: Exchange, rule: str | None) -> None:
        if ex.proto == "dns":
            self.dns_refused += 1
        else:
            self.denied += 1
        key = (ex.host or "?", ex.port, rule)
        if key in self._denied or len(self._denied) < MAX_DENIED_DESTINATIONS:
            self._denied[key] += 1
        else:
            self._denied_other += 1

    def _duration_ms(self, ex: Exchange) -> float:
        return round((self.clock() - ex.started) * 1000.0, 3)

    def _fields(self, ex: Exchange, kind: str) -> dict[str, object]:
        record: dict[str, object] = {
            "kind": kind,
            "session": self.session,
            "conn": ex.conn,
            "proto": ex.proto,
            "method": ex.method,
            "host": ex.host,
            "port": ex.port,
        }
        if ex.sni is not None:
            record["sni"] = ex.sni
        return record

    async def record(self, ex: Exchange, fields: dict[str, object]) -> None:
        """Append one record; wait until it is durable.

        Raises:
            AuditError: the record is not durable (the caller refuses).
        """
        try:
            await self._append(fields)
        except AuditError:
            self.audit_failures += 1
            raise

    async def _append(self, fields: dict[str, object]) -> None:
        """One append under the audit deadline; a sink that overruns it counts as down."""
        try:
            async with asyncio.timeout(self.limits.audit_timeout_s):
                await self.audit.append(fields)
        except TimeoutError as exc:
            raise AuditUnavailable("the audit sink did not answer in time") from exc

    async def record_allow(self, ex: Exchange, reason: str) -> None:
        """The decision record of an allowed connection, before its upstream connect.

        Queued end records of earlier connections are appended at the same moment, so they
        share this record's group commit instead of costing an fdatasync of their own.

        Raises:
            Refused: the audit log did not make it durable (``kind`` ``audit``).
        """
        fields = self._fields(ex, "egress")
        fields.update(addresses=ex.addresses, rule=ex.rule, decision="allow", reason=reason)
        ends, self._ends = self._ends, []
        results = await settle(*(self._append_end(end) for end in ends), self.record(ex, fields))
        failure = results[-1] if isinstance(results[-1], AuditError) else None
        for result in results:
            if isinstance(result, BaseException) and result is not failure:
                raise result
        if failure is not None:
            raise Refused(
                "the audit log is unavailable; nothing was connected", None, "audit"
            ) from failure
        if ex.proto == "dns":
            self.dns_answered += 1
        else:
            self.allowed += 1

    async def record_deny(self, ex: Exchange, refusal: Refused) -> None:
        """The one record of a refused connection or request (a failed append is counted).

        A refusal by the rules, the address check or a malformed request is ``deny`` (and
        counted among the denied destinations); a name that does not resolve or an audit
        log that is unavailable is ``fail``.
        """
        policy = refusal.kind in ("rules", "address", "malformed")
        if policy:
            self._count_denied(ex, refusal.rule)
        elif ex.proto == "dns":
            self.dns_refused += 1
        fields = self._fields(ex, "egress")
        fields.update(
            addresses=ex.addresses,
            rule=refusal.rule,
            decision="deny" if policy else "fail",
            reason=refusal.reason,
            bytes_up=0,
            bytes_down=0,
            duration_ms=self._duration_ms(ex),
        )
        with contextlib.suppress(AuditError):
            await self.record(ex, fields)  # refused either way: fail closed

    async def record_end(
        self,
        ex: Exchange,
        address: str | None,
        up: int,
        down: int,
        outcome: str,
        *,
        reason: str | None = None,
    ) -> None:
        """Queue the closing record of an allowed connection (bytes, duration, outcome).

        ``reason`` (a fixed text) says why the proxy ended it, when it did (a malformed body).

        The connection is over and its decision is already durable, so the end record does
        not hold anything up: it joins the next decision record's group commit, or
        :meth:`flush_ends` (the actor calls it every :data:`END_FLUSH_INTERVAL_S` and when it
        stops), whichever comes first.
        """
        if len(self._ends) >= MAX_PENDING_ENDS:
            await self.flush_ends()
        self.queue_end(ex, address, up, down, outcome, reason=reason)

    def queue_end(
        self,
        ex: Exchange,
        address: str | None,
        up: int,
        down: int,
        outcome: str,
        *,
        reason: str | None = None,
    ) -> None:
        """:meth:`record_end` without waiting: for a connection cancelled as the proxy stops
        (the actor cancels its connections before its last :meth:`flush_ends`)."""
        self.bytes_up += up
        self.bytes_down += down
        fields = self._fields(ex, "egress.end")
        fields.update(
            address=address,
            bytes_up=up,
            bytes_down=down,
            duration_ms=self._duration_ms(ex),
            outcome=outcome,
        )
        if reason is not None:
            fields["reason"] = reason
        self._ends.append(fields)
        self.ends_pending.set()

    async def flush_ends(self) -> None:
        """Append every queued end record (failures are counted, nothing is retried)."""
        ends, self._ends = self._ends, []
        # concurrent: one group commit
        results = await settle(*(self._append_end(end) for end in ends))
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _append_end(self, fields: dict[str, object]) -> None:
        try:
            await self._append(fields)
        except AuditError:
            self.audit_failures += 1

    def destination(self, ex: Exchange, host: str, port: int, *, method: str | None) -> None:
        """Fill the exchange's destination (normalized host, port, method) for its records."""
        try:
            ex.host = normalize_host(host)
        except RuleError:
            ex.host = host[:64]  # what the audit record shows of a malformed host
        ex.port, ex.method = port, method

    def decide(
        self,
        ex: Exchange,
        host: str,
        port: int,
        *,
        method: str | None,
        tunnel: bool,
        body: bool = False,
    ) -> Decision:
        """Fill the exchange's destination and decide it by the rules.

        ``ex.host`` becomes the normalized host: the name the rules judged is the one that
        is resolved, audited and (for plain HTTP) sent as ``Host``.

        Raises:
            Refused: the rules refuse it (``kind`` ``rules``) or the host is malformed.
        """
        self.destination(ex, host, port, method=method)
        decision = self.rules.decide(host, port, method=method, tunnel=tunnel, body=body)
        ex.rule = decision.rule_text
        if not decision.allowed:
            kind: RefusalKind = "rules" if decision.rule is not None or ex.host else "malformed"
            raise Refused(decision.reason, decision.rule_text, kind)
        return decision

    async def addresses(self, ex: Exchange, host: str, port: int | None) -> list[IPAddress]:
        """Resolve ``host`` once and keep the addresses the check passes (in order).

        Raises:
            Refused: the name does not resolve (``resolve``) or no address passes
                (``address``).
        """
        found = fixed_addresses(host)
        if found is None:
            try:
                found = await self.resolver.resolve(host)
            except ResolveFailed as exc:
                if exc.missing:
                    raise Refused("the name does not resolve", ex.rule, "resolve") from exc
                raise Refused("the lookup failed", ex.rule, "lookup") from exc
        check = self.rules.check_addresses(port, found)
        ex.addresses = [str(a) for a in check.allowed[:MAX_CANDIDATES]]
        if not check.allowed:
            rule = check.rule.text if check.rule is not None else ex.rule
            raise Refused(check.refused or "no usable address", rule, "address")
        return list(check.allowed[:MAX_CANDIDATES])

    async def connect(self, addresses: list[IPAddress], port: int) -> tuple[socket.socket, str]:
        """Connect to the first of ``addresses`` that answers, within the connect deadline.

        Raises:
            ConnectFailed: none answered (``why`` says how the last one failed).
        """
        loop = asyncio.get_running_loop()
        why, detail = "error", "no address"
        try:
            async with asyncio.timeout(self.limits.connect_timeout_s):
                for address in addresses:
                    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
                    sock = socket.socket(family, socket.SOCK_STREAM)
                    try:
                        sock.setblocking(False)
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        await loop.sock_connect(sock, (str(address), port))
                    except OSError as exc:
                        sock.close()
                        why = _connect_why(exc)
                        detail = exc.strerror or str(exc)
                        continue
                    except BaseException:
                        sock.close()
                        raise
                    return sock, str(address)
        except TimeoutError as exc:
            raise ConnectFailed("connecting timed out", why="timeout") from exc
        raise ConnectFailed(f"connecting failed: {detail}", why=why)


def _connect_why(exc: OSError) -> str:
    if exc.errno == errno.ECONNREFUSED:
        return "refused"
    if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL):
        return "unreachable"
    if exc.errno == errno.ETIMEDOUT:
        return "timeout"
    return "error"
