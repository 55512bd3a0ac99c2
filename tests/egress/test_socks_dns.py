"""The proxy's SOCKS5 and DNS paths, and the channel's refusals, over real sockets."""

from __future__ import annotations

import asyncio
import os
import socket
import struct

import pytest

from glove.egress import encode_query, parse_answer
from glove.egress._dns import RCODE_NXDOMAIN, TYPE_A, TYPE_AAAA, frame

from ._servers import upstream
from .conftest import Handover, ListSink, serving, until

STEP_S = 10.0


def _socks_request(host: str, port: int, command: int = 1) -> bytes:
    name = host.encode()
    return bytes((5, command, 0, 3, len(name))) + name + struct.pack(">H", port)


async def _socks(
    handover: Handover, request: bytes
) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await handover.open(b"s")
    writer.write(b"\x05\x01\x00")
    async with asyncio.timeout(STEP_S):
        assert await reader.readexactly(2) == b"\x05\x00"
        writer.write(request)
        reply = await reader.readexactly(10)
    return reply, reader, writer


async def test_socks5_connect_with_remote_resolution(handover: Handover) -> None:
    """A domain-name CONNECT is resolved by the proxy and tunnelled; the reply hides its address."""
    async with (
        upstream("echo") as up,
        serving(handover, [f"ssh.test:{up.port}", f"127.0.0.1:{up.port}"]) as (_, sink),
    ):
        reply, reader, writer = await _socks(handover, _socks_request("ssh.test", up.port))
        assert reply == b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00"
        writer.write(b"SSH-2.0-test\r\n")
        async with asyncio.timeout(STEP_S):
            assert await reader.readexactly(14) == b"SSH-2.0-test\r\n"
        writer.close()
        await until(lambda: len(sink.records) == 2)
    assert sink.records[0]["proto"] == "socks5"
    assert sink.records[0]["host"] == "ssh.test"
    assert sink.records[1]["bytes_up"] == 14


@pytest.mark.parametrize(
    ("request_bytes", "code", "reason"),
    [
        (_socks_request("evil.test", 22), 2, "no rule allows this host and port"),
        (_socks_request("missing.example.org", 22), 4, "the name does not resolve"),
        (_socks_request("ssh.test", 22, command=2), 7, "only CONNECT is served"),
        (_socks_request("ssh.test", 22, command=3), 7, "only CONNECT is served"),
        (b"\x05\x01\x00\x09\x00\x00", 8, "address type 9"),
    ],
)
async def test_socks5_refusals_use_the_rfc_codes_and_are_audited(
    handover: Handover, request_bytes: bytes, code: int, reason: str
) -> None:
    """Refusals are RFC 1928 replies; every one is an audit record."""
    async with serving(handover, ["ssh.test:22", "missing.example.org:22"]) as (_, sink):
        reply, _, writer = await _socks(handover, request_bytes)
        writer.close()
    assert reply[:2] == bytes((5, code))
    assert reason in str(sink.records[0]["reason"])


async def test_socks5_without_no_auth_is_refused(handover: Handover) -> None:
    """A client offering only username/password gets 0xFF and a deny record."""
    async with serving(handover, ["ssh.test:22"]) as (_, sink):
        reader, writer = await handover.open(b"s")
        writer.write(b"\x05\x01\x02")
        async with asyncio.timeout(STEP_S):
            assert await reader.read() == b"\x05\xff"
        writer.close()
    assert "no acceptable method" in str(sink.records[0]["reason"])


async def _dns(
    handover: Handover, name: str, qtype: int, *, unix: bool
) -> tuple[int, tuple[object, ...]]:
    if unix:  # the shape the helper uses for a UDP query: a socketpair end
        ours, theirs = socket.socketpair()
        with theirs:
            socket.send_fds(handover.guest_end, [b"d"], [theirs.fileno()])
        reader, writer = await asyncio.open_connection(sock=ours)
    else:
        reader, writer = await handover.open(b"d")
    writer.write(frame(encode_query(0x4242, name, qtype)))
    async with asyncio.timeout(STEP_S):
        length = int.from_bytes(await reader.readexactly(2), "big")
        answer = parse_answer(await reader.readexactly(length))
    writer.close()
    assert answer.id == 0x4242
    return answer.rcode, tuple(str(a) for a in answer.addresses)


