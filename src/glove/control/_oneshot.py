"""The CLI's one-shot control call in JSON alone: connect, hello, one request, one reply.

``glove capabilities`` and ``glove session status`` make one call and print its result.
The typed clients (:class:`~glove.control.Client`, :class:`~glove.control.AsyncClient`)
decode every frame into msgspec Structs, and loading msgspec costs more than the rest of
such a command (docs/decisions/0049-a-json-only-one-shot-call.md). This module speaks the
same protocol with the standard library's ``json`` and ``socket`` only::

    client                                   gloved
      connect ---------------------------->  SO_PEERCRED checked
      {"id":1,"method":"hello",...} ------>  secret checked
      <------------------------------------  {"id":1,"result":{...}}
      {"id":2,"method":M,"params":P,...} ->
      <------------------------------------  {"id":2,"result":R}  or  {"id":2,"error":...}

Nothing here is a second protocol: the frames are :mod:`glove.protocol._frames`', a reply
is decoded by :func:`glove.protocol.decode_reply` (held to ``decode_server_frame``'s
verdicts by a test), the secret is read by :func:`~glove.control.read_secret`, and every
failure goes through the clients' one error boundary
(:func:`glove.control._client_base.foreign`), so it raises what :func:`glove.control.call`
raises for the same failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Mapping
from typing import Any, Final, TypedDict

from glove.control._address import socket_address
from glove.control._client_base import (
    CLIENT_DEADLINE_S,
    CLIENT_GRACE_S,
    DEFAULT_CLIENT_NAME,
    RECV_BYTES,
    deadline_ms,
    foreign,
    runtime_files,
)
from glove.control._secret import read_secret
from glove.control.errors import (
    ClientTimeout,
    ConnectionLost,
    ControlError,
    DaemonProtocolError,
    RemoteError,
    RequestInvalid,
)
from glove.protocol import (
    CONTROL_MAX_REQUEST_BYTES,
    CONTROL_MAX_RESPONSE_BYTES,
    PROTOCOL_VERSION,
    FrameDecoder,
    FrameTooLarge,
    ProtocolError,
    Reply,
    decode_reply,
    encode_frame,
)

#: After a failed send, how long the daemon's refusal (busy, unauthenticated) is waited for.
REFUSAL_READ_S: Final = 0.2
_HELLO_ID: Final = 1
_CALL_ID: Final = 2


def call_once(
    runtime_dir: str | os.PathLike[str] | None,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float = CLIENT_DEADLINE_S,
    client_name: str = DEFAULT_CLIENT_NAME,
) -> Any:
    """Call ``method`` once on the gloved of ``runtime_dir`` (default: ours); its result.

    Raises:
        DaemonUnavailable: no daemon listens there, or its secret cannot be read.
        RemoteError: the daemon refused (``hello``, or the call) with a typed error.
        ClientTimeout: no reply within ``timeout`` (plus the clients' grace).
        ConnectionLost: the connection broke.
        RequestInvalid: ``params`` are not JSON-encodable or over the request cap.
        DaemonProtocolError: a reply is not a valid frame, or not the one awaited.
    """
    sock_path, secret_path = runtime_files(runtime_dir)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            with socket_address(sock_path) as address:
                sock.connect(address)
        except TimeoutError as exc:
            raise ClientTimeout(f"gloved on {sock_path} did not accept in time") from exc
        except OSError as exc:
            raise foreign(exc, connecting=True, where=sock_path) from exc
        wire = _Wire(sock, sock_path)
        hello: _Hello = {
            "secret": read_secret(secret_path),
            "client": client_name,
            "protocol": PROTOCOL_VERSION,
        }
        wire.exchange(_request(_HELLO_ID, "hello", hello, timeout), _HELLO_ID, timeout)
        return wire.exchange(_request(_CALL_ID, method, params or {}, timeout), _CALL_ID, timeout)
    finally:
        sock.close()


class _Hello(TypedDict):
    """The ``hello`` params (``protocol.HelloParams``, as sent)."""

    secret: str
    client: str
    protocol: int


class _Request(TypedDict):
    """One request frame (``protocol.control.Request``, as sent)."""

    id: int
    method: str
    params: Mapping[str, Any] | _Hello
    deadline_ms: int


def _request(
    request_id: int, method: str, params: Mapping[str, Any] | _Hello, timeout: float
) -> bytes:
    """A framed request, encoded as the typed clients encode it (compact, UTF-8).

    Raises:
        RequestInvalid: the params are not encodable or the frame exceeds the cap.
    """
    request: _Request = {
        "id": request_id,
        "method": method,
        "params": params,
        "deadline_ms": deadline_ms(timeout),
    }
    try:
        payload = json.dumps(
            request, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
        return encode_frame(payload, max_frame_bytes=CONTROL_MAX_REQUEST_BYTES)
    except FrameTooLarge as exc:
        raise RequestInvalid(f"{method}: {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise RequestInvalid(f"{method}: params are not encodable: {exc}") from exc


class _Wire:
    """One blocking connection: send a request, read frames until its reply."""

    def __init__(self, sock: socket.socket, where: str) -> None:
        self._sock = sock
        self._where = where
        self._decoder = FrameDecoder(max_frame_bytes=CONTROL_MAX_RESPONSE_BYTES)
        self._frames: list[Reply] = []

    def exchange(self, frame: bytes, rid: int, budget: float) -> Any:
        """Send ``frame`` and return the result of the reply to ``rid``.

        Raises:
            as :func:`call_once`.
        """
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            # The daemon may have refused us and closed before we finished sending: its
            # error frame can still be waiting to be read (as the blocking Client does).
            raise (
                self._pending_refusal() or foreign(exc, connecting=False, where=self._where)
            ) from exc
        deadline = time.monotonic() + budget + CLIENT_GRACE_S
        while not self._frames:
            self._recv(rid, deadline)
        reply = self._frames.pop(0)
        if reply.id == 0 and reply.error is not None:
            raise RemoteError(reply.error.code, reply.error.message, reply.error.data)
        if reply.is_event:
            raise DaemonProtocolError(f"an event for unary request {reply.id}")
        if reply.id != rid:
            raise DaemonProtocolError(f"a reply for unknown request {reply.id}")
        if reply.error is not None:
            raise RemoteError(reply.error.code, reply.error.message, reply.error.data)
        return reply.result

    def _recv(self, rid: int, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ClientTimeout(f"no reply from gloved to request {rid} in time")
        self._sock.settimeout(remaining)
        try:
            chunk = self._sock.recv(RECV_BYTES)
        except TimeoutError:
            raise ClientTimeout(f"no reply from gloved to request {rid} in time") from None
        except OSError as exc:
            raise foreign(exc, connecting=False, where=self._where) from exc
        if not chunk:
            where = " inside a reply" if self._decoder.pending else ""
            raise ConnectionLost(f"gloved closed the connection{where} before answering")
        self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        self._decoder.feed(chunk)
        try:
            while (payload := self._decoder.next_frame()) is not None:
                self._frames.append(decode_reply(payload))
        except ProtocolError as exc:
            raise DaemonProtocolError(f"gloved sent an invalid reply: {exc}") from exc

    def _pending_refusal(self) -> ControlError | None:
        with contextlib.suppress(OSError, ControlError):
            self._sock.settimeout(REFUSAL_READ_S)
            while chunk := self._sock.recv(RECV_BYTES):
                self._feed(chunk)
                for reply in self._frames:
                    if reply.id == 0 and reply.error is not None:
                        return RemoteError(reply.error.code, reply.error.message, reply.error.data)
        return None
