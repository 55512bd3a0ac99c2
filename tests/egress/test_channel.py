"""The one descriptor receiver (egress and MCP): every refusal, for every kind, over real
socketpairs.

``ChannelReceiver`` reads the host end of the sandbox's channel for the egress proxy and, as
``glove.mcp.ConnectionReceiver`` (kind ``c`` alone), for ``glove run``'s MCP channel. A
message is one kind byte carrying one descriptor; anything else is closed and counted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager

import pytest

from glove.egress import INET_FAMILIES, UNIX_FAMILIES, ChannelReceiver, Kind
from glove.mcp import ConnectionReceiver

STEP_TIMEOUT_S = 20.0


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


class Taken:
    """What the receiver handed over, by kind, and how many count as live."""

    def __init__(self) -> None:
        self.sockets: list[tuple[bytes, socket.socket]] = []
        self.live = 0

    def __call__(self, kind: bytes, sock: socket.socket) -> None:
        self.sockets.append((kind, sock))

    def close(self) -> None:
        for _, sock in self.sockets:
            sock.close()


def _egress(host_end: socket.socket, taken: Taken, max_live: int) -> ChannelReceiver:
    kinds = {
        b"h": Kind(INET_FAMILIES, taken),
        b"d": Kind(INET_FAMILIES | UNIX_FAMILIES, taken),
        b"c": Kind(UNIX_FAMILIES, taken),
    }
    return ChannelReceiver(host_end, kinds, live=lambda: taken.live, max_live=max_live)


def _mcp(host_end: socket.socket, taken: Taken, max_live: int) -> ChannelReceiver:
    return ConnectionReceiver(
        host_end, lambda sock: taken(b"c", sock), lambda: taken.live, max_connections=max_live
    )


Build = Callable[[socket.socket, Taken, int], ChannelReceiver]
RECEIVERS = pytest.mark.parametrize("build", [_egress, _mcp], ids=["egress", "mcp"])


@asynccontextmanager
async def receiving(
    build: Build, max_live: int = 8
) -> AsyncIterator[tuple[ChannelReceiver, socket.socket, Taken]]:
    """A started receiver on one end of a socketpair; the other end plays the helper."""
    host_end, helper_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    taken = Taken()
    receiver = build(host_end, taken, max_live)
    receiver.start()
    try:
        yield receiver, helper_end, taken
    finally:
        receiver.close()
        helper_end.close()
        taken.close()


async def _settle(receiver: ChannelReceiver, count: int) -> None:
    async with asyncio.timeout(STEP_TIMEOUT_S):
        while receiver.accepted + receiver.refused < count:
            await asyncio.sleep(0.01)


def _socket_of(kind: str, stack: ExitStack) -> socket.socket:
    """A socket of ``kind``: connected streams of either family, and the odd ones."""
    if kind in ("unix-stream", "unix-datagram", "unix-seqpacket"):
        sock_type = {
            "unix-stream": socket.SOCK_STREAM,
            "unix-datagram": socket.SOCK_DGRAM,
            "unix-seqpacket": socket.SOCK_SEQPACKET,
        }[kind]
        left, right = socket.socketpair(socket.AF_UNIX, sock_type)
        stack.enter_context(right)
        return stack.enter_context(left)
    if kind == "tcp":
        server = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        client = stack.enter_context(socket.create_connection(server.getsockname()))
        stack.enter_context(server.accept()[0])
        return client
    if kind == "udp":
        udp = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        udp.connect(("127.0.0.1", 9))
        return udp
    odd = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    if kind == "unix-listener":
        odd.bind("")  # an autobound abstract name
        odd.listen(1)
    return odd


@RECEIVERS
async def test_a_connected_stream_of_its_kind_is_handed_over_and_works(build: Build) -> None:
    """A Unix stream sent as ``c`` arrives as a working socket owned by the callback."""
    async with receiving(build) as (receiver, helper_end, taken):
        agent_side, guest_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with agent_side, guest_side:
            socket.send_fds(helper_end, [b"c"], [guest_side.fileno()])
            await _settle(receiver, 1)
            assert (receiver.accepted, receiver.refused) == (1, 0)
            agent_side.sendall(b"ping")
            kind, sock = taken.sockets[0]
            assert (kind, sock.recv(4)) == (b"c", b"ping")


@RECEIVERS
async def test_a_pipe_is_refused_and_closed(build: Build, caplog: pytest.LogCaptureFixture) -> None:
    """A descriptor that is not a socket is closed on arrival, logged, never handed over."""
    caplog.set_level(logging.WARNING)
    async with receiving(build) as (receiver, helper_end, taken):
        read_fd, write_fd = os.pipe()
        try:
            socket.send_fds(helper_end, [b"c"], [read_fd])
            os.close(read_fd)
            await _settle(receiver, 1)
            assert (receiver.accepted, receiver.refused) == (0, 1)
            assert taken.sockets == []
            with pytest.raises(BrokenPipeError):  # the receiver kept no copy of the read end
                os.write(write_fd, b"x")
        finally:
            os.close(write_fd)
    assert "not a connected Unix stream socket" in caplog.text


@RECEIVERS
@pytest.mark.parametrize(
    "kind", ["unix-datagram", "unix-seqpacket", "tcp", "udp", "unix-listener", "unix-unconnected"]
)
async def test_a_socket_the_kind_does_not_accept_is_refused(build: Build, kind: str) -> None:
    """Kind ``c`` takes only a connected AF_UNIX stream: not datagrams, TCP or listeners."""
    async with receiving(build) as (receiver, helper_end, taken):
        before = _open_fds()
        with ExitStack() as stack:
            socket.send_fds(helper_end, [b"c"], [_socket_of(kind, stack).fileno()])
            await _settle(receiver, 1)
        assert (receiver.accepted, receiver.refused) == (0, 1)
        assert taken.sockets == []
        assert _open_fds() <= before


@pytest.mark.parametrize(
    ("kind_byte", "sock_kind", "accepted"),
    [
        (b"h", "tcp", True),
        (b"h", "unix-stream", False),  # the HTTP listener is TCP: a Unix socket is a lie
        (b"h", "udp", False),
        (b"d", "unix-stream", True),  # a relayed UDP query travels in a socketpair
        (b"d", "tcp", True),
        (b"d", "unix-datagram", False),
    ],
)
async def test_each_kind_accepts_only_its_families(
    kind_byte: bytes, sock_kind: str, accepted: bool
) -> None:
    """The families a kind accepts are checked on the descriptor itself, not believed."""
    async with receiving(_egress) as (receiver, helper_end, taken):
        before = _open_fds()
        with ExitStack() as stack:
            socket.send_fds(helper_end, [kind_byte], [_socket_of(sock_kind, stack).fileno()])
            await _settle(receiver, 1)
            assert (receiver.accepted, receiver.refused) == (int(accepted), int(not accepted))
            assert [kind for kind, _ in taken.sockets] == ([kind_byte] if accepted else [])
            taken.close()
            taken.sockets.clear()
        assert _open_fds() <= before


@RECEIVERS
async def test_malformed_messages_are_refused_without_leaking(build: Build) -> None:
    """Two descriptors in one message (MSG_CTRUNC), none, an unknown kind byte, a
    NUL byte with one: each refused, nothing leaks, receiving goes on."""
    async with receiving(build) as (receiver, helper_end, taken):
        before = _open_fds()
        pairs = [socket.socketpair() for _ in range(2)]
        try:
            fds = [pairs[0][0].fileno(), pairs[1][0].fileno()]
            socket.send_fds(helper_end, [b"c"], fds)  # cut: only one fd fits
            helper_end.sendall(b"c")  # no descriptor at all
            socket.send_fds(helper_end, [b"x"], fds[:1])  # nobody registered x
            socket.send_fds(helper_end, [b"\0"], fds[:1])
            await _settle(receiver, 4)
            assert (receiver.accepted, receiver.refused) == (0, 4)
            socket.send_fds(helper_end, [b"c"], [pairs[1][0].fileno()])  # still receiving
            await _settle(receiver, 5)
        finally:
            for left, right in pairs:
                left.close()
                right.close()
        assert (receiver.accepted, receiver.refused) == (1, 4)
        taken.close()
        taken.sockets.clear()
        assert _open_fds() <= before


@RECEIVERS
async def test_a_flood_of_refusals_is_counted_and_logged_boundedly(
    build: Build, caplog: pytest.LogCaptureFixture
) -> None:
    """A hostile helper cannot flood the host's log: past the bound refusals are counted."""
    caplog.set_level(logging.WARNING)
    async with receiving(build) as (receiver, helper_end, _):
        for _ in range(40):
            helper_end.sendall(b"c")
        await _settle(receiver, 40)
        assert receiver.refused == 40
    assert 0 < caplog.text.count("refused") <= 16


@RECEIVERS
async def test_connections_beyond_the_cap_are_closed(build: Build) -> None:
    """With the live count at the cap, a new connection is closed; its peer sees EOF."""
    async with receiving(build, max_live=2) as (receiver, helper_end, taken):
        taken.live = 2
        agent_side, guest_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with agent_side, guest_side:
            socket.send_fds(helper_end, [b"c"], [guest_side.fileno()])
            guest_side.close()
            await _settle(receiver, 1)
            assert (receiver.accepted, receiver.refused) == (0, 1)
            assert agent_side.recv(1) == b""


@RECEIVERS
async def test_end_of_file_stops_receiving(build: Build) -> None:
    """When the helper's end closes, the receiver closes its end and says so."""
    async with receiving(build) as (receiver, helper_end, _):
        helper_end.close()
        async with asyncio.timeout(STEP_TIMEOUT_S):
            await receiver.closed.wait()
