"""Fuzz target: the HTTP request head (and body framing) of the Streamable HTTP front.

Contract under test: bytes fed in fuzzer-chosen chunks through ``HeadReader`` (bounded),
``parse_request_head``, ``check_request``, ``body_length`` and ``ChunkedDecoder``, and the
same bytes through ``SseParser``, either produce well-formed values or raise ``HttpError``
with a 4xx/5xx status; nothing else. Parsed header names are lowercase tokens and values
hold no line break.
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
        from glove.mcp._http import (
            MAX_HEAD_BYTES,
            ChunkedDecoder,
            HeadReader,
            SseParser,
            body_length,
            parse_request_head,
        )
        from glove.mcp._http_checks import HttpOptions, check_request
        from glove.mcp.errors import HttpError
else:
    from glove.mcp._http import (
        MAX_HEAD_BYTES,
        ChunkedDecoder,
        HeadReader,
        SseParser,
        body_length,
        parse_request_head,
    )
    from glove.mcp._http_checks import HttpOptions, check_request
    from glove.mcp.errors import HttpError

MAX_BODY_BYTES = 8192
OPTIONS = (HttpOptions(), HttpOptions(token="secret-token", allowed_hosts=("example.test",)))


def _head(data: bytes, step: int) -> None:
    reader = HeadReader()
    found = None
    for start in range(0, len(data), step):
        found = reader.feed(data[start : start + step])
        if found is not None:
            break
    assert reader.pending <= MAX_HEAD_BYTES + step
    if found is None:
        return
    head_bytes, rest = found
    head = parse_request_head(head_bytes)
    for name, value in head.headers:
        assert name == name.lower()
        assert "\r" not in value
        assert "\n" not in value
    for options in OPTIONS:
        try:
            check_request(head, options)
        except HttpError as exc:
            assert exc.status in (400, 401, 403, 404), exc.status
    length = body_length(head.headers, MAX_BODY_BYTES)
    if length is None:
        decoder = ChunkedDecoder(MAX_BODY_BYTES)
        body, _ = decoder.feed(rest)
        assert len(body) <= MAX_BODY_BYTES
    else:
        assert 0 <= length <= MAX_BODY_BYTES


def one_input(data: bytes) -> None:
    """Parse ``data`` (its first byte picks the chunk size) as a request, then as SSE."""
    if not data:
        return
    step = data[0] % 29 + 1
    try:
        _head(data[1:], step)
    except HttpError as exc:
        assert 400 <= exc.status < 600, exc.status
    try:
        for event in SseParser().feed(data[1:]):
            assert isinstance(event.data, str)
    except HttpError as exc:
        assert exc.status == 502


if __name__ == "__main__":
    run("http_head", one_input)
