"""The proxy actor over a real channel: HTTP, CONNECT, the SNI check, audit ordering, refusals."""

from __future__ import annotations

import asyncio
import ssl

import msgspec
import pytest

from glove.egress import GetStats, ProxyLimits

from ._servers import upstream
from .conftest import Handover, ListSink, LocalCA, serving, until

STEP_S = 10.0


async def _exchange(handover: Handover, request: bytes, kind: bytes = b"h") -> bytes:
    reader, writer = await handover.open(kind)
    writer.write(request)
    await writer.drain()
    async with asyncio.timeout(STEP_S):
        reply = await reader.read()
    writer.close()
    return reply


async def test_an_allowed_get_reaches_the_origin_and_is_audited(handover: Handover) -> None:
    """GET through the proxy works; a decision record and an end record with byte counts."""
    async with (
        upstream("http") as up,
        serving(handover, [f"web.test:{up.port}", f"127.0.0.1:{up.port}"]) as (proxy, sink),
    ):
        reply = await _exchange(
            handover,
            f"GET http://web.test:{up.port}/x?y HTTP/1.1\r\nHost: web.test\r\n\r\n".encode(),
        )
        assert reply.startswith(b"HTTP/1.1 200 OK")
        assert reply.endswith(b"upstream saw GET /x?y HTTP/1.1 body=")
        await until(lambda: len(sink.records) == 2)
        assert sink.kinds() == [("egress", "allow"), ("egress.end", None)]
        decision, end = sink.records
        assert decision["session"] == "test-session"
        assert (decision["method"], decision["host"], decision["port"]) == (
            "GET",
            "web.test",
            up.port,
        )
        assert decision["addresses"] == ["127.0.0.1"]
        assert decision["rule"] == f"allow web.test:{up.port}"
        assert end["conn"] == decision["conn"]
        assert end["address"] == "127.0.0.1"
        assert end["bytes_up"] == len(up.received[0])
        assert end["bytes_down"] == len(reply)
        assert isinstance(end["duration_ms"], float)
        stats = await proxy.ask(GetStats())
        assert (stats.connections, stats.allowed, stats.denied) == (1, 1, 0)


async def test_a_denied_request_gets_403_naming_the_rule_and_never_connects(
    handover: Handover,
) -> None:
    """A deny rule answers 403 with the rule in X-Glove-Egress and in the body; no upstream."""
    async with (
        upstream("http") as up,
        serving(handover, ["*.evil.test:1-65535", "evil.test:1-65535"], ["evil.test"]) as (
            proxy,
            sink,
        ),
    ):
        reply = await _exchange(
            handover, f"GET http://evil.test:{up.port}/ HTTP/1.1\r\n\r\n".encode()
        )
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 Forbidden")
    assert b'X-Glove-Egress: denied; rule="deny evil.test"' in head
    expected = f"glove egress: GET evil.test:{up.port} refused: denied by rule 'deny evil.test'\n"
    assert body == expected.encode()
    assert up.accepted == 0
    (record,) = sink.records
    assert (record["decision"], record["rule"], record["bytes_up"]) == ("deny", "deny evil.test", 0)
    stats = proxy.stats
    assert [(d.host, d.port, d.rule, d.count) for d in stats.denied_destinations] == [
        ("evil.test", up.port, "deny evil.test", 1)
    ]
    status = stats.json_status()
    assert status["denied_destinations"] == [
        {"host": "evil.test", "port": up.port, "rule": "deny evil.test", "count": 1}
    ]
    msgspec.json.encode(status)  # what --json-status will carry
    assert stats.summary() == (
        f"egress: 1 connection(s) and 0 DNS lookup(s) refused (evil.test:{up.port} x1); "
        "see the audit log or glove network check"
    )


async def test_end_records_are_written_when_the_proxy_stops(handover: Handover) -> None:
    """An end record still queued for its group commit is appended when the proxy stops."""
    async with upstream("echo") as up:
        async with serving(handover, [f"127.0.0.1:{up.port}"]) as (proxy, sink):
            reader, writer = await handover.open()
            writer.write(f"CONNECT 127.0.0.1:{up.port} HTTP/1.1\r\n\r\n".encode())
            async with asyncio.timeout(STEP_S):
                await reader.readuntil(b"\r\n\r\n")
            writer.close()
            await until(lambda: proxy.live_connections == 0)
        assert proxy.stats.summary() is None
    assert sink.kinds() == [("egress", "allow"), ("egress.end", None)]


