"""The ``glove run`` channel: the host's receiver and ``glove-relay``, over real socketpairs.

``glove-relay`` is the in-sandbox helper (``glove.egress.helper``) started under that name,
as the guest directory holds it; the refusals of the one descriptor receiver are tested for
every kind in ``tests/egress/test_channel.py``."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

import pytest

from glove.actors import ChildSpec, Supervisor
from glove.mcp import relay as relay_module
from glove.mcp import shim
from glove.mcp._channel import (
    MAX_AGENT_CONNECTIONS,
    AgentChannel,
    ConnectionReceiver,
    GuestSetup,
    guest_env,
    prepare_guest_dir,
)
from glove.mcp._config import load_config
from glove.mcp._service import build_mediation

from .conftest import sdk_server, write_config

SYSTEM_PYTHON = "/usr/bin/python3"
#: A user and network namespace of its own, so the relay's abstract name is private to it.
OWN_NETNS = ("unshare", "--user", "--map-root-user", "--net")
STEP_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def relay_script() -> Iterator[str]:
    """``glove-relay`` as the guest directory holds it (the helper under the relay's name)."""
    private = prepare_guest_dir()
    try:
        yield str(private / "glove-relay")
    finally:
        shutil.rmtree(private)


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


class Received:
    """What a receiver under test handed over, and how many connections count as live."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.live = 0
        self.arrived = asyncio.Event()

    def __call__(self, sock: socket.socket) -> None:
        self.sockets.append(sock)
        self.arrived.set()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


@asynccontextmanager
async def receiving(
    **kwargs: int,
) -> AsyncIterator[tuple[ConnectionReceiver, socket.socket, Received]]:
    """A started receiver on one end of a socketpair; the other end plays the relay."""
    host_end, relay_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    received = Received()
    receiver = ConnectionReceiver(host_end, received, lambda: received.live, **kwargs)
    receiver.start()
    try:
        yield receiver, relay_end, received
    finally:
        receiver.close()
        relay_end.close()
        received.close()


async def _settle(receiver: ConnectionReceiver, count: int) -> None:
    """Wait until the receiver has judged ``count`` messages."""
    async with asyncio.timeout(STEP_TIMEOUT_S):
        while receiver.accepted + receiver.refused < count:
            await asyncio.sleep(0.01)


async def test_a_connected_unix_stream_is_handed_over_and_works() -> None:
    """A connection sent by the relay arrives as a working socket owned by the callback."""
    async with receiving() as (receiver, relay_end, received):
        agent_side, guest_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with agent_side, guest_side:
            socket.send_fds(relay_end, [b"c"], [guest_side.fileno()])
            await _settle(receiver, 1)
            assert (receiver.accepted, receiver.refused) == (1, 0)
            agent_side.sendall(b"ping")
            assert received.sockets[0].recv(4) == b"ping"


async def test_a_pipe_sent_over_the_channel_is_refused_and_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A descriptor that is not a socket is closed on arrival, logged, never handed over."""
    caplog.set_level(logging.WARNING, logger="glove.mcp._channel")
    async with receiving() as (receiver, relay_end, received):
        read_fd, write_fd = os.pipe()
        try:
            socket.send_fds(relay_end, [b"c"], [read_fd])
            os.close(read_fd)
            await _settle(receiver, 1)
            assert (receiver.accepted, receiver.refused) == (0, 1)
            assert received.sockets == []
            with pytest.raises(BrokenPipeError):  # the receiver kept no copy of the read end
                os.write(write_fd, b"x")
        finally:
            os.close(write_fd)
    assert "not a connected Unix stream socket" in caplog.text


def _odd_socket(kind: str, stack: ExitStack) -> socket.socket:
    """A socket the relay never sends: connected but not a Unix stream, or never connected."""
    if kind in ("unix-datagram", "unix-seqpacket"):
        sock_type = socket.SOCK_DGRAM if kind == "unix-datagram" else socket.SOCK_SEQPACKET
        left, right = socket.socketpair(socket.AF_UNIX, sock_type)
        stack.enter_context(right)
        return stack.enter_context(left)
    if kind == "tcp":
        server = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        client = stack.enter_context(socket.create_connection(server.getsockname()))
        stack.enter_context(server.accept()[0])
        return client
    odd = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    if kind == "unix-listener":
        odd.bind("")  # an autobound abstract name
        odd.listen(1)
    return odd


@pytest.mark.parametrize(
    "kind", ["unix-datagram", "unix-seqpacket", "tcp", "unix-listener", "unix-unconnected"]
)
async def test_a_socket_of_the_wrong_kind_is_refused(kind: str) -> None:
    """Only a connected AF_UNIX stream socket is served: not datagrams, TCP or listeners."""
    async with receiving() as (receiver, relay_end, received):
        before = _open_fds()
        with ExitStack() as stack:
            socket.send_fds(relay_end, [b"c"], [_odd_socket(kind, stack).fileno()])
            await _settle(receiver, 1)
        assert (receiver.accepted, receiver.refused) == (0, 1)
        assert received.sockets == []
        assert _open_fds() <= before


async def test_truncated_or_fdless_messages_are_refused_without_leaking() -> None:
    """Two descriptors in one message (MSG_CTRUNC), or none, are refused; nothing leaks."""
    async with receiving() as (receiver, relay_end, received):
        before = _open_fds()
        pairs = [socket.socketpair() for _ in range(2)]
        try:
            socket.send_fds(relay_end, [b"c"], [pairs[0][0].fileno(), pairs[1][0].fileno()])
            relay_end.sendall(b"c")
            socket.send_fds(relay_end, [b"x"], [pairs[0][0].fileno()])
            await _settle(receiver, 3)
        finally:
            for left, right in pairs:
                left.close()
                right.close()
        assert (receiver.accepted, receiver.refused) == (0, 3)
        assert received.sockets == []
        assert _open_fds() <= before


async def test_connections_beyond_the_cap_are_closed() -> None:
    """With the live count at the cap, a new connection is closed, its peer sees EOF."""
    async with receiving(max_connections=2) as (receiver, relay_end, received):
        received.live = 2
        agent_side, guest_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with agent_side, guest_side:
            socket.send_fds(relay_end, [b"c"], [guest_side.fileno()])
            guest_side.close()
            await _settle(receiver, 1)
            assert (receiver.accepted, receiver.refused) == (0, 1)
            assert agent_side.recv(1) == b""
    assert MAX_AGENT_CONNECTIONS >= 1


async def test_end_of_file_on_the_channel_stops_receiving() -> None:
    """When the relay's end closes, the receiver closes its end and reports it."""
    async with receiving() as (receiver, relay_end, _):
        relay_end.close()
        async with asyncio.timeout(STEP_TIMEOUT_S):
            await receiver.closed.wait()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
}


