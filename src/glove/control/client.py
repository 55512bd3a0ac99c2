"""A small blocking client for the control socket (the CLI's side of the protocol)."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path
from typing import Any, Final

from glove.control.errors import DaemonUnavailable, RemoteError
from glove.protocol import (
    CONTROL_MAX_FRAME_BYTES,
    FrameDecoder,
    Request,
    decode_response,
    encode,
    encode_frame,
)

CLIENT_DEADLINE_S: Final = 10.0
_ids = itertools.count(1)


def call(
    socket_path: Path,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    timeout: float = CLIENT_DEADLINE_S,
) -> Any:
    """Send one request and return its result.

    Raises:
        DaemonUnavailable: no daemon listens on ``socket_path``.
        RemoteError: the daemon answered with a typed error.
        ProtocolError: the daemon's reply was not a valid frame.
    """
    request = Request(id=next(_ids), method=method, params=params or {})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(socket_path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonUnavailable(
                f"no gloved listens on {socket_path}; start it with `gloved`"
            ) from exc
        sock.sendall(encode_frame(encode(request), max_frame_bytes=CONTROL_MAX_FRAME_BYTES))
        decoder = FrameDecoder(max_frame_bytes=CONTROL_MAX_FRAME_BYTES)
        while (payload := decoder.next_frame()) is None:
            chunk = sock.recv(65536)
            if not chunk:
                decoder.close()
                raise DaemonUnavailable("gloved closed the connection without replying")
            decoder.feed(chunk)
    response = decode_response(payload)
    if response.error is not None:
        raise RemoteError(response.error.code, response.error.message)
    return response.result
