"""The proxy forwards exactly what it judged: HTTP smuggling, CONNECT, SOCKS5 and DNS.

Every attack of ``_attacks.py`` goes through the real proxy actor (a real channel, real
sockets) to a real origin on loopback that logs every byte and reads pipelined requests
whatever ``Connection`` says (``_logging_origin.py``): the origin receives exactly the
judged request, or the proxy refuses with the status and reason of the row, audits the
refusal, and nothing complete reaches the origin. The same table runs through
``glove exec`` as root and as the unprivileged user in ``test_wired_smuggling.py``.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from glove.egress import Resolver, encode_query, parse_answer
from glove.egress._addresses import IPAddress
from glove.egress._dns import RCODE_FORMERR, RCODE_NOERROR, RCODE_NXDOMAIN, TYPE_A, frame
from glove.egress._http import CONNECT_ESTABLISHED
from tests._ast import parse as parse_source

from ._attack_client import attack as send_attack
from ._attacks import ATTACKS, Attack, check_origin, check_records, check_reply, rules
from ._logging_origin import logging_origin
from ._servers import upstream
from .conftest import Handover, ListSink, serving, until

STEP_S = 30.0


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
async def test_the_origin_receives_exactly_the_judged_request(
    handover: Handover, attack: Attack
) -> None:
    """One attack row: exactly the judged request reaches the origin, or a refusal with its
    reason reaches the sandbox and the audit log and nothing reaches the origin."""
    with logging_origin() as origin:
        async with serving(handover, rules(origin.port)) as (proxy, sink):
            client = handover.hand(b"h")
            with client:
                reply = await asyncio.to_thread(
                    send_attack,
                    client,
                    attack.render(origin.port),
                    expect_continue=attack.expect_continue,
                )
            await until(lambda: proxy.live_connections == 0)
        connections = await asyncio.to_thread(origin.wait_ended, origin.accepted)
    check_reply(attack, origin.port, reply)
    check_origin(attack, origin.port, connections)
    decisions = [r for r in sink.records if r["kind"] == "egress"]
    ends = [r for r in sink.records if r["kind"] == "egress.end"]
    assert len(decisions) == 1, sink.records
    check_records(attack, origin.port, decisions[0], ends[0] if ends else None)
    if attack.judged is not None:
        assert ends[0]["bytes_up"] == len(connections[0].raw)  # what was counted arrived
    else:
        assert origin.accepted == 0


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (b"5\nworld\r\n0\r\n\r\n", "does not end in CRLF"),
        (b"0\r\nContent-Length: 40\r\n\r\n", "a trailer field that frames"),
        (b"0\r\nX-Ok: 1\r\nHost: evil.test\r\n\r\n", "a trailer field that frames"),
    ],
)
async def test_a_body_that_breaks_later_never_completes_at_the_origin(
    handover: Handover, tail: bytes, reason: str
) -> None:
    """A chunk line or trailer that turns bad after the upload began: the origin gets no
    complete request (nothing of the bad line, no end of body), the sandbox a 400, and the
    end record says why."""
    with logging_origin() as origin:
        async with serving(handover, rules(origin.port)) as (proxy, sink):
            client = handover.hand(b"h")
            with client:
                client.sendall(
                    f"POST http://pypi.test:{origin.port}/a/late HTTP/1.1\r\n".encode()
                    + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
                )
                # The head and the first chunk are at the origin before the rest is sent.
                await until(lambda: origin.accepted == 1)
                await until(lambda: bool(proxy.stats.allowed))
                reply = await asyncio.to_thread(send_attack, client, [tail], expect_continue=False)
            await until(lambda: proxy.live_connections == 0)
        (seen,) = await asyncio.to_thread(origin.wait_ended, 1)
    assert seen.requests == []
    assert seen.error is not None
    assert seen.raw.endswith(b"\r\n\r\n5\r\nhello\r\n")  # nothing of the bad part went on
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert reason.encode() in reply
    (end,) = [r for r in sink.records if r["kind"] == "egress.end"]
    assert end["outcome"] == "malformed-body"
    assert reason in str(end["reason"])


async def test_connect_early_data_waits_for_the_decision_and_never_follows_a_refusal(
    handover: Handover,
) -> None:
    """Bytes sent right after a CONNECT head reach the upstream only once the decision is
    durable; after a refused CONNECT to the same upstream they reach nothing."""
    gate = asyncio.Event()
    sink = ListSink(gate=gate)
    async with upstream("echo") as up, serving(handover, [f"127.0.0.1:{up.port}"], sink=sink):
        reader, writer = await handover.open()
        writer.write(f"CONNECT 127.0.0.1:{up.port} HTTP/1.1\r\n\r\nEARLY".encode())
        await writer.drain()
        async with asyncio.timeout(STEP_S):
            await sink.appending.wait()  # the decision is being made durable
        assert up.accepted == 0
        gate.set()
        async with asyncio.timeout(STEP_S):
            assert await reader.readuntil(b"\r\n\r\n") == CONNECT_ESTABLISHED
            assert await reader.readexactly(5) == b"EARLY"
        writer.close()
        refused_reader, refused_writer = await handover.open()
        refused_writer.write(
            f"CONNECT 127.0.0.1:{up.port} HTTP/1.1\r\nContent-Length: 5\r\n\r\nEARLY".encode()
        )
        async with asyncio.timeout(STEP_S):
            assert (await refused_reader.read()).startswith(b"HTTP/1.1 400")
        refused_writer.close()
    assert up.accepted == 1
    assert up.received == [b"EARLY"]
    assert [r["decision"] for r in sink.records if r["kind"] == "egress"] == ["allow", "deny"]


async def test_socks5_early_data_waits_for_the_decision_and_never_follows_a_refusal(
    handover: Handover,
) -> None:
    """A SOCKS5 client that sends greeting, request and data at once: the data reaches the
    upstream after the success reply; after a refused request (BIND) to the same upstream,
    nothing reaches it."""
    async with upstream("echo") as up, serving(handover, [f"127.0.0.1:{up.port}"]) as (_, sink):
        address = b"\x01\x7f\x00\x00\x01" + up.port.to_bytes(2, "big")
        reader, writer = await handover.open(b"s")
        writer.write(b"\x05\x01\x00" + b"\x05\x01\x00" + address + b"EARLY")
        async with asyncio.timeout(STEP_S):
            assert await reader.readexactly(2) == b"\x05\x00"
            assert (await reader.readexactly(10))[1] == 0
            assert await reader.readexactly(5) == b"EARLY"
        writer.close()
        reader, writer = await handover.open(b"s")
        writer.write(b"\x05\x01\x00" + b"\x05\x02\x00" + address + b"EARLY")
        async with asyncio.timeout(STEP_S):
            assert await reader.readexactly(2) == b"\x05\x00"
            assert (await reader.readexactly(10))[1] == 7  # command not supported
        writer.close()
        await until(lambda: len([r for r in sink.records if r["kind"] == "egress"]) == 2)
    assert up.accepted == 1
    assert up.received == [b"EARLY"]
    assert [r["decision"] for r in sink.records if r["kind"] == "egress"] == ["allow", "deny"]


class _Recording:
    """A resolver that remembers every name it was asked for."""

    def __init__(self, inner: Resolver) -> None:
        self.inner = inner
        self.asked: list[str] = []

    async def resolve(self, name: str) -> list[IPAddress]:
        self.asked.append(name)
        return await self.inner.resolve(name)


def _dns_over_stream(handover: Handover, message: bytes) -> bytes:
    client = handover.hand(b"d")
    with client:
        client.settimeout(STEP_S)
        client.sendall(frame(message))
        length = int.from_bytes(client.recv(2), "big")
        answer = b""
        while len(answer) < length:
            answer += client.recv(length - len(answer))
    return answer


QUERY = encode_query(7, "web.test", TYPE_A)
OPT = b"\x00" + (41).to_bytes(2) + (1232).to_bytes(2) + bytes(4) + bytes(2)


def _with_counts(query: bytes, *, qd: int = 1, ar: int = 0) -> bytes:
    return query[:4] + qd.to_bytes(2) + query[6:10] + ar.to_bytes(2) + query[12:]


@pytest.mark.parametrize(
    ("name", "message", "rcode"),
    [
        ("two questions", _with_counts(QUERY + QUERY[12:], qd=2), RCODE_FORMERR),
        ("a byte after the question", QUERY + b"\x00", RCODE_FORMERR),
        ("a refused name after the question", QUERY + QUERY[12:], RCODE_FORMERR),
        ("an OPT record, then a byte", _with_counts(QUERY + OPT + b"\x00", ar=1), RCODE_FORMERR),
        ("a truncated OPT record", _with_counts(QUERY + OPT[:-1], ar=1), RCODE_FORMERR),
        ("a compression loop", QUERY[:12] + b"\xc0\x0c" + QUERY[-4:], RCODE_FORMERR),
        ("a label holding a dot", QUERY[:12] + b"\x08web.test\x00" + QUERY[-4:], RCODE_NXDOMAIN),
        ("an OPT record", _with_counts(QUERY + OPT, ar=1), RCODE_NOERROR),
        ("upper case", encode_query(7, "WEB.Test", TYPE_A), RCODE_NOERROR),
    ],
)
async def test_a_dns_query_means_only_the_name_that_was_judged(
    handover: Handover, name: str, message: bytes, rcode: int
) -> None:
    """Queries that could mean more than their one judged name (more questions, bytes after
    the records, loops, a dot inside a label) are FORMERR or NXDOMAIN and never resolved;
    a well-formed one, any case, is answered for the name the rules judged."""
    names = {"web.test": ["93.184.216.34"]}  # public, so the check passes; never connected to
    async with serving(handover, ["web.test"], names=names) as (proxy, sink):
        recording = _Recording(proxy.core.resolver)
        proxy.core.resolver = recording
        answer = parse_answer(await asyncio.to_thread(_dns_over_stream, handover, message))
    assert answer.rcode == rcode, name
    (record,) = sink.records
    if rcode == RCODE_NOERROR:
        assert [str(a) for a in answer.addresses] == ["93.184.216.34"]
        assert recording.asked == ["web.test"]
        assert record["host"] == "web.test"
    else:
        assert recording.asked == []
        assert record["decision"] == "deny"


def test_the_attack_client_is_stdlib_only() -> None:
    """The client runs inside the sandbox with the system python: it imports the stdlib only."""
    import ast
    from pathlib import Path

    tree = parse_source(Path(__file__).with_name("_attack_client.py").read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= {"__future__", "base64", "json", "socket", "sys"}
    assert socket.socket  # the module under test speaks raw sockets