async def test_a_connection_open_when_the_proxy_stops_gets_its_end_record(
    handover: Handover,
) -> None:
    """A tunnel still open as the proxy stops (its session ends) is recorded as ``stopped``."""
    async with upstream("echo") as up:
        async with serving(handover, [f"127.0.0.1:{up.port}"]) as (proxy, sink):
            reader, writer = await handover.open()
            writer.write(f"CONNECT 127.0.0.1:{up.port} HTTP/1.1\r\n\r\n".encode())
            async with asyncio.timeout(STEP_S):
                await reader.readuntil(b"\r\n\r\n")
            assert proxy.live_connections == 1
        writer.close()
    ends = [r for r in sink.records if r["kind"] == "egress.end"]
    assert [(r["outcome"], r["port"]) for r in ends] == [("stopped", up.port)]


async def test_the_decision_is_durable_before_the_upstream_connect(handover: Handover) -> None:
    """While the audit append is pending the origin sees nothing; after it, the request."""
    gate = asyncio.Event()
    sink = ListSink(gate=gate)
    async with (
        upstream("http") as up,
        serving(handover, [f"web.test:{up.port}", f"127.0.0.1:{up.port}"], sink=sink),
    ):
        reader, writer = await handover.open()
        writer.write(f"GET http://web.test:{up.port}/ HTTP/1.1\r\n\r\n".encode())
        await asyncio.sleep(0.3)
        assert up.accepted == 0
        assert sink.records == []
        gate.set()
        async with asyncio.timeout(STEP_S):
            reply = await reader.read()
        writer.close()
    assert reply.startswith(b"HTTP/1.1 200")
    assert up.accepted == 1


async def test_no_audit_no_connection(handover: Handover) -> None:
    """An audit log that fails gets 503 and the origin is never contacted."""
    sink = ListSink(fail=True)
    async with (
        upstream("http") as up,
        serving(handover, [f"127.0.0.1:{up.port}"], sink=sink) as (proxy, _),
    ):
        reply = await _exchange(
            handover, f"GET http://127.0.0.1:{up.port}/ HTTP/1.1\r\n\r\n".encode()
        )
        assert reply.startswith(b"HTTP/1.1 503")
        assert b"the audit log is unavailable; nothing was connected" in reply
        assert up.accepted == 0
        assert proxy.stats.audit_failures == 2  # the decision, then the refusal's own record


async def test_a_name_resolving_to_loopback_is_refused_unless_the_address_is_listed(
    handover: Handover,
) -> None:
    """web.test resolves to 127.0.0.1: refused with the class named, allowed once listed."""
    async with upstream("http") as up:
        async with serving(handover, [f"web.test:{up.port}"]) as (_, sink):
            reply = await _exchange(
                handover, f"GET http://web.test:{up.port}/ HTTP/1.1\r\n\r\n".encode()
            )
        assert reply.startswith(b"HTTP/1.1 403")
        assert b"the name resolves to a loopback address that no rule lists" in reply
        assert (
            sink.records[0]["reason"]
            == "the name resolves to a loopback address that no rule lists"
        )
        assert up.accepted == 0


async def test_host_header_and_hop_by_hop_headers_are_rewritten(handover: Handover) -> None:
    """The origin sees origin-form, Host = the checked authority, no proxy headers, close."""
    async with upstream("http") as up, serving(handover, [f"127.0.0.1:{up.port}"]):
        await _exchange(
            handover,
            f"GET http://127.0.0.1:{up.port}/p HTTP/1.1\r\nHost: evil.test\r\n"
            "Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n\r\n".encode(),
        )
    assert up.received == [
        f"GET /p HTTP/1.1\r\nHost: 127.0.0.1:{up.port}\r\nConnection: close\r\n\r\n".encode()
    ]


async def test_bytes_after_the_declared_body_are_never_forwarded(handover: Handover) -> None:
    """A request smuggled after a Content-Length body stays in the proxy."""
    async with (
        upstream("http") as up,
        serving(handover, [f"127.0.0.1:{up.port}", "evil.test"]),
    ):
        reply = await _exchange(
            handover,
            f"POST http://127.0.0.1:{up.port}/ HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
            "DELETE http://127.0.0.1/ HTTP/1.1\r\n\r\n".encode(),
        )
    assert reply.endswith(b"body=hello")
    (received,) = up.received
    assert received.endswith(b"\r\n\r\nhello")
    assert b"DELETE" not in received


async def test_a_chunked_body_is_forwarded_to_its_end(handover: Handover) -> None:
    """Chunked uploads pass verbatim up to the last chunk; what follows does not."""
    body = b"5\r\nhello\r\n0\r\n\r\n"
    async with upstream("http") as up, serving(handover, [f"127.0.0.1:{up.port}"]):
        await _exchange(
            handover,
            f"POST http://127.0.0.1:{up.port}/ HTTP/1.1\r\n".encode()
            + b"Transfer-Encoding: chunked\r\n\r\n"
            + body
            + b"EXTRA",
        )
    assert up.received[0].endswith(body)


