"""The CLI's JSON-only one-shot call raises what the typed client raises for every failure,
and its reply decoder gives ``decode_server_frame``'s verdict on every frame. The daemons
here are the fault injectors of ``test_client.py`` on real sockets; the real gloved is in
``tests/test_cli_imports.py`` (the CLI's output through both paths) and
``tests/session/test_typed_client.py``."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glove.control import (
    ClientTimeout,
    ConnectionLost,
    DaemonProtocolError,
    DaemonUnavailable,
    RemoteError,
    RequestInvalid,
    call,
    call_once,
)
from glove.protocol import CONTROL_MAX_REQUEST_BYTES, ProtocolError, decode_reply
from glove.protocol.control import decode_server_frame
from tests.control.test_client import _hello, _read, _write, fake_daemon

#: Frames both decoders must judge alike: valid ones and one of each way to be malformed.
VECTORS: tuple[bytes, ...] = (
    b'{"id":1,"result":{}}',
    b'{"id":1,"result":null}',
    b'{"id":0,"error":{"code":"busy","message":"x"}}',
    b'{"id":1,"error":null}',
    b'{"id":1,"error":{"code":"bad","message":"x","data":{"a":[1,2]}}}',
    b'{"id":-5,"result":1}',
    b'{"id":18446744073709551616,"result":1}',
    b'{"id":1,"event":{"state":"running"}}',
    b'{"id":9007199254740991,"event":1}',
    b'{"id":9007199254740992,"event":1}',
    b'{"id":0,"event":1}',
    b'{"id":true,"result":1}',
    b'{"id":1.0,"result":1}',
    b'{"id":"1","result":1}',
    b'{"id":null,"result":1}',
    b'{"result":1}',
    b'{"event":1}',
    b'{"id":1}',
    b'{"id":1,"result":1,"error":null}',
    b'{"id":1,"result":1,"extra":2}',
    b'{"id":1,"event":1,"x":2}',
    b'{"id":1,"error":{"code":"Bad","message":"x"}}',
    b'{"id":1,"error":{"code":"bad"}}',
    b'{"id":1,"error":{"code":1,"message":"x"}}',
    b'{"id":1,"error":{"code":"bad","message":"x","z":1}}',
    b'{"id":1,"error":[]}',
    b'{"id":1,"result":1,"result":2}',
    b'{"id":1,"result":{"a":1,"\\u0061":2}}',
    b'{"id":1,"result":NaN}',
    b"[1]",
    b"{not json",
    b"",
)


def _verdict(decode: Any, payload: bytes) -> tuple[Any, ...]:
    """What a decoder makes of ``payload``: the frame's parts, or the error's class."""
    try:
        frame = decode(payload)
    except ProtocolError as exc:
        return ("refused", type(exc).__name__)
    error = getattr(frame, "error", None)
    body = None if error is None else (error.code, error.message, error.data)
    is_event = getattr(frame, "is_event", None)
    if is_event is None:
        is_event = not hasattr(frame, "result")
    value = frame.event if hasattr(frame, "event") else frame.result
    return ("frame", frame.id, is_event, value, body)


@pytest.mark.parametrize("payload", VECTORS)
def test_the_light_decoder_judges_every_vector_as_the_codec_does(payload: bytes) -> None:
    """Accepted or refused with the same error class, and the same id, kind, value, error."""
    assert _verdict(decode_reply, payload) == _verdict(decode_server_frame, payload)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = st.sampled_from(["id", "result", "error", "event", "code", "message", "data", "x"])
_FRAME = st.dictionaries(
    _KEYS,
    _JSON
    | st.fixed_dictionaries(
        {"code": st.sampled_from(["ok_code", "Bad", "x" * 70]), "message": st.text(max_size=4)},
        optional={"data": _JSON, "z": _JSON},
    ),
    max_size=4,
)


@settings(max_examples=400, deadline=None)
@given(_FRAME)
def test_the_light_decoder_agrees_with_the_codec_on_generated_frames(frame: dict[str, Any]) -> None:
    """Generated envelopes (right and wrong keys, types and error bodies): the same verdict."""
    payload = json.dumps(frame).encode()
    assert _verdict(decode_reply, payload) == _verdict(decode_server_frame, payload)


def test_no_socket_is_daemon_unavailable_with_the_clients_message(tmp_path: Path) -> None:
    """ENOENT: the same DaemonUnavailable, word for word, as the typed one-shot call."""
    with pytest.raises(DaemonUnavailable) as typed:
        call(tmp_path / "gloved.sock", "health")
    with pytest.raises(DaemonUnavailable) as light:
        call_once(tmp_path, "health")
    assert str(light.value) == str(typed.value)


def test_a_dead_socket_is_daemon_unavailable(tmp_path: Path) -> None:
    """ECONNREFUSED: a socket file nobody listens on."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(tmp_path / "gloved.sock"))
    with pytest.raises(DaemonUnavailable, match="refused"):
        call_once(tmp_path, "health")


