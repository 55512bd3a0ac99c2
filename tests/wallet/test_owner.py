"""The synthetic owner serving a real socketpair: requests, and every way a session closes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket

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
    CloseReason,
    OwnerLifetimeError,
    StatusChannelError,
    StatusOutcome,
    StatusProcessor,
    SyntheticOwner,
    encode_request,
)
from tests.wallet._owner_helpers import (
    REQUEST_DEADLINE_S,
    WAIT_S,
    at_eof,
    make_owner,
    reply,
    send,
    serving,
)

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