class SpyResolver:
    """A resolver that records every name it is asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def resolve(self, name: str) -> list[object]:
        """Answer one public and one private address; remember the name."""
        import ipaddress

        self.asked.append(name)
        return [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("10.0.0.7"),
                ipaddress.ip_address("2606:4700::1111")]  # fmt: skip


@pytest.mark.parametrize("unix", [True, False])
async def test_dns_answers_allowed_names_only_and_never_looks_up_others(
    handover: Handover, unix: bool
) -> None:
    """Allowed: the public addresses; refused: NXDOMAIN without any lookup."""
    spy = SpyResolver()
    async with serving(handover, ["pypi.example.org"]) as (proxy, sink):
        proxy.core.resolver = spy
        assert await _dns(handover, "PyPI.example.org", TYPE_A, unix=unix) == (
            0,
            ("93.184.216.34",),
        )
        assert await _dns(handover, "pypi.example.org", TYPE_AAAA, unix=unix) == (
            0,
            ("2606:4700::1111",),
        )
        assert await _dns(handover, "exfil-data.evil.test", TYPE_A, unix=unix) == (
            RCODE_NXDOMAIN,
            (),
        )
        assert await _dns(handover, "pypi.example.org", 16, unix=unix) == (0, ())  # TXT: NODATA
    assert spy.asked == ["pypi.example.org", "pypi.example.org", "pypi.example.org"]
    decisions = [(r["method"], r["host"], r["decision"]) for r in sink.records]
    assert decisions == [
        ("A", "pypi.example.org", "allow"),
        ("AAAA", "pypi.example.org", "allow"),
        ("A", "exfil-data.evil.test", "deny"),
        ("TYPE16", "pypi.example.org", "allow"),
    ]
    assert proxy.stats.dns_answered == 3
    assert proxy.stats.dns_refused == 1


async def test_dns_refuses_names_that_only_resolve_to_unlisted_private_addresses(
    handover: Handover,
) -> None:
    """A rebinding answer (loopback only) is NXDOMAIN unless the address is listed."""
    async with serving(handover, ["web.test"]):
        assert await _dns(handover, "web.test", TYPE_A, unix=True) == (RCODE_NXDOMAIN, ())
    listed = Handover()
    try:
        async with serving(listed, ["web.test", "127.0.0.1:8080"]):
            assert await _dns(listed, "web.test", TYPE_A, unix=True) == (0, ("127.0.0.1",))
    finally:
        listed.close()


async def test_dns_malformed_query_gets_formerr_and_the_stream_survives(handover: Handover) -> None:
    """A garbage query is FORMERR; the next query on the same stream is answered."""
    async with serving(handover, ["web.test", "127.0.0.1"]) as (_, sink):
        reader, writer = await handover.open(b"d")
        writer.write(
            frame(b"\x12\x34\x01\x00\x00\x05") + frame(encode_query(1, "web.test", TYPE_A))
        )
        async with asyncio.timeout(STEP_S):
            first = parse_answer(
                await reader.readexactly(int.from_bytes(await reader.readexactly(2), "big"))
            )
            second = parse_answer(
                await reader.readexactly(int.from_bytes(await reader.readexactly(2), "big"))
            )
        writer.close()
    assert (first.id, first.rcode) == (0x1234, 1)
    assert (second.rcode, second.addresses[0].compressed) == (0, "127.0.0.1")
    assert sink.records[0]["decision"] == "deny"


async def _settle(handover: Handover, proxy: object, count: int) -> None:
    receiver = proxy.receiver  # type: ignore[attr-defined]
    await until(lambda: receiver.accepted + receiver.refused >= count)


async def test_the_channel_refuses_wrong_descriptors(handover: Handover) -> None:
    """Unknown kinds, pipes, listening or unconnected sockets, Unix sockets as HTTP: closed."""
    async with serving(handover, ["web.test"]) as (proxy, _):
        read_fd, write_fd = os.pipe()
        unconnected = socket.socket()
        listening = socket.create_server(("127.0.0.1", 0))
        left, right = socket.socketpair()
        try:
            socket.send_fds(handover.guest_end, [b"h"], [read_fd])
            socket.send_fds(handover.guest_end, [b"h"], [unconnected.fileno()])
            socket.send_fds(handover.guest_end, [b"s"], [listening.fileno()])
            socket.send_fds(handover.guest_end, [b"h"], [right.fileno()])  # AF_UNIX as HTTP
            socket.send_fds(handover.guest_end, [b"x"], [right.fileno()])  # unknown kind
            handover.guest_end.send(b"h")  # no descriptor at all
            await _settle(handover, proxy, 6)
            assert (proxy.receiver.accepted, proxy.receiver.refused) == (0, 6)  # type: ignore[union-attr]
            os.close(read_fd)
            with pytest.raises(BrokenPipeError):  # the proxy kept no copy of the read end
                os.write(write_fd, b"x")
        finally:
            os.close(write_fd)
            for sock in (unconnected, listening, left, right):
                sock.close()
        assert proxy.state == "running"


async def test_other_kinds_on_the_same_channel_go_to_their_owner(handover: Handover) -> None:
    """With other_kinds, an MCP connection (kind c) reaches its callback, not the proxy."""
    from glove.actors import running
    from glove.egress import EgressProxy, Kind, RuleSet
    from glove.egress._channel import UNIX_FAMILIES

    taken: list[socket.socket] = []
    proxy = EgressProxy(
        handover.host_end,
        RuleSet.load(["web.test"]),
        ListSink(),
        session="s",
        other_kinds={b"c": Kind(UNIX_FAMILIES, lambda _kind, sock: taken.append(sock))},
    )
    async with running(proxy):
        ours, theirs = socket.socketpair()
        with ours, theirs:
            socket.send_fds(handover.guest_end, [b"c"], [theirs.fileno()])
            await until(lambda: bool(taken))
            taken[0].sendall(b"mcp")
            assert ours.recv(3) == b"mcp"
            taken[0].close()
    with pytest.raises(ValueError, match="the proxy's own"):
        EgressProxy(handover.host_end, RuleSet(), ListSink(), session="s",
                    other_kinds={b"h": Kind(UNIX_FAMILIES, lambda _k, s: None)})  # fmt: skip
