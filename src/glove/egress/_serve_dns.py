"""The DNS stub's queries: answered on the host, for allowed names only.

A ``d`` stream carries DNS messages in DNS-over-TCP framing: a TCP client of the stub's
``127.0.0.1:53``, or a socketpair on which the helper relays one UDP query. Each query is
one audit record (``proto: dns``, ``method`` the question type) and one answer:

* a name no allow rule names, a deny rule that covers it on every port, or a malformed
  name: NXDOMAIN, and the proxy never asks any resolver about it;
* an allowed name: the proxy resolves it (the same lookup and the same address check as a
  connection, port aside) and answers with the addresses that pass (NODATA for another
  question type or family); a name whose addresses are all refused is NXDOMAIN; a lookup
  that fails is SERVFAIL, as is an allowed answer the audit log could not record;
* ``localhost``, its subdomains (RFC 6761) and the sandbox's own host name (``glove``):
  the loopback address, which inside the sandbox is the sandbox itself.
"""

from __future__ import annotations

import asyncio
import socket

from glove.egress._addresses import IPAddress
from glove.egress._admission import EgressCore, Exchange, PeerGone, Refused, recv_some, send_all
from glove.egress._dns import (
    CLASS_IN,
    OPCODE_QUERY,
    RCODE_NOTIMP,
    RCODE_NXDOMAIN,
    RCODE_SERVFAIL,
    TYPE_A,
    TYPE_AAAA,
    DnsFrameReader,
    DnsQuery,
    encode_answer,
    encode_error,
    encode_formerr,
    frame,
    message_id,
    parse_query,
)
from glove.egress._rules import LOCALHOST, LOCALHOST_ADDRESSES, normalize_name
from glove.egress.errors import DnsMessageError, RuleError

#: Bytes read per receive on a DNS stream.
DNS_READ_BYTES = 4096 + 2


async def serve_dns(core: EgressCore, stream: socket.socket) -> None:
    """Answer every query on one DNS stream until it ends or idles."""
    reader = DnsFrameReader()
    loop = asyncio.get_running_loop()
    while True:
        deadline = loop.time() + core.limits.dns_idle_timeout_s
        try:
            messages = reader.feed(await recv_some(stream, deadline, DNS_READ_BYTES))
        except (PeerGone, TimeoutError, OSError, DnsMessageError):
            return
        for message in messages:
            answer = await answer_query(core, message)
            try:
                await send_all(stream, frame(answer), core.limits.reply_timeout_s)
            except (OSError, TimeoutError):
                return


async def answer_query(  # noqa: PLR0911 - one answer per outcome, in precedence order
    core: EgressCore, message: bytes
) -> bytes:
    """The answer to one DNS query (never raises for the sandbox's input)."""
    ex = core.exchange("dns")
    try:
        query = parse_query(message)
    except DnsMessageError as exc:
        await core.record_deny(ex, Refused(f"malformed DNS query: {exc}", None, "malformed"))
        ident = message_id(message)
        return encode_formerr(ident or 0)
    ex.method = query.type_name
    name = _judged_name(query.name)
    ex.host = name or query.name or "?"
    if query.opcode != OPCODE_QUERY:
        await core.record_deny(ex, Refused("only standard queries", None, "malformed"))
        return encode_error(query, RCODE_NOTIMP)
    if name is not None and _is_local(core, name):
        loopback = [a for a in LOCALHOST_ADDRESSES if a is not None]
        return await _answered(
            core,
            ex,
            query=query,
            addresses=loopback,
            reason="the name is the sandbox itself",
            rule=None,
        )
    if name is None or query.qclass != CLASS_IN:
        return await _refused(core, ex, query, Refused("not a host name", None, "malformed"))
    decision = core.rules.decide_name(name)
    ex.rule = decision.rule_text
    if not decision.allowed:
        return await _refused(core, ex, query, Refused(decision.reason, ex.rule, "rules"))
    try:
        addresses = await core.addresses(ex, name, None)
    except Refused as refusal:
        return await _refused(core, ex, query, refusal)
    return await _answered(
        core, ex, query=query, addresses=addresses, reason=decision.reason, rule=ex.rule
    )


def _judged_name(name: str | None) -> str | None:
    """The name as the rules normalize it, or None when it is not a host name.

    The one spelling the local check, the rules, the resolver and the audit record all see.
    """
    if name is None:
        return None
    try:
        return normalize_name(name)
    except RuleError:
        return None


def _is_local(core: EgressCore, name: str) -> bool:
    """``localhost``, its subdomains, and the sandbox's own host name(s)."""
    return name == LOCALHOST or name.endswith(".localhost") or name in core.local_names


async def _answered(
    core: EgressCore,
    ex: Exchange,
    *,
    query: DnsQuery,
    addresses: list[IPAddress],
    reason: str,
    rule: str | None,
) -> bytes:
    wanted = 4 if query.qtype == TYPE_A else 6 if query.qtype == TYPE_AAAA else 0
    ex.addresses = [str(a) for a in addresses if a.version == wanted]
    ex.rule = rule
    try:
        await core.record_allow(ex, reason)
    except Refused:
        core.dns_refused += 1
        return encode_error(query, RCODE_SERVFAIL)  # no audit, no answer
    return encode_answer(query, addresses)


async def _refused(core: EgressCore, ex: Exchange, query: DnsQuery, refusal: Refused) -> bytes:
    await core.record_deny(ex, refusal)
    rcode = RCODE_SERVFAIL if refusal.kind == "lookup" else RCODE_NXDOMAIN
    return encode_error(query, rcode)