async def test_a_missing_or_unsafe_secret_is_refused(tmp_path: Path) -> None:
    """A secret readable by others is not used; no secret is no daemon of ours."""

    async def nothing(_r: asyncio.StreamReader, _w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(1)

    async with fake_daemon(tmp_path / "run", nothing) as sock:
        secret = sock.parent / "bootstrap-secret"
        secret.chmod(0o644)
        with pytest.raises(DaemonUnavailable, match="0644"):
            await asyncio.to_thread(call_once, sock.parent, "health")
        secret.unlink()
        with pytest.raises(DaemonUnavailable, match="bootstrap-secret"):
            await asyncio.to_thread(call_once, sock.parent, "health")


async def test_the_request_is_what_the_typed_client_sends(tmp_path: Path) -> None:
    """hello with the secret, client name and protocol, then the call with its params and
    deadline: the same JSON the typed client sends, and the result as it came."""
    seen: list[list[dict[str, Any]]] = []

    async def behave(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        hello = await _read(r)
        _write(
            w,
            {
                "id": hello["id"],
                "result": {
                    "server": "fake",
                    "version": "0",
                    "protocol": 1,
                    "pid": 1,
                    "methods": [],
                },
            },
        )
        request = await _read(r)
        seen.append([hello, request])
        _write(w, {"id": request["id"], "result": {"state": "running", "n": [1, 2]}})
        await asyncio.sleep(1)

    async with fake_daemon(tmp_path / "run", behave) as sock:
        params = {"session_id": "s-1"}
        light = await asyncio.to_thread(call_once, sock.parent, "session.status", params, timeout=3)
        typed = await asyncio.to_thread(call, sock, "session.status", params, timeout=3)
    assert light == typed == {"state": "running", "n": [1, 2]}
    assert seen[0] == seen[1]
    assert seen[0][1] == {
        "id": 2,
        "method": "session.status",
        "params": params,
        "deadline_ms": 3000,
    }


async def test_a_malformed_reply_is_a_daemon_protocol_error(tmp_path: Path) -> None:
    """Garbage, a duplicate key, neither result nor error, another id, an event for the
    call, a bad error code: DaemonProtocolError (also a ProtocolError)."""
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
            with pytest.raises(DaemonProtocolError) as info:
                await asyncio.to_thread(call_once, sock.parent, "health")
            assert isinstance(info.value, ProtocolError)


async def test_the_daemon_going_away_mid_call_is_connection_lost(tmp_path: Path) -> None:
    """EOF before the reply, or inside it: ConnectionLost with the typed client's message."""
    for cut in (b"", b'\x00\x00\x00\x20{"id": 2, "res'):

        async def behave(
            r: asyncio.StreamReader, w: asyncio.StreamWriter, cut: bytes = cut
        ) -> None:
            await _hello(r, w)
            await _read(r)
            w.write(cut)

        async with fake_daemon(tmp_path / "run", behave) as sock:
            with pytest.raises(ConnectionLost) as light:
                await asyncio.to_thread(call_once, sock.parent, "health")
            with pytest.raises(ConnectionLost) as typed:
                await asyncio.to_thread(call, sock, "health")
            assert str(light.value) == str(typed.value)


async def test_no_reply_in_time_is_a_client_timeout(tmp_path: Path) -> None:
    """A daemon that never answers: ClientTimeout, also a TimeoutError."""

    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _hello(r, w)
        await asyncio.sleep(10)

    async with fake_daemon(tmp_path / "run", silent) as sock:
        with pytest.raises(ClientTimeout) as info:
            await asyncio.to_thread(call_once, sock.parent, "health", timeout=0.1)
        assert isinstance(info.value, TimeoutError)


async def test_an_error_frame_is_a_remote_error_with_its_data(tmp_path: Path) -> None:
    """The call's error frame, and a refusal of hello (id 0), keep code, message and data."""

    async def refuse_call(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _hello(r, w)
        request = await _read(r)
        error = {"code": "session_not_found", "message": "no session", "data": {"id": "s"}}
        _write(w, {"id": request["id"], "error": error})
        await asyncio.sleep(1)

    async def refuse_hello(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _read(r)
        _write(w, {"id": 0, "error": {"code": "unauthenticated", "message": "wrong secret"}})

    async with fake_daemon(tmp_path / "run", refuse_call) as sock:
        with pytest.raises(RemoteError) as info:
            await asyncio.to_thread(call_once, sock.parent, "session.status")
        assert (info.value.code, info.value.message, info.value.data) == (
            "session_not_found",
            "no session",
            {"id": "s"},
        )
    async with fake_daemon(tmp_path / "run2", refuse_hello) as sock:
        with pytest.raises(RemoteError, match="unauthenticated"):
            await asyncio.to_thread(call_once, sock.parent, "health")


def test_params_over_the_cap_or_not_json_are_refused_before_sending() -> None:
    """Params the daemon must refuse are never sent: the request frame is RequestInvalid
    (also a ValueError) when it is over the cap, not encodable, or not strict JSON (NaN)."""
    from glove.control._oneshot import _request

    with pytest.raises(RequestInvalid) as info:
        _request(2, "plan.validate", {"plan": "x" * CONTROL_MAX_REQUEST_BYTES}, 1.0)
    assert isinstance(info.value, ValueError)
    with pytest.raises(RequestInvalid):
        _request(2, "plan.validate", {"plan": object()}, 1.0)
    with pytest.raises(RequestInvalid):
        _request(2, "plan.validate", {"plan": float("nan")}, 1.0)
