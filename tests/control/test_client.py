"""The clients' one error boundary: every foreign failure becomes the ControlError that says
who caused it. The daemons here are fault injectors on real sockets."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from glove.control import (
    AsyncClient,
    Client,
    ClientClosed,
    ClientTimeout,
    ConnectionLost,
    ControlError,
    DaemonProtocolError,
    DaemonUnavailable,
    RemoteError,
    RequestInvalid,
    call,
    prepare_runtime_dir,
)
from glove.control._auth import write_secret
from glove.protocol import CONTROL_MAX_REQUEST_BYTES, ProtocolError

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
HELLO_RESULT = {
    "server": "fake",
    "version": "0",
    "protocol": 1,
    "pid": 1,
    "methods": ["hello", "health"],
}


async def _read(reader: asyncio.StreamReader) -> dict[str, Any]:
    size = int.from_bytes(await reader.readexactly(4), "big")
    value: dict[str, Any] = json.loads(await reader.readexactly(size))
    return value


def _write(writer: asyncio.StreamWriter, message: dict[str, Any] | bytes) -> None:
    payload = message if isinstance(message, bytes) else json.dumps(message).encode()
    writer.write(len(payload).to_bytes(4, "big") + payload)


async def _hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await _read(reader)
    assert request["method"] == "hello"
    _write(writer, {"id": request["id"], "result": HELLO_RESULT})


@asynccontextmanager
async def fake_daemon(directory: Path, behave: Behaviour) -> AsyncIterator[Path]:
    """A socket and a secret in ``directory`` served by ``behave`` (one call per connection)."""
    paths = prepare_runtime_dir(directory)
    write_secret(paths.directory)

    handlers: set[asyncio.Task[Any]] = set()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await behave(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_unix_server(handler, path=str(paths.socket))
    try:
        yield paths.socket
    finally:
        # asyncio 3.11 leaks a connection whose accept completes after close(): let every
        # connection a client made reach its handler first.
        await asyncio.sleep(0.05)
        server.close()
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


def test_no_socket_is_daemon_unavailable(tmp_path: Path) -> None:
    """ENOENT: no daemon was ever started there."""
    with pytest.raises(DaemonUnavailable, match="No such file"):
        call(tmp_path / "gloved.sock", "health")
    with pytest.raises(DaemonUnavailable):
        Client.for_runtime_dir(tmp_path).connect()


async def test_a_dead_socket_is_daemon_unavailable(tmp_path: Path) -> None:
    """ECONNREFUSED: a socket file nobody listens on (a daemon that died)."""
    path = tmp_path / "gloved.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))
    with pytest.raises(DaemonUnavailable, match="refused"):
        call(path, "health")
    with pytest.raises(DaemonUnavailable, match="refused"):
        await AsyncClient(path).connect()


async def test_a_missing_or_unsafe_secret_is_refused_by_the_client(tmp_path: Path) -> None:
    """A socket without its secret beside it is not our daemon; a secret readable by others
    is not used."""

    async def nothing(_r: asyncio.StreamReader, _w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(1)

    async with fake_daemon(tmp_path / "run", nothing) as sock:
        secret = sock.parent / "bootstrap-secret"
        secret.chmod(0o644)
        with pytest.raises(DaemonUnavailable, match="0644"):
            await AsyncClient(sock).connect()
        secret.unlink()
        with pytest.raises(DaemonUnavailable, match="bootstrap-secret"):
            await asyncio.to_thread(call, sock, "health")


async def test_a_malformed_reply_is_a_daemon_protocol_error(tmp_path: Path) -> None:
    """Garbage, a duplicate key, a reply with neither result nor error, a reply for another
    id, an event for a unary call: DaemonProtocolError (also a ProtocolError), and the
    connection is unusable afterwards."""
    replies: list[bytes] = [
        b"{not json",
        b'{"id": 2, "result": {}, "result": {}}',
        b'{"id": 2}',
        b'{"id": 99, "result": {}}',
        b'{"id": 2, "event": {}}',
        b'{"id": 2, "error": {"code": "Not A Code", "message": "x"}}',
    ]
    for reply in replies:

        async def behave(
            r: asyncio.StreamReader, w: asyncio.StreamWriter, reply: bytes = reply
        ) -> None:
            await _hello(r, w)
            await _read(r)
            _write(w, reply)
            await asyncio.sleep(1)

        async with fake_daemon(tmp_path / "run", behave) as sock:
            async with AsyncClient(sock) as client:
                with pytest.raises(DaemonProtocolError) as info:
                    await client.call("health")
                assert isinstance(info.value, ProtocolError)
                with pytest.raises(ConnectionLost):
                    await client.call("health")

            def blocking(sock: Path = sock) -> None:
                with Client(sock) as client:
                    with pytest.raises(DaemonProtocolError):
                        client.call("health")
                    with pytest.raises(ConnectionLost):
                        client.call("health")

            await asyncio.to_thread(blocking)


async def test_a_result_of_the_wrong_shape_is_a_daemon_protocol_error(tmp_path: Path) -> None:
    """A result that does not convert to the requested Struct is the daemon's fault."""

    class Health(msgspec.Struct):
        status: str

    async def behave(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _hello(r, w)
        request = await _read(r)
        _write(w, {"id": request["id"], "result": {"status": 1}})
        await asyncio.sleep(1)

    async with fake_daemon(tmp_path / "run", behave) as sock, AsyncClient(sock) as client:
        with pytest.raises(DaemonProtocolError, match="Health"):
            await client.call("health", result_type=Health)


async def test_the_daemon_going_away_mid_call_is_connection_lost(tmp_path: Path) -> None:
    """EOF before the reply, or inside it: ConnectionLost ("it broke"), a DaemonUnavailable."""
    for cut in (b"", b'\x00\x00\x00\x20{"id": 2, "res'):

        async def behave(
            r: asyncio.StreamReader, w: asyncio.StreamWriter, cut: bytes = cut
        ) -> None:
            await _hello(r, w)
            await _read(r)
            w.write(cut)

        async with fake_daemon(tmp_path / "run", behave) as sock:
            async with AsyncClient(sock) as client:
                with pytest.raises(ConnectionLost) as info:
                    await client.call("health")
                assert isinstance(info.value, DaemonUnavailable)
            with pytest.raises(ConnectionLost):
                await asyncio.to_thread(call, sock, "health")


async def test_no_reply_in_time_is_a_client_timeout(tmp_path: Path) -> None:
    """A daemon that never answers: ClientTimeout, which is also a TimeoutError."""

    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _hello(r, w)
        await asyncio.sleep(10)

    async with fake_daemon(tmp_path / "run", silent) as sock:
        async with AsyncClient(sock) as client:
            with pytest.raises(ClientTimeout) as info:
                await client.call("health", timeout=0.1)
            assert isinstance(info.value, TimeoutError)
        with pytest.raises(ClientTimeout):
            await asyncio.to_thread(call, sock, "health", timeout=0.1)


async def test_you_closed_it_is_not_it_broke(tmp_path: Path) -> None:
    """Calls on a closed client, and calls pending when it is closed, raise ClientClosed."""

    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _hello(r, w)
        await asyncio.sleep(10)

    async with fake_daemon(tmp_path / "run", silent) as sock:
        client = AsyncClient(sock)
        await client.connect()
        pending = asyncio.ensure_future(client.call("health", timeout=5))
        await asyncio.sleep(0.05)
        await client.aclose()
        with pytest.raises(ClientClosed):
            await pending
        with pytest.raises(ClientClosed):
            await client.call("health")

        def blocking() -> None:
            sync_client = Client(sock)
            sync_client.connect()
            sync_client.close()
            with pytest.raises(ClientClosed):
                sync_client.call("health")

        await asyncio.to_thread(blocking)


async def test_a_typed_error_frame_is_a_remote_error_with_its_data(tmp_path: Path) -> None:
    """An error frame keeps its code, message and data, and the connection stays usable."""

    async def behave(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _hello(r, w)
        request = await _read(r)
        error = {"code": "not_found", "message": "no session", "data": {"session_id": "s"}}
        _write(w, {"id": request["id"], "error": error})
        request = await _read(r)
        _write(w, {"id": request["id"], "result": {"status": "ok"}})
        await asyncio.sleep(1)

    async with fake_daemon(tmp_path / "run", behave) as sock, AsyncClient(sock) as client:
        with pytest.raises(RemoteError) as info:
            await client.call("session.status")
        assert (info.value.code, info.value.message, info.value.data) == (
            "not_found",
            "no session",
            {"session_id": "s"},
        )
        assert (await client.call("health")) == {"status": "ok"}


async def test_a_request_over_the_cap_is_refused_before_sending(tmp_path: Path) -> None:
    """A request the daemon must refuse is never sent: RequestInvalid, connection intact."""

    async def behave(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _hello(r, w)
        request = await _read(r)
        _write(w, {"id": request["id"], "result": {"status": "ok"}})
        await asyncio.sleep(1)

    async with fake_daemon(tmp_path / "run", behave) as sock, AsyncClient(sock) as client:
        with pytest.raises(RequestInvalid) as info:
            await client.call("plan.validate", {"plan": "x" * CONTROL_MAX_REQUEST_BYTES})
        assert isinstance(info.value, ValueError)
        with pytest.raises(RequestInvalid):
            await client.call("plan.validate", {"plan": object()})
        assert (await client.call("health")) == {"status": "ok"}


def test_every_client_error_is_a_control_error() -> None:
    """One except clause catches everything the clients raise on purpose."""
    for kind in (
        DaemonUnavailable,
        ConnectionLost,
        ClientClosed,
        ClientTimeout,
        RemoteError,
        DaemonProtocolError,
        RequestInvalid,
    ):
        assert issubclass(kind, ControlError)
