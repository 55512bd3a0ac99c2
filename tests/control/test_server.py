"""The control server in-process on a real socket: typed methods, deadlines, streams, caps."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import msgspec
import pytest

from glove.actors import current_deadline
from glove.control import (
    AsyncClient,
    CallContext,
    Client,
    Limits,
    MethodError,
    MethodRegistry,
    RegistryError,
    RemoteError,
)
from glove.protocol import NoParams
from glove.testing.control import RawPeer, serving


class Echo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10


class EchoResult(msgspec.Struct, frozen=True):
    text: str
    peer_uid: int
    client: str


class Sleep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seconds: float


class Count(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    n: int
    interval_s: float = 0.0
    size: int = 0


class Tick(msgspec.Struct, frozen=True):
    i: int
    pad: str = ""


class Empty(msgspec.Struct, frozen=True):
    pass


class Deadline(msgspec.Struct, frozen=True):
    remaining: float
    inherited: bool


class Big(msgspec.Struct, frozen=True):
    blob: str


class Harness:
    """A registry of test methods and what their handlers saw."""

    def __init__(self) -> None:
        self.operational = False
        self.closed: list[tuple[int, bool]] = []
        self.registry = MethodRegistry(lifecycle_operational=lambda: self.operational)
        r = self.registry
        r.unary("echo", Echo, self.echo)
        r.unary("sleep", Sleep, self.sleep, deadline_s=1.0)
        r.unary("refuse", NoParams, self.refuse)
        r.unary("crash", NoParams, self.crash)
        r.unary("deadline", NoParams, self.deadline)
        r.unary("untyped", NoParams, self.untyped)  # type: ignore[arg-type]
        r.unary("big", NoParams, self.big)
        r.unary("lifecycle.start", NoParams, self.start, gated=True)
        r.stream("count", Count, self.count)
        r.stream("forever", NoParams, self.forever)

    async def echo(self, params: Echo, call: CallContext) -> EchoResult:
        return EchoResult(params.text, call.peer.uid, call.client)

    async def sleep(self, params: Sleep, _call: CallContext) -> Empty:
        await asyncio.sleep(params.seconds)
        return Empty()

    async def refuse(self, _params: NoParams, _call: CallContext) -> Empty:
        raise MethodError("not_found", "no session s-1", {"session_id": "s-1"})

    async def crash(self, _params: NoParams, _call: CallContext) -> Empty:
        raise RuntimeError("internal detail /home/someone/.secret")

    async def deadline(self, _params: NoParams, call: CallContext) -> Deadline:
        return Deadline(call.remaining(), current_deadline() == call.deadline)

    async def untyped(self, _params: NoParams, _call: CallContext) -> dict[str, int]:
        return {"not": 1}

    async def big(self, _params: NoParams, _call: CallContext) -> Big:
        return Big("x" * (2 * 1024 * 1024))

    async def start(self, _params: NoParams, _call: CallContext) -> Empty:
        return Empty()

    async def count(self, params: Count, _call: CallContext) -> AsyncIterator[Tick]:
        for i in range(params.n):
            if params.interval_s:
                await asyncio.sleep(params.interval_s)
            yield Tick(i, "x" * params.size)

    async def forever(self, _params: NoParams, call: CallContext) -> AsyncIterator[Tick]:
        i = 0
        try:
            while True:
                yield Tick(i)
                i += 1
                await asyncio.sleep(0.02)
        finally:
            self.closed.append((call.request_id, call.client_gone))


@pytest.fixture
def harness() -> Harness:
    """A fresh set of test methods."""
    return Harness()


def _run(tmp_path: Path) -> Path:
    return tmp_path / "run"


async def _until(predicate: object, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def test_a_bad_field_is_invalid_params_naming_its_path(
    harness: Harness, tmp_path: Path
) -> None:
    """Wrong type, out of bounds, unknown, missing, not an object: each names the path; the
    connection stays open for the next request."""
    async with (
        serving(harness.registry, _run(tmp_path)) as server,
        AsyncClient(server.paths.socket) as client,
    ):
        cases = [
            ({"text": "hi", "limit": 0}, "$.params.limit"),
            ({"text": "hi", "limit": "3"}, "$.params.limit"),
            ({"text": "hi", "surprise": True}, "$.params.surprise"),
            ({}, "$.params.text"),
            ([1, 2], "$.params"),
        ]
        for params, path in cases:
            with pytest.raises(RemoteError) as info:
                await client.call("echo", params)  # type: ignore[arg-type]
            assert info.value.code == "invalid_params"
            assert info.value.data == {"path": path}
        result = await client.call("echo", {"text": "hi"}, result_type=EchoResult)
        assert result == EchoResult("hi", os.getuid(), result.client)
        assert result.client.startswith("glove/")


async def test_method_errors_carry_code_message_and_data(harness: Harness, tmp_path: Path) -> None:
    """A handler's MethodError reaches the client as its code, message and data."""
    async with (
        serving(harness.registry, _run(tmp_path)) as server,
        AsyncClient(server.paths.socket) as client,
    ):
        with pytest.raises(RemoteError) as info:
            await client.call("refuse")
        assert (info.value.code, info.value.message, info.value.data) == (
            "not_found",
            "no session s-1",
            {"session_id": "s-1"},
        )


