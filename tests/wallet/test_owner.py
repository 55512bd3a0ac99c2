"""The synthetic owner on a real socketpair: construction checks, serving, every close."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from glove.actors import running
from glove.protocol import HEADER_BYTES, encode_frame
from glove.testing.wallet import (
    Adversary,
    FakeClock,
    OfflineWorld,
    RealClock,
    answer_late,
    fail_read,
)
from glove.wallet import (
    MAX_FRAME_BYTES,
    Authorities,
    CloseReason,
    EndpointCheckFailed,
    GuestEndpointTaken,
    OwnerLifetimeError,
    StatusChannelError,
    StatusOutcome,
    StatusProcessor,
    SyntheticOwner,
    WalletDisabled,
    contracted,
    encode_request,
    open_socketpair,
)
from tests.conftest import Unpriv

REQUEST_DEADLINE_S = 0.3
WAIT_S = 5.0


def make_owner(
    world: OfflineWorld, authorities: Authorities | None = None, **kw: Any
) -> SyntheticOwner:
    """An enabled owner over ``authorities`` (the world's, contracted, by default)."""
    processor = StatusProcessor(
        world.binding(), authorities or contracted(world.authorities()), clock=world.clock
    )
    kw.setdefault("request_deadline_s", REQUEST_DEADLINE_S)
    return SyntheticOwner(processor, enabled=True, **kw)


@contextlib.asynccontextmanager
async def serving(owner: SyntheticOwner) -> AsyncIterator[socket.socket]:
    """Run the owner's worker and yield the guest end (closed afterwards)."""
    async with running(owner.worker):
        guest = owner.take_guest_endpoint()
        try:
            yield guest
        finally:
            guest.close()


async def send(guest: socket.socket, payload: bytes) -> None:
    """Send one framed payload from the guest end."""
    frame = encode_frame(payload, max_frame_bytes=MAX_FRAME_BYTES)
    await asyncio.get_running_loop().sock_sendall(guest, frame)


async def recv_exact(guest: socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes (or fewer at EOF) within the test's wait bound."""
    loop = asyncio.get_running_loop()
    data = b""
    async with asyncio.timeout(WAIT_S):
        while len(data) < size:
            chunk = await loop.sock_recv(guest, size - len(data))
            if not chunk:
                break
            data += chunk
    return data


async def reply(guest: socket.socket) -> dict[str, Any]:
    """Read one framed response from the guest end."""
    header = await recv_exact(guest, HEADER_BYTES)
    assert len(header) == HEADER_BYTES, header
    body = await recv_exact(guest, int.from_bytes(header, "big"))
    decoded: dict[str, Any] = json.loads(body)
    return decoded


async def at_eof(guest: socket.socket) -> bool:
    """True when the host end closed with nothing more to read."""
    try:
        return await recv_exact(guest, 1) == b""
    except ConnectionResetError:
        return True


def fd_count() -> int:
    """Descriptors open in this process."""
    return len(os.listdir("/proc/self/fd"))


# -- construction --------------------------------------------------------------------------------


def test_disabled_by_default_and_creates_nothing(processor: StatusProcessor) -> None:
    """Without enabled=True construction is refused before any descriptor is created."""
    before = fd_count()
    with pytest.raises(WalletDisabled):
        SyntheticOwner(processor)
    assert fd_count() == before


def test_real_pair_passes_every_check(processor: StatusProcessor) -> None:
    """The default pair: unnamed AF_UNIX stream, non-blocking, close-on-exec, our uid."""
    owner = SyntheticOwner(processor, enabled=True)
    guest = owner.take_guest_endpoint()
    try:
        for sock in (guest, owner.worker._endpoints.host):
            assert sock is not None
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN) == socket.AF_UNIX
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM
            assert fcntl.fcntl(sock.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK
            assert fcntl.fcntl(sock.fileno(), fcntl.F_GETFD) & fcntl.FD_CLOEXEC
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            assert int.from_bytes(creds[4:8], sys.byteorder) == os.getuid()
    finally:
        guest.close()
        asyncio.run(owner.destroy())
    assert not owner.endpoints_open


def _dgram() -> tuple[socket.socket, socket.socket]:
    flags = socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
    return socket.socketpair(socket.AF_UNIX, flags)


def _seqpacket() -> tuple[socket.socket, socket.socket]:
    flags = socket.SOCK_SEQPACKET | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
    return socket.socketpair(socket.AF_UNIX, flags)


def _blocking() -> tuple[socket.socket, socket.socket]:
    host, guest = open_socketpair()
    guest.setblocking(True)
    return host, guest


def _inheritable() -> tuple[socket.socket, socket.socket]:
    host, guest = open_socketpair()
    os.set_inheritable(host.fileno(), True)
    return host, guest


def _tcp_loopback() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    for sock in (client, accepted):
        sock.setblocking(False)
    return accepted, client


def _named_unix() -> tuple[socket.socket, socket.socket]:
    path = Path(tempfile.mkdtemp(prefix="wallet-named-")) / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(path))
        accepted, _ = server.accept()
    path.unlink()
    path.parent.rmdir()
    for sock in (client, accepted):
        sock.setblocking(False)
    return accepted, client


@pytest.mark.parametrize(
    ("factory", "check"),
    [
        (_dgram, "type"),
        (_seqpacket, "type"),
        (_tcp_loopback, "family"),
        (_named_unix, "unnamed"),
        (_blocking, "nonblocking"),
        (_inheritable, "cloexec"),
    ],
)
def test_each_construction_check_refuses_and_closes_both_ends(
    processor: StatusProcessor,
    factory: Callable[[], tuple[socket.socket, socket.socket]],
    check: str,
) -> None:
    """A pair failing one check is refused by that check and both ends are closed."""
    made: list[socket.socket] = []

    def recording() -> tuple[socket.socket, socket.socket]:
        pair = factory()
        made.extend(pair)
        return pair

    with pytest.raises(EndpointCheckFailed) as caught:
        SyntheticOwner(processor, enabled=True, socketpair_factory=recording)
    assert caught.value.check == check
    assert [sock.fileno() for sock in made] == [-1, -1]


def test_creator_uid_must_be_the_owner(world: OfflineWorld) -> None:
    """An owner uid other than the creating process's is refused, nothing left open."""
    world.owner_uid = os.geteuid() + 1  # the binding agrees: only the creator check refuses
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    before = fd_count()
    with pytest.raises(EndpointCheckFailed) as caught:
        SyntheticOwner(processor, enabled=True, owner_uid=os.geteuid() + 1)
    assert caught.value.check == "creator_uid"
    assert "created by uid" in str(caught.value)
    assert fd_count() == before


def test_binding_owner_must_be_the_creator(world: OfflineWorld) -> None:
    """A session bound to another uid cannot be served by this process's owner."""
    world.owner_uid = os.getuid() + 1
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    with pytest.raises(EndpointCheckFailed) as caught:
        SyntheticOwner(processor, enabled=True)
    assert caught.value.check == "creator_uid"
    assert "the session is bound to uid" in str(caught.value)


_FOREIGN_PAIR = """
import array, socket, sys
parent = socket.socket(fileno=int(sys.argv[1]))
flags = socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
a, b = socket.socketpair(socket.AF_UNIX, flags)
fds = array.array("i", [a.fileno(), b.fileno()])
parent.sendmsg([b"p"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
"""


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to create a pair as another uid")
def test_pair_created_by_another_uid_is_refused_by_so_peercred(
    processor: StatusProcessor, unpriv: Unpriv
) -> None:
    """A pair the test user created (passed over SCM_RIGHTS) fails the peer-uid check."""

    def foreign() -> tuple[socket.socket, socket.socket]:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            subprocess.run(
                ["/usr/bin/python3", "-c", _FOREIGN_PAIR, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                check=True,
                timeout=30,
                user=unpriv.uid,
                group=unpriv.gid,
                extra_groups=[],
            )
            _msg, fds, _flags, _addr = socket.recv_fds(ours, 1, 2)
        host, guest = (socket.socket(fileno=fd) for fd in fds)
        for sock in (host, guest):
            sock.setblocking(False)
            sock.set_inheritable(False)  # recv_fds ignores MSG_CMSG_CLOEXEC on 3.11
        creds = host.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        assert int.from_bytes(creds[4:8], sys.byteorder) == unpriv.uid
        return host, guest

    with pytest.raises(EndpointCheckFailed) as caught:
        SyntheticOwner(processor, enabled=True, socketpair_factory=foreign)
    assert caught.value.check == "peer_uid"


# -- the guest end ---------------------------------------------------------------------------------


async def test_guest_end_is_transferred_exactly_once(world: OfflineWorld) -> None:
    """The guest end can be taken once; a second take is refused."""
    owner = make_owner(world)
    guest = owner.take_guest_endpoint()
    try:
        with pytest.raises(GuestEndpointTaken, match="already transferred"):
            owner.take_guest_endpoint()
    finally:
        guest.close()
        await owner.destroy()


async def test_transferred_guest_end_stays_close_on_exec(world: OfflineWorld) -> None:
    """A child started without closing descriptors does not inherit the guest end."""
    owner = make_owner(world)
    guest = owner.take_guest_endpoint()
    try:
        assert fcntl.fcntl(guest.fileno(), fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import os, sys; os.fstat(int(sys.argv[1]))",
            str(guest.fileno()),
            close_fds=False,
            stderr=subprocess.PIPE,
        )
        _out, err = await child.communicate()
        assert child.returncode != 0
        assert b"Bad file descriptor" in err
    finally:
        guest.close()
        await owner.destroy()


async def test_untaken_guest_end_is_closed_with_the_session(world: OfflineWorld) -> None:
    """Destroying the session closes the guest end it still owns; it can no longer be taken."""
    owner = make_owner(world)
    guest = owner.worker._endpoints.guest
    assert guest is not None
    await owner.destroy()
    assert guest.fileno() == -1
    assert owner.close_reason is CloseReason.DESTROYED
    with pytest.raises(GuestEndpointTaken, match="session is closed"):
        owner.take_guest_endpoint()


# -- serving ---------------------------------------------------------------------------------------


async def test_serves_sequential_requests(world: OfflineWorld) -> None:
    """Requests on the guest end get their framed responses, one after another."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        for request_id in (1, 2, 3):
            await send(guest, encode_request(request_id))
            body = await reply(guest)
            assert body["id"] == request_id
            assert body["result"]["available_actions"] == ["status"]
        world.server_state = "stopped"
        world.observe()  # a new observation: a new generation, as the contract demands
        await send(guest, encode_request(4))
        assert (await reply(guest))["error"]["message"] == "wallet status unavailable"
        assert owner.worker.served == 4
    assert owner.close_reason is CloseReason.CANCELLED
    assert not owner.endpoints_open


async def _closes_with(
    owner: SyntheticOwner, guest: socket.socket, expected: CloseReason, *, within_s: float = WAIT_S
) -> None:
    assert await owner.wait_closed(within_s) is expected
    assert not owner.endpoints_open
    assert await at_eof(guest)


async def test_eof_closes(world: OfflineWorld) -> None:
    """The guest shutting its end down closes the session."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        guest.shutdown(socket.SHUT_WR)
        await _closes_with(owner, guest, CloseReason.EOF)


@pytest.mark.parametrize(
    "sent", [b"\x00\x00", encode_frame(encode_request(1), max_frame_bytes=99)[:-3]]
)
async def test_partial_frame_then_eof_closes(world: OfflineWorld, sent: bytes) -> None:
    """EOF inside a header or a payload closes the session: no resynchronization."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        await asyncio.get_running_loop().sock_sendall(guest, sent)
        guest.shutdown(socket.SHUT_WR)
        await _closes_with(owner, guest, CloseReason.PARTIAL_FRAME)
    assert owner.worker.served == 0


async def test_partial_frame_until_the_deadline_closes(world: OfflineWorld) -> None:
    """A frame that does not complete within the request deadline closes the session."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        await asyncio.get_running_loop().sock_sendall(guest, b"\x00\x00\x00\x10{")
        await _closes_with(owner, guest, CloseReason.DEADLINE)


async def test_oversized_frame_is_refused_on_its_header(world: OfflineWorld) -> None:
    """A header declaring over 64 KiB closes at once: the payload is never waited for."""
    owner = make_owner(world, request_deadline_s=30.0)
    async with serving(owner) as guest:
        header = (MAX_FRAME_BYTES + 1).to_bytes(HEADER_BYTES, "big")
        await asyncio.get_running_loop().sock_sendall(guest, header + b"{")
        await _closes_with(owner, guest, CloseReason.OVERSIZED, within_s=1.0)
    assert owner.worker.served == 0


@pytest.mark.parametrize(
    "payload",
    [b"{", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"wallet_status"}', b'{"method":"x"}', b""],
)
async def test_malformed_request_closes_without_a_response(
    world: OfflineWorld, payload: bytes
) -> None:
    """A complete frame that is not a strict request closes the session, unanswered."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        await send(guest, payload)
        await _closes_with(owner, guest, CloseReason.MALFORMED)


async def test_authority_failure_closes_with_one_strike(world: OfflineWorld) -> None:
    """A failed authority read on the second request ends the session; nothing is retried."""
    authorities = fail_read(world, "server", on_call=2)
    owner = make_owner(world, authorities)
    async with serving(owner) as guest:
        await send(guest, encode_request(1))
        assert "result" in await reply(guest)
        await send(guest, encode_request(2))
        await _closes_with(owner, guest, CloseReason.AUTHORITY_FAILURE)
    adversary = authorities.server
    assert isinstance(adversary, Adversary)
    assert adversary.calls["server"] == 2


async def test_processing_over_the_deadline_closes() -> None:
    """An authority really slower than the request's deadline ends the session unanswered."""
    world = OfflineWorld(RealClock(), owner_uid=os.getuid(), auto_observe=True)
    owner = make_owner(world, answer_late(world, "adapter", late_by_s=REQUEST_DEADLINE_S))
    async with serving(owner) as guest:
        await send(guest, encode_request(1))
        await _closes_with(owner, guest, CloseReason.AUTHORITY_FAILURE)


async def test_backpressure_timeout_closes(world: OfflineWorld) -> None:
    """A guest that sends but never reads stalls the response write: the session closes."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        frame = encode_frame(encode_request(1), max_frame_bytes=MAX_FRAME_BYTES)
        loop = asyncio.get_running_loop()
        flood = loop.create_task(loop.sock_sendall(guest, frame * 20_000))
        try:
            assert await owner.wait_closed(WAIT_S) is CloseReason.BACKPRESSURE_TIMEOUT
            assert owner.worker.served > 1
        finally:
            flood.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await flood
        assert not owner.endpoints_open


async def test_session_expiry_closes_an_idle_session(clock: FakeClock) -> None:
    """With no request, the session closes when it expires."""
    world = OfflineWorld(clock, owner_uid=os.getuid(), lifetime_s=0.2)
    owner = make_owner(world)
    async with serving(owner) as guest:
        await _closes_with(owner, guest, CloseReason.SESSION_EXPIRED)


async def test_session_expired_when_the_request_arrives_closes(world: OfflineWorld) -> None:
    """A request processed after the session's expiry closes it as expired, unanswered."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        await asyncio.sleep(0.05)  # the worker is idle, waiting on the real clock
        world.clock.advance(world.lifetime_s)  # the bridge clock passes the expiry
        await send(guest, encode_request(1))
        await _closes_with(owner, guest, CloseReason.SESSION_EXPIRED)
    assert owner.worker.served == 0


async def test_request_deadline_passed_on_the_bridge_clock_closes() -> None:
    """A bridge clock that passes the request deadline before decoding closes the session."""
    clock = FakeClock(step=REQUEST_DEADLINE_S)  # every sample moves one whole deadline on
    world = OfflineWorld(clock, owner_uid=os.getuid())
    owner = make_owner(world)
    async with serving(owner) as guest:
        await send(guest, encode_request(1))
        await _closes_with(owner, guest, CloseReason.DEADLINE)
    assert owner.worker.served == 0


async def test_close_requested_from_outside_while_idle(world: OfflineWorld) -> None:
    """A close request wakes an idle worker and closes the session."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        owner.closer.request_close()
        await _closes_with(owner, guest, CloseReason.CLOSE_REQUESTED)
    assert not owner.destroyed


async def test_authority_callback_may_request_close(world: OfflineWorld) -> None:
    """A callback's close request ends the session; that request gets no response."""
    holder: list[SyntheticOwner] = []

    def hook(name: str, call: int, honest: object) -> object:
        if name == "server" and call == 2:
            holder[0].closer.request_close()
        return honest

    owner = make_owner(world, Adversary(world.authorities(), hook).authorities())
    holder.append(owner)
    async with serving(owner) as guest:
        await send(guest, encode_request(1))
        assert "result" in await reply(guest)
        await send(guest, encode_request(2))
        await _closes_with(owner, guest, CloseReason.CLOSE_REQUESTED)
    assert not owner.destroyed
    await owner.destroy()  # the owner outlived its session and is still destroyable
    assert owner.destroyed


async def test_authority_callback_cannot_destroy_the_owner(world: OfflineWorld) -> None:
    """destroy() reached from the worker (directly or via a task it starts) is refused."""
    holder: list[SyntheticOwner] = []
    attempts: list[asyncio.Task[None]] = []
    direct: list[BaseException] = []

    def hook(name: str, call: int, honest: object) -> object:
        if name == "adapter":
            owner = holder[0]
            attempts.append(asyncio.get_running_loop().create_task(owner.destroy()))
            coro = owner.destroy()
            try:
                coro.send(None)
            except OwnerLifetimeError as exc:
                direct.append(exc)
            finally:
                coro.close()
        return honest

    owner = make_owner(world, Adversary(world.authorities(), hook).authorities())
    holder.append(owner)
    async with serving(owner) as guest:
        await send(guest, encode_request(1))
        assert "result" in await reply(guest)
        with pytest.raises(OwnerLifetimeError):
            await attempts[0]
        assert len(direct) == 1
        assert not owner.destroyed
        await send(guest, encode_request(2))  # the session goes on serving
        assert "result" in await reply(guest)
        await owner.destroy()
        assert await at_eof(guest)
    assert owner.close_reason is CloseReason.DESTROYED


async def test_cancellation_closes(world: OfflineWorld) -> None:
    """Stopping the worker from its supervisor closes every endpoint."""
    owner = make_owner(world)
    async with running(owner.worker):
        guest = owner.take_guest_endpoint()
    try:
        assert owner.close_reason is CloseReason.CANCELLED
        assert not owner.endpoints_open
        assert await at_eof(guest)
    finally:
        guest.close()


async def test_destroy_mid_request_closes(world: OfflineWorld) -> None:
    """Destroying the owner while a frame is half received closes the session."""
    owner = make_owner(world, request_deadline_s=30.0)
    async with serving(owner) as guest:
        await asyncio.get_running_loop().sock_sendall(guest, b"\x00\x00")
        await asyncio.sleep(0.05)
        await owner.destroy()
        await _closes_with(owner, guest, CloseReason.DESTROYED)


class _Exploding(StatusProcessor):
    """A processor with a bug, or one raising an unexpected typed error."""

    def __init__(self, world: OfflineWorld, error: Exception) -> None:
        super().__init__(world.binding(), world.authorities(), clock=world.clock)
        self.error = error

    def process(self, frame: bytes, deadline: float) -> StatusOutcome:
        raise self.error


@pytest.mark.parametrize("error", [StatusChannelError("typed"), RuntimeError("a bug")])
async def test_processing_failure_closes(world: OfflineWorld, error: Exception) -> None:
    """Any failure inside processing, typed or a bug, closes every endpoint."""
    owner = SyntheticOwner(_Exploding(world, error), enabled=True)
    async with serving(owner) as guest:
        await send(guest, encode_request(1))
        await _closes_with(owner, guest, CloseReason.PROCESSING_FAILURE)
    if isinstance(error, RuntimeError):
        assert owner.worker.state == "crashed"
        assert owner.worker.exit_reason is error


async def test_request_deadline_starts_with_the_first_byte(world: OfflineWorld) -> None:
    """An idle session does not time out per request: the deadline starts at a frame."""
    owner = make_owner(world)
    async with serving(owner) as guest:
        await asyncio.sleep(REQUEST_DEADLINE_S * 2)
        assert owner.close_reason is None
        await send(guest, encode_request(1))
        assert "result" in await reply(guest)