async def test_read_only_rules_refuse_writes_and_tunnels(handover: Handover) -> None:
    """A read-only rule: POST and CONNECT get 403 naming it; GET passes."""
    async with upstream("http") as up, serving(handover, [f"127.0.0.1:{up.port}+read-only"]):
        post = await _exchange(
            handover, f"POST http://127.0.0.1:{up.port}/ HTTP/1.1\r\n\r\n".encode()
        )
        tunnel = await _exchange(handover, f"CONNECT 127.0.0.1:{up.port} HTTP/1.1\r\n\r\n".encode())
        get = await _exchange(
            handover, f"GET http://127.0.0.1:{up.port}/ HTTP/1.1\r\n\r\n".encode()
        )
    assert post.startswith(b"HTTP/1.1 403")
    assert f'rule="allow 127.0.0.1:{up.port}+read-only"'.encode() in post
    assert b"read-only: method refused" in post
    assert tunnel.startswith(b"HTTP/1.1 403")
    assert b"tunnels are refused" in tunnel
    assert get.startswith(b"HTTP/1.1 200")
    assert up.accepted == 1


@pytest.mark.parametrize(
    ("request_bytes", "status", "reason"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", 400, b"not a proxy request"),
        (b"GET http://web.test/ HTTP/1.1\r\nA : b\r\n\r\n", 400, b"whitespace before the colon"),
        (b"GET https://web.test/ HTTP/1.1\r\n\r\n", 400, b"use CONNECT"),
        (b"GET http://" + b"a" * 9000 + b"/ HTTP/1.1\r\n\r\n", 414, b"longer than"),
        (b"\x16\x03\x01\x00\x05hello", 400, b"bad method"),
    ],
)
async def test_malformed_requests_get_a_clear_status_and_a_record(
    handover: Handover, request_bytes: bytes, status: int, reason: bytes
) -> None:
    """Malformed input ends its connection with a typed reply; the proxy keeps running."""
    async with serving(handover, ["web.test"]) as (proxy, sink):
        reply = await _exchange(handover, request_bytes)
        assert reply.startswith(b"HTTP/1.1 %d" % status)
        assert reason in reply
        assert sink.records[0]["decision"] == "deny"
        assert proxy.state == "running"


async def test_a_slow_head_times_out(handover: Handover) -> None:
    """A client that never finishes its head is answered 400 after the head deadline."""
    async with serving(handover, ["web.test"], limits=ProxyLimits(head_timeout_s=0.3)) as (_, sink):
        reader, writer = await handover.open()
        writer.write(b"GET http://web.test/ HTTP/1.1\r\n")
        async with asyncio.timeout(STEP_S):
            reply = await reader.read()
        writer.close()
    assert reply.startswith(b"HTTP/1.1 400")
    assert sink.records[0]["reason"] == "no complete request before the deadline"


async def test_connect_tunnels_bytes_both_ways(handover: Handover) -> None:
    """CONNECT answers 200 and copies; the end record counts both directions."""
    async with upstream("echo") as up, serving(handover, [f"127.0.0.1:{up.port}"]) as (_, sink):
        reader, writer = await handover.open()
        writer.write(f"CONNECT 127.0.0.1:{up.port} HTTP/1.1\r\n\r\nearly".encode())
        async with asyncio.timeout(STEP_S):
            assert (
                await reader.readuntil(b"\r\n\r\n")
                == b"HTTP/1.1 200 Connection established\r\n\r\n"
            )
            assert await reader.readexactly(5) == b"early"
            writer.write(b"x" * 100000)
            assert await reader.readexactly(100000) == b"x" * 100000
        writer.close()
        await until(lambda: len(sink.records) == 2)
    end = sink.records[-1]
    assert (end["kind"], end["bytes_up"], end["bytes_down"]) == ("egress.end", 100005, 100005)


async def _tls_through_connect(
    handover: Handover, port: int, connect_host: str, sni: str, test_ca: LocalCA
) -> bytes:
    reader, writer = await handover.open()
    writer.write(f"CONNECT {connect_host}:{port} HTTP/1.1\r\n\r\n".encode())
    async with asyncio.timeout(STEP_S):
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        await writer.start_tls(test_ca.client_context(), server_hostname=sni)
        writer.write(b"ping\n")
        line = await reader.readline()
    writer.close()
    return line


async def test_sni_check_passes_a_matching_hello(handover: Handover, test_ca: LocalCA) -> None:
    """With +sni, a real TLS client whose SNI is the CONNECT host gets through."""
    async with (
        upstream("tls-line", tls=test_ca.server_context()) as up,
        serving(handover, [f"git.test:{up.port}+sni", f"127.0.0.1:{up.port}"]) as (_, sink),
    ):
        line = await _tls_through_connect(handover, up.port, "git.test", "git.test", test_ca)
    assert line == b"tls says ping\n"
    assert sink.records[0]["sni"] == "git.test"