async def test_a_handler_bug_is_internal_error_logged_once_and_serving_goes_on(
    harness: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An unexpected exception: internal_error with no traceback or detail for the client,
    one log record with the traceback, and this and other connections keep working."""
    caplog.set_level(logging.ERROR, logger="glove.control")
    async with (
        serving(harness.registry, _run(tmp_path)) as server,
        AsyncClient(server.paths.socket) as client,
        AsyncClient(server.paths.socket) as other,
    ):
        with pytest.raises(RemoteError) as info:
            await client.call("crash")
        assert info.value.code == "internal_error"
        assert "secret" not in info.value.message
        assert "Traceback" not in info.value.message
        assert "RuntimeError" not in info.value.message
        assert (await client.call("echo", {"text": "after"}))["text"] == "after"
        assert (await other.call("echo", {"text": "other"}))["text"] == "other"
        for method in ("untyped", "big"):
            with pytest.raises(RemoteError, match="internal_error"):
                await client.call(method)
    crash_records = [r for r in caplog.records if r.exc_info and "crash" in r.getMessage()]
    assert len(crash_records) == 1
    assert crash_records[0].exc_info is not None
    assert crash_records[0].exc_info[0] is RuntimeError


async def test_deadlines_come_from_the_request_capped_by_the_method(
    harness: Harness, tmp_path: Path
) -> None:
    """deadline_ms bounds the handler, the method's maximum bounds deadline_ms, and actor
    asks inside the handler inherit the same absolute deadline."""
    async with (
        serving(harness.registry, _run(tmp_path)) as server,
        AsyncClient(server.paths.socket) as client,
    ):
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(RemoteError) as info:
            await client.call("sleep", {"seconds": 30}, timeout=0.2)
        assert info.value.code == "deadline_exceeded"  # the daemon's answer, not the client's
        assert loop.time() - started < 15.0  # not the handler's 30 s, however loaded the host
        started = loop.time()
        with pytest.raises(RemoteError, match="deadline_exceeded"):
            await client.call("sleep", {"seconds": 30}, timeout=20)  # the method allows 1 s
        assert loop.time() - started < 10.0  # the method's 1 s cap, not the request's 20 s
        seen = await client.call("deadline", timeout=3.0, result_type=Deadline)
        assert 0 < seen.remaining <= 3.0
        assert seen.inherited
        assert (await client.call("sleep", {"seconds": 0.01}, timeout=2)) == {}


async def test_gated_methods_exist_only_while_the_lifecycle_is_operational(
    harness: Harness, tmp_path: Path
) -> None:
    """A gated method answers method_not_found and is not listed by hello until the
    predicate says the runtime is operational; a failing predicate fails closed."""
    async with (
        serving(harness.registry, _run(tmp_path)) as server,
        AsyncClient(server.paths.socket) as client,
    ):
        assert client.server is not None
        assert "lifecycle.start" not in client.server.methods
        assert "echo" in client.server.methods
        with pytest.raises(RemoteError, match="method_not_found"):
            await client.call("lifecycle.start")
        harness.operational = True
        assert await client.call("lifecycle.start") == {}
        async with AsyncClient(server.paths.socket) as fresh:
            assert fresh.server is not None
            assert "lifecycle.start" in fresh.server.methods

        def broken() -> bool:
            raise RuntimeError("the runtime probe failed")

        harness.registry.set_lifecycle_predicate(broken)
        with pytest.raises(RemoteError, match="method_not_found"):
            await client.call("lifecycle.start")


async def test_a_stream_sends_events_then_a_final_result(harness: Harness, tmp_path: Path) -> None:
    """Each yielded item is one event frame, in order, and the stream ends with a result;
    the blocking client reads the same stream."""
    async with (
        serving(harness.registry, _run(tmp_path)) as server,
        AsyncClient(server.paths.socket) as client,
    ):
        stream = client.stream("count", {"n": 5}, event_type=Tick)
        ticks = [tick.i async for tick in stream]
        assert ticks == [0, 1, 2, 3, 4]
        assert stream.end is not None
        assert stream.end.events == 5
        assert (await client.call("echo", {"text": "x"}))["text"] == "x"

        def blocking() -> list[int]:
            with Client(server.paths.socket) as sync_client:
                with sync_client.stream(
                    "count", {"n": 3, "interval_s": 0.01}, event_type=Tick
                ) as events:
                    got = [event.i for event in events]
                assert events.end is not None
                assert events.end.events == 3
                return got

        assert await asyncio.to_thread(blocking) == [0, 1, 2]


async def test_a_cancel_frame_ends_a_stream_and_the_connection_goes_on(
    harness: Harness, tmp_path: Path
) -> None:
    """{"id": N, "cancel": true} ends stream N with a cancelled error; the handler's cleanup
    runs; the same connection serves the next request."""
    async with serving(harness.registry, _run(tmp_path)) as server:
        peer = await RawPeer.open(server.paths)
        assert "result" in await peer.hello()
        await peer.send({"id": 7, "method": "forever"})
        assert (await peer.reply())["event"] == {"i": 0, "pad": ""}
        await peer.send({"id": 7, "cancel": True})
        while "event" in (reply := await peer.reply()):
            assert reply["id"] == 7
        assert reply == {
            "id": 7,
            "error": {"code": "cancelled", "message": reply["error"]["message"]},
        }
        await _until(lambda: harness.closed == [(7, False)])
        await peer.send({"id": 7, "cancel": True})  # already over: ignored
        await peer.send({"id": 8, "method": "echo", "params": {"text": "still here"}})
        assert (await peer.reply())["result"]["text"] == "still here"
        await peer.close()

        async with AsyncClient(server.paths.socket) as client:
            async with client.stream("forever", event_type=Tick) as events:
                async for tick in events:
                    if tick.i == 2:
                        break
            await _until(lambda: len(harness.closed) == 2)
            assert (await client.call("echo", {"text": "next"}))["text"] == "next"


async def test_the_blocking_client_cancels_a_stream_it_leaves(
    harness: Harness, tmp_path: Path
) -> None:
    """Leaving a SyncStream early sends a cancel, waits for the stream's last frame, and the
    next call on the same connection gets its own reply."""
    async with serving(harness.registry, _run(tmp_path)) as server:

        def blocking() -> str:
            with Client(server.paths.socket) as client:
                with client.stream("forever", event_type=Tick) as events:
                    for tick in events:
                        if tick.i == 3:
                            break
                return str(client.call("echo", {"text": "after"})["text"])

        assert await asyncio.to_thread(blocking) == "after"
        await _until(lambda: harness.closed and harness.closed[0][1] is False)


async def test_a_stream_ends_when_its_client_goes_away(harness: Harness, tmp_path: Path) -> None:
    """Closing the connection cancels its streams; the handler sees the client gone."""
    async with serving(harness.registry, _run(tmp_path)) as server:
        peer = await RawPeer.open(server.paths)
        await peer.hello()
        await peer.send({"id": 3, "method": "forever"})
        assert "event" in await peer.reply()
        await peer.close()
        await _until(lambda: harness.closed == [(3, True)])
        await _until(lambda: server.connections == 0)


async def test_a_slow_reader_gets_bounded_buffering_then_stream_overflow(
    harness: Harness, tmp_path: Path
) -> None:
    """A client that stops reading a fast stream ends it with stream_overflow after a bounded
    amount of unread output, and the connection stays usable."""
    limits = Limits(stream_buffer_bytes=64 * 1024)
    async with serving(harness.registry, _run(tmp_path), limits=limits) as server:
        peer = await RawPeer.open(server.paths)
        await peer.hello()
        await peer.send({"id": 5, "method": "count", "params": {"n": 100_000, "size": 1000}})
        await asyncio.sleep(1.0)  # we read nothing meanwhile
        events = 0
        while "event" in (reply := await peer.reply()):
            events += 1
        assert reply["id"] == 5
        assert reply["error"]["code"] == "stream_overflow"
        assert 0 < events < 100_000
        # What was buffered is bounded: the kernel's socket buffers plus our 64 KiB.
        assert events * 1000 < 8 * 1024 * 1024
        await peer.send({"id": 6, "method": "echo", "params": {"text": "ok"}})
        assert (await peer.reply())["result"]["text"] == "ok"
        await peer.close()


async def test_requests_in_flight_are_capped_per_connection(
    harness: Harness, tmp_path: Path
) -> None:
    """Past the in-flight cap a request is answered busy with its id; the others complete."""
    limits = Limits(max_inflight=2)
    async with serving(harness.registry, _run(tmp_path), limits=limits) as server:
        peer = await RawPeer.open(server.paths)
        await peer.hello()
        for rid in (2, 3, 4):
            await peer.send({"id": rid, "method": "sleep", "params": {"seconds": 0.3}})
        replies = {}
        for _ in range(3):
            reply = await peer.reply()
            replies[reply["id"]] = reply
        assert replies[4]["error"]["code"] == "busy"
        assert replies[2] == {"id": 2, "result": {}}
        assert replies[3] == {"id": 3, "result": {}}
        await peer.send({"id": 2, "method": "sleep", "params": {"seconds": 0.3}})
        await peer.send({"id": 2, "method": "sleep", "params": {"seconds": 0.3}})
        while (reply := await peer.reply())["id"] != 0:
            pass
        assert reply["error"]["code"] == "malformed_frame"  # an id reused while in flight
        assert await peer.closed()
        await peer.close()


async def test_half_open_connections_cannot_lock_out_the_owner(
    harness: Harness, tmp_path: Path
) -> None:
    """Connections that never say hello fill only the handshake cap: one more is told busy,
    authenticated clients keep working, and each silent one is closed at its hello deadline."""
    limits = Limits(hello_deadline_s=0.5)
    async with (
        serving(harness.registry, _run(tmp_path), limits=limits, max_handshaking=4) as server,
        AsyncClient(server.paths.socket) as owner,
    ):
        silent = [await RawPeer.open(server.paths) for _ in range(4)]
        await _until(lambda: server.connections == 5)
        extra = await RawPeer.open(server.paths)
        assert (await extra.reply())["error"]["code"] == "busy"
        assert await extra.closed()
        await extra.close()
        assert (await owner.call("echo", {"text": "still"}))["text"] == "still"
        for peer in silent:
            reply = await peer.reply()
            assert reply["error"]["code"] == "unauthenticated"
            assert "no hello" in reply["error"]["message"]
            assert await peer.closed()
            await peer.close()
        async with AsyncClient(server.paths.socket) as late:
            assert (await late.call("echo", {"text": "late"}))["text"] == "late"


async def test_authenticated_connections_are_capped(harness: Harness, tmp_path: Path) -> None:
    """Past the connection cap a client is told busy and closed; a freed slot is reusable."""
    async with serving(harness.registry, _run(tmp_path), max_connections=2) as server:
        first = AsyncClient(server.paths.socket)
        await first.connect()
        async with AsyncClient(server.paths.socket) as second:
            third = AsyncClient(server.paths.socket)
            with pytest.raises(RemoteError) as info:
                await third.connect()
            assert info.value.code == "busy"
            await third.aclose()
            assert server.refused_busy >= 1
            await first.aclose()
            await _until(lambda: server.connections == 1)
            async with AsyncClient(server.paths.socket) as fourth:
                assert (await fourth.call("echo", {"text": "in"}))["text"] == "in"
            assert (await second.call("echo", {"text": "2"}))["text"] == "2"


async def test_an_idle_connection_is_closed_but_not_one_with_a_stream(
    harness: Harness, tmp_path: Path
) -> None:
    """Nothing in flight past the idle deadline: closed quietly. A running stream is not idle."""
    limits = Limits(idle_deadline_s=0.3)
    async with serving(harness.registry, _run(tmp_path), limits=limits) as server:
        idle = await RawPeer.open(server.paths)
        await idle.hello()
        assert await idle.closed(timeout=3.0)
        await idle.close()
        async with AsyncClient(server.paths.socket) as client:
            stream = client.stream("count", {"n": 4, "interval_s": 0.25}, event_type=Tick)
            ticks = [t async for t in stream]
            assert len(ticks) == 4


async def test_stopping_tells_requests_in_flight(harness: Harness, tmp_path: Path) -> None:
    """When the server stops, a request still running gets shutting_down with its id."""
    async with serving(harness.registry, _run(tmp_path)) as server:
        peer = await RawPeer.open(server.paths)
        await peer.hello()
        await peer.send({"id": 9, "method": "sleep", "params": {"seconds": 0.9}})
        await asyncio.sleep(0.1)
        server.stop()
        reply = await peer.reply()
        assert reply["id"] == 9
        assert reply["error"]["code"] == "shutting_down"
        await peer.close()
        await _until(lambda: server.state == "stopped")
    assert not server.paths.socket.exists()
    assert not server.paths.secret.exists()


def test_the_registry_refuses_what_it_cannot_serve_safely(harness: Harness) -> None:
    """Duplicate names, hello, malformed names, lax params types and silly deadlines are
    wiring errors, refused at registration."""

    class Lax(msgspec.Struct):
        x: int = 0

    async def handler(_p: NoParams, _c: CallContext) -> Empty:
        return Empty()

    registry = harness.registry
    with pytest.raises(RegistryError, match="already registered"):
        registry.unary("echo", NoParams, handler)
    with pytest.raises(RegistryError, match="hello"):
        registry.unary("hello", NoParams, handler)
    with pytest.raises(RegistryError, match="dotted"):
        registry.unary("Session.Create", NoParams, handler)
    with pytest.raises(RegistryError, match="forbid_unknown_fields"):
        registry.unary("lax", Lax, handler)  # type: ignore[arg-type]
    with pytest.raises(RegistryError, match="deadline_s"):
        registry.unary("slow", NoParams, handler, deadline_s=0)
    with pytest.raises(RegistryError, match="msgspec Struct"):
        registry.unary("dicty", dict, handler)  # type: ignore[type-var, arg-type]
    with pytest.raises(ValueError, match="reserved"):
        MethodError("unauthenticated", "a handler may not claim this")
    with pytest.raises(ValueError, match="snake_case"):
        MethodError("Not Found", "codes are machine words")
    expected = ["big", "count", "crash", "deadline", "echo", "forever", "hello", "refuse"]
    assert registry.available() == sorted([*expected, "sleep", "untyped"])
