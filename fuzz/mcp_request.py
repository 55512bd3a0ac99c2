"""Fuzz target: the agent-facing request decoder (stdio framing and JSON-RPC decoding).

Contract under test: bytes cut into chunks at fuzzer-chosen points go through
``LineSplitter`` (bounded) and ``decode_message``; each frame becomes a typed message or a
``MalformedMessage`` carrying -32700 or -32600, nothing else. A request's ``cursor`` goes
through ``decode_cursor``, which returns an offset or refuses with -32602. A decoded
request re-encodes and decodes to the same method and id.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp_common import run

try:
    import atheris  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - replay mode works without it
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["glove"]):
        from glove.mcp._contracts import Refusal
        from glove.mcp._features import decode_cursor
        from glove.mcp._framing import OVERSIZED, LineSplitter, decode_message, encode_request
        from glove.mcp._messages import ErrorResponse, Notification, Request, Response
        from glove.mcp.errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, FramingError
else:
    from glove.mcp._contracts import Refusal
    from glove.mcp._features import decode_cursor
    from glove.mcp._framing import OVERSIZED, LineSplitter, decode_message, encode_request
    from glove.mcp._messages import ErrorResponse, Notification, Request, Response
    from glove.mcp.errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, FramingError

MAX_FRAME_BYTES = 4096
MAX_FRAMES_PER_INPUT = 64


def _check(frame: bytes) -> None:
    try:
        message = decode_message(frame)
    except FramingError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST), exc.code
        return
    assert isinstance(message, Request | Notification | Response | ErrorResponse)
    if isinstance(message, Request):
        again = decode_message(encode_request(message.id, message.method, message.params))
        assert isinstance(again, Request)
        assert (again.id, again.method) == (message.id, message.method)
        cursor = (message.params or {}).get("cursor")
        if cursor is not None:
            try:
                offset = decode_cursor(message.method, cursor)
            except Refusal as refusal:
                assert refusal.code == INVALID_PARAMS
            else:
                assert offset >= 0


def one_input(data: bytes) -> None:
    """Split ``data`` (its first byte picks the chunk size) into frames and decode each."""
    if not data:
        return
    step = data[0] % 23 + 1
    splitter = LineSplitter(MAX_FRAME_BYTES)
    frames = 0
    stream = data[1:] + b"\n"
    for start in range(0, len(stream), step):
        for frame in splitter.feed(stream[start : start + step]):
            frames += 1
            if frames > MAX_FRAMES_PER_INPUT:
                return
            if frame is OVERSIZED:
                continue
            assert isinstance(frame, bytes)
            assert len(frame) <= MAX_FRAME_BYTES
            _check(frame)
    assert splitter.pending_bytes <= MAX_FRAME_BYTES


if __name__ == "__main__":
    run("request", one_input)