async def test_the_agent_channel_serves_relayed_connections_and_leaks_nothing(
    tmp_path: Path,
) -> None:
    """Connections sent on the channel are mediated; stopping the tree closes every one."""
    config = load_config(
        write_config(tmp_path, {"echo": {"command": sdk_server("echo")}}, "version = 1\n")
    )
    agents: list[socket.socket] = []
    before = _open_fds()
    host_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    mediation = build_mediation(config)
    channel = AgentChannel(host_end, mediation)
    tree = Supervisor(
        "session-t",
        [ChildSpec("mcp", lambda: mediation.supervisor), ChildSpec("channel", lambda: channel)],
        strategy="one_for_all",
        intensity=0,
    )
    task = asyncio.get_running_loop().create_task(tree.run())
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            await mediation.ready.wait()
            # A wait on a start: the mediation is ready once its kernel has started.
            assert mediation.ready is mediation.supervisor.child("kernel").started
            await channel.started.wait()
        with guest_end:
            for _ in range(2):
                agent, guest = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                agents.append(agent)
                with guest:
                    socket.send_fds(guest_end, [b"c"], [guest.fileno()])
        for agent in agents:
            agent.setblocking(False)
            await loop.sock_sendall(agent, json.dumps(INITIALIZE).encode() + b"\n")
            async with asyncio.timeout(STEP_TIMEOUT_S):
                line = await loop.sock_recv(agent, 64 * 1024)
            assert json.loads(line)["result"]["serverInfo"]["name"]
    finally:
        tree.stop()
        await asyncio.wait({task})
    for agent in agents:
        with agent:
            async with asyncio.timeout(STEP_TIMEOUT_S):
                assert await loop.sock_recv(agent, 1) == b""  # the host closed its end
    assert _open_fds() <= before


def test_guest_setup_wraps_the_agent_in_the_relay() -> None:
    """The sandbox runs the relay with the channel's number, then the agent's argv as given."""
    setup = GuestSetup(bind_dir="/tmp/x", env=guest_env(), pass_fds={3: 9})
    assert setup.command(["agent", "--flag"]) == (
        "/opt/glove/glove-relay",
        "3",
        "--",
        "agent",
        "--flag",
    )
    assert setup.env["GLOVE_MCP_SOCKET"] == "@glove-mcp"
    assert shim.address(setup.env["GLOVE_MCP_SOCKET"]) == "\0glove-mcp"
    assert shim.address("/run/x.sock") == "/run/x.sock"