async def test_sni_check_refuses_a_different_name(handover: Handover, test_ca: LocalCA) -> None:
    """CONNECT git.test with SNI other.test: a TLS alert, a deny record, no upstream."""
    async with (
        upstream("tls-line", tls=test_ca.server_context()) as up,
        serving(
            handover, [f"git.test:{up.port}+sni", f"other.test:{up.port}", f"127.0.0.1:{up.port}"]
        ) as (_, sink),
    ):
        with pytest.raises(ssl.SSLError, match="ACCESS_DENIED"):
            await _tls_through_connect(handover, up.port, "git.test", "other.test", test_ca)
        assert up.accepted == 0
    (record,) = sink.records
    assert record["decision"] == "deny"
    assert record["reason"] == "the TLS server name does not match the requested host"
    assert (record["sni"], record["rule"]) == ("other.test", f"allow git.test:{up.port}+sni")


async def test_without_the_check_a_different_sni_passes(
    handover: Handover, test_ca: LocalCA
) -> None:
    """The SNI is only read when a rule asks: the control for the test above."""
    async with (
        upstream("tls-line", tls=test_ca.server_context()) as up,
        serving(handover, [f"git.test:{up.port}", f"127.0.0.1:{up.port}"]),
    ):
        line = await _tls_through_connect(handover, up.port, "git.test", "other.test", test_ca)
    assert line == b"tls says ping\n"


async def test_a_refused_upstream_gets_502(handover: Handover) -> None:
    """A checked address that refuses the connect is a 502 and an end record saying so."""
    async with upstream("http") as up:
        port = up.port
    async with serving(handover, [f"127.0.0.1:{port}"]) as (_, sink):
        reply = await _exchange(handover, f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n".encode())
        await until(lambda: len(sink.records) == 2)
    assert reply.startswith(b"HTTP/1.1 502")
    assert b"(refused)" in reply
    assert sink.records[-1]["outcome"] == "connect-refused"


async def test_idle_tunnels_end(handover: Handover) -> None:
    """A tunnel with no byte either way for the idle timeout is closed."""
    async with (
        upstream("echo") as up,
        serving(handover, [f"127.0.0.1:{up.port}"], limits=ProxyLimits(idle_timeout_s=0.3)) as (
            _,
            sink,
        ),
    ):
        reader, writer = await handover.open()
        writer.write(f"CONNECT 127.0.0.1:{up.port} HTTP/1.1\r\n\r\n".encode())
        async with asyncio.timeout(STEP_S):
            await reader.readuntil(b"\r\n\r\n")
            assert await reader.read() == b""
        writer.close()
        await until(lambda: len(sink.records) == 2)
    assert sink.records[-1]["outcome"] == "idle"


async def test_connections_beyond_the_limit_are_closed_on_arrival(handover: Handover) -> None:
    """With max_connections=1, a second live connection is closed without a reply."""
    async with (
        upstream("echo") as up,
        serving(handover, [f"127.0.0.1:{up.port}"], limits=ProxyLimits(max_connections=1)) as (
            proxy,
            _,
        ),
    ):
        reader, writer = await handover.open()
        writer.write(f"CONNECT 127.0.0.1:{up.port} HTTP/1.1\r\n\r\n".encode())
        async with asyncio.timeout(STEP_S):
            await reader.readuntil(b"\r\n\r\n")
        assert proxy.live_connections == 1
        second = await _exchange(handover, b"GET http://web.test/ HTTP/1.1\r\n\r\n")
        assert second == b""
        assert proxy.receiver is not None
        assert proxy.receiver.refused == 1
        writer.close()


async def test_stopping_the_proxy_closes_the_channel(handover: Handover) -> None:
    """The helper's end sees EOF when the proxy stops: its listeners then close."""
    async with serving(handover, ["web.test"]):
        pass
    handover.guest_end.settimeout(STEP_S)
    assert handover.guest_end.recv(1) == b""


async def test_an_audit_sink_that_hangs_is_a_refusal_not_a_hang(handover: Handover) -> None:
    """A sink that never answers: after the audit deadline, 503 and no upstream connection."""
    sink = ListSink(gate=asyncio.Event())  # never opened
    limits = ProxyLimits(audit_timeout_s=0.3)
    async with (
        upstream("http") as up,
        serving(handover, [f"127.0.0.1:{up.port}"], sink=sink, limits=limits),
    ):
        reply = await _exchange(
            handover, f"GET http://127.0.0.1:{up.port}/ HTTP/1.1\r\n\r\n".encode()
        )
    assert reply.startswith(b"HTTP/1.1 503")
    assert up.accepted == 0