async def _start_relay(*command: str, relay: str, channel: int) -> asyncio.subprocess.Process:
    """Start glove-relay on descriptor ``channel`` in a network namespace of its own."""
    return await asyncio.create_subprocess_exec(
        *OWN_NETNS,
        SYSTEM_PYTHON,
        relay,
        str(channel),
        "--",
        *command,
        pass_fds=(channel,) if channel > 2 else (),
        stdin=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def _run_relay(*command: str, relay: str, channel: int) -> tuple[int, bytes]:
    """Run glove-relay to the end; return its status and stderr."""
    proc = await _start_relay(*command, relay=relay, channel=channel)
    _, err = await asyncio.wait_for(proc.communicate(), STEP_TIMEOUT_S)
    assert proc.returncode is not None
    return proc.returncode, err


async def test_relay_hands_the_agents_connection_to_the_host(relay_script: str) -> None:
    """A client inside connects to @glove-mcp; the host receives that very connection."""
    client = (
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0glove-mcp'); "
        "s.sendall(b'hello'); assert s.recv(5) == b'world'"
    )
    host_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    received = Received()
    receiver = ConnectionReceiver(host_end, received, lambda: 0)
    receiver.start()
    with guest_end:
        proc = await _start_relay(
            SYSTEM_PYTHON, "-c", client, relay=relay_script, channel=guest_end.fileno()
        )
    relay = asyncio.ensure_future(proc.communicate())
    try:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            await received.arrived.wait()
        conn = received.sockets[0]
        conn.setblocking(False)
        loop = asyncio.get_running_loop()
        assert await loop.sock_recv(conn, 5) == b"hello"
        await loop.sock_sendall(conn, b"world")
        _, err = await asyncio.wait_for(relay, STEP_TIMEOUT_S)
        assert proc.returncode == 0, err.decode()
        async with asyncio.timeout(STEP_TIMEOUT_S):
            await receiver.closed.wait()  # the relay exited: EOF on the channel
    finally:
        receiver.close()
        received.close()


async def test_relay_keeps_the_channel_and_listener_from_the_agent(relay_script: str) -> None:
    """The agent started by the relay holds only stdio: no channel, no listener."""
    host_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with host_end, guest_end:
        code, err = await _run_relay(
            SYSTEM_PYTHON,
            "-c",
            "import os, sys; sys.exit(len(os.listdir('/proc/self/fd')))",
            relay=relay_script,
            channel=guest_end.fileno(),
        )
    # 0, 1, 2 and the listing's own descriptor.
    assert code == 4, err.decode()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (("/bin/sh", "-c", "exit 7"), 7),
        (("/bin/sh", "-c", "kill -TERM $$"), 128 + signal.SIGTERM),
        (("/nonexistent/agent",), relay_module.EXIT_CANNOT_RUN),
    ],
    ids=["exit-code", "killed-by-signal", "cannot-run"],
)
async def test_relay_exits_with_the_agents_status(
    command: tuple[str, ...], expected: int, relay_script: str
) -> None:
    """The relay's status is the agent's: its code, 128 + a killing signal, 127 if unrunnable."""
    host_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with host_end, guest_end:
        code, _ = await _run_relay(*command, relay=relay_script, channel=guest_end.fileno())
    assert code == expected


async def test_relay_refuses_a_channel_that_is_not_a_socket(relay_script: str) -> None:
    """Started without its socket (descriptor 0 here is /dev/null), the relay runs nothing."""
    code, err = await _run_relay("/bin/sh", "-c", "exit 0", relay=relay_script, channel=0)
    assert code == relay_module.EXIT_SETUP_FAILED
    assert b"not the host channel" in err


async def test_relay_forwards_a_termination_signal_to_the_agent(relay_script: str) -> None:
    """SIGTERM sent to the relay (as the sandbox's init forwards it) reaches the agent."""
    agent = 'trap "exit 5" TERM; echo ready; while :; do sleep 0.05; done'
    host_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with host_end, guest_end:
        proc = await asyncio.create_subprocess_exec(
            *OWN_NETNS,
            SYSTEM_PYTHON,
            relay_script,
            str(guest_end.fileno()),
            "--",
            "/bin/sh",
            "-c",
            agent,
            pass_fds=(guest_end.fileno(),),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), STEP_TIMEOUT_S)
        assert line == b"ready\n"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), STEP_TIMEOUT_S) == 5


async def test_relay_serves_mcp_alone_and_leaves_the_environment(relay_script: str) -> None:
    """Under the relay's name the helper binds no network listener (in a namespace whose
    loopback is down, binding 127.0.0.1 would fail and the relay exit 125) and adds no
    proxy variable: the agent's environment is the one it was given."""
    agent = "import os, sys; sys.exit(3 if any('proxy' in k.lower() for k in os.environ) else 0)"
    host_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with host_end, guest_end:
        code, err = await _run_relay(
            SYSTEM_PYTHON, "-c", agent, relay=relay_script, channel=guest_end.fileno()
        )
    assert code == 0, err.decode()


async def test_relay_usage_errors_name_the_relay(relay_script: str) -> None:
    """A bad relay command line is refused with exit 125 and the relay's own usage."""
    proc = await asyncio.create_subprocess_exec(
        SYSTEM_PYTHON, relay_script, "3", "agent", stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), STEP_TIMEOUT_S)
    assert proc.returncode == relay_module.EXIT_SETUP_FAILED
    assert err.startswith(b"glove-relay: usage: glove-relay FD -- AGENT")
