"""Sans-IO HTTP/1.1 for Streamable HTTP: message heads, bodies, and SSE events.

Bytes in, typed values out; nothing here touches a socket. Every buffer has a named cap
checked before it grows (the way h11 does it):

* :class:`HeadReader` collects a message head up to its blank line, at most
  :data:`MAX_HEAD_BYTES`; :func:`parse_request_head` and :func:`parse_response_head`
  turn it into a :class:`RequestHead` or :class:`ResponseHead` or raise
  :class:`~glove.mcp.errors.HttpError` carrying the status to answer with;
* :class:`ChunkedDecoder` undoes ``Transfer-Encoding: chunked``, bounded in total size;
* :class:`SseParser` cuts a ``text/event-stream`` into :class:`SseEvent` values, each at
  most :data:`MAX_SSE_EVENT_BYTES`; :func:`encode_sse` writes one.

Only what MCP's transport needs is accepted: origin-form request targets, no obsolete
line folding, no ``Transfer-Encoding`` other than ``chunked``, and never both it and
``Content-Length`` (request smuggling).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from glove.mcp.errors import HttpError

MAX_HEAD_BYTES: Final = 16 * 1024
MAX_HEADERS: Final = 64
MAX_TARGET_CHARS: Final = 2048
MAX_CHUNK_LINE_BYTES: Final = 1024
MAX_SSE_EVENT_BYTES: Final = 16 * 1024 * 1024
HEAD_END: Final = b"\r\n\r\n"
METHODS: Final = frozenset({"GET", "POST", "DELETE", "OPTIONS", "HEAD", "PUT", "PATCH"})

_TOKEN: Final = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VERSION: Final = re.compile(rb"HTTP/1\.[01]")
_FIELD_VALUE: Final = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
_TARGET: Final = re.compile(rb"/[\x21-\x7e]*")
_STATUS: Final = re.compile(rb"[1-5][0-9][0-9]")
#: Headers that must not appear twice (a second one could disagree with the first).
_SINGLE: Final = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "authorization",
        "origin",
        "mcp-session-id",
        "mcp-protocol-version",
        "transfer-encoding",
        "last-event-id",
    }
)


@dataclass(frozen=True, slots=True)
class RequestHead:
    """A request line and its headers (names lowercased, values stripped)."""

    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (lowercase), or ``None``."""
        return _find(self.headers, name)

    @property
    def path(self) -> str:
        """The target without its query."""
        return self.target.partition("?")[0]


@dataclass(frozen=True, slots=True)
class ResponseHead:
    """A status line and its headers (names lowercased, values stripped)."""

    status: int
    reason: str
    version: str
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (lowercase), or ``None``."""
        return _find(self.headers, name)


def _find(headers: tuple[tuple[str, str], ...], name: str) -> str | None:
    for key, value in headers:
        if key == name:
            return value
    return None


class HeadReader:
    """Collect bytes until a message head is complete (``\\r\\n\\r\\n``)."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> tuple[bytes, bytes] | None:
        """Add ``data``; return ``(head, rest)`` once the head is complete, else ``None``.

        Raises:
            HttpError: the head grew past :data:`MAX_HEAD_BYTES` (431).
        """
        start = max(0, len(self._buffer) - 3)
        self._buffer += data
        end = self._buffer.find(HEAD_END, start)
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise HttpError(431, "request head too large")
            return None
        if end > MAX_HEAD_BYTES:
            raise HttpError(431, "request head too large")
        head = bytes(self._buffer[:end])
        rest = bytes(self._buffer[end + len(HEAD_END) :])
        self._buffer.clear()
        return head, rest

    @property
    def pending(self) -> int:
        """Bytes of an unfinished head held."""
        return len(self._buffer)


def _headers(lines: list[bytes]) -> tuple[tuple[str, str], ...]:
    if len(lines) > MAX_HEADERS:
        raise HttpError(431, f"more than {MAX_HEADERS} headers")
    headers: list[tuple[str, str]] = []
    seen: set[str] = set()
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            # Also refuses obsolete line folding (a line starting with a space).
            raise HttpError(400, "malformed header line")
        value = value.strip(b" \t")
        if not _FIELD_VALUE.fullmatch(value):
            raise HttpError(400, "header value holds a control character")
        key = name.decode("ascii").lower()
        if key in _SINGLE and key in seen:
            raise HttpError(400, f"duplicate {key} header")
        seen.add(key)
        headers.append((key, value.decode("latin-1")))
    return tuple(headers)


def parse_request_head(head: bytes) -> RequestHead:
    """Parse a request head (without its blank line).

    Raises:
        HttpError: a malformed request line (400), an unsupported version (505), a target
            that is not origin-form (400), or bad headers (400, 431).
    """
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if not _TOKEN.fullmatch(method):
        raise HttpError(400, "malformed method")
    if not _VERSION.fullmatch(version):
        raise HttpError(505, "only HTTP/1.0 and HTTP/1.1 are served")
    if len(target) > MAX_TARGET_CHARS or not _TARGET.fullmatch(target):
        raise HttpError(400, "the request target must be a path")
    headers = _headers(lines[1:])
    request = RequestHead(
        method.decode("ascii"), target.decode("ascii"), version.decode("ascii"), headers
    )
    if request.version == "HTTP/1.1" and request.header("host") is None:
        raise HttpError(400, "HTTP/1.1 needs a Host header")
    return request


def parse_response_head(head: bytes) -> ResponseHead:
    """Parse a response head (without its blank line).

    Raises:
        HttpError: a malformed status line or headers (status 502: the peer is at fault).
    """
    lines = head.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    status, _, reason = rest.partition(b" ")
    if not _VERSION.fullmatch(version) or not _STATUS.fullmatch(status):
        raise HttpError(502, "malformed status line")
    try:
        headers = _headers(lines[1:])
    except HttpError as exc:
        raise HttpError(502, f"malformed response: {exc}") from exc
    return ResponseHead(int(status), reason.decode("latin-1"), version.decode("ascii"), headers)


def body_length(headers: tuple[tuple[str, str], ...], max_bytes: int) -> int | None:
    """The body's length from ``Content-Length``, ``None`` for a chunked body.

    Raises:
        HttpError: both or a bad ``Content-Length`` (400), a transfer coding other than
            ``chunked`` (501), a body over ``max_bytes`` (413).
    """
    length = _find(headers, "content-length")
    coding = _find(headers, "transfer-encoding")
    if coding is not None:
        if length is not None:
            raise HttpError(400, "both Content-Length and Transfer-Encoding")
        if coding.strip().lower() != "chunked":
            raise HttpError(501, "only the chunked transfer coding is supported")
        return None
    if length is None:
        return 0
    if not (length.isascii() and length.isdigit()) or len(length) > 12:
        raise HttpError(400, "malformed Content-Length")
    size = int(length)
    if size > max_bytes:
        raise HttpError(413, f"body over {max_bytes} bytes")
    return size


class ChunkedDecoder:
    """Undo ``Transfer-Encoding: chunked`` incrementally, at most ``max_bytes`` in total."""

    __slots__ = ("_buffer", "_done", "_left", "_max", "_state", "_total")

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._buffer = bytearray()
        self._state = "size"  # size -> data -> crlf -> size ... -> trailer -> done
        self._left = 0
        self._total = 0
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the last chunk and the trailer have been read."""
        return self._done

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """Consume ``data``; return ``(decoded, rest)`` where ``rest`` follows the body.

        Raises:
            HttpError: a malformed chunk (400) or a body over the bound (413).
        """
        self._buffer += data
        out = bytearray()
        steps = {
            "size": self._size_line,
            "data": lambda: self._data(out),
            "crlf": self._crlf,
            "trailer": self._trailer,
        }
        while not self._done and steps[self._state]():
            pass
        rest = bytes(self._buffer) if self._done else b""
        if self._done:
            self._buffer.clear()
        return bytes(out), rest

    def _size_line(self) -> bool:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > MAX_CHUNK_LINE_BYTES:
                raise HttpError(400, "chunk size line too long")
            return False
        line = bytes(self._buffer[:end]).partition(b";")[0].strip()
        del self._buffer[: end + 2]
        if not line or len(line) > 16 or not re.fullmatch(rb"[0-9A-Fa-f]+", line):
            raise HttpError(400, "malformed chunk size")
        self._left = int(line, 16)
        if self._total + self._left > self._max:
            raise HttpError(413, f"body over {self._max} bytes")
        self._state = "data" if self._left else "trailer"
        return True

    def _data(self, out: bytearray) -> bool:
        take = min(self._left, len(self._buffer))
        if not take:
            return False
        out += self._buffer[:take]
        del self._buffer[:take]
        self._left -= take
        self._total += take
        if not self._left:
            self._state = "crlf"
        return True

    def _crlf(self) -> bool:
        if len(self._buffer) < 2:
            return False
        if self._buffer[:2] != b"\r\n":
            raise HttpError(400, "a chunk must end with CRLF")
        del self._buffer[:2]
        self._state = "size"
        return True

    def _trailer(self) -> bool:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise HttpError(431, "chunked trailer too large")
            return False
        del self._buffer[: end + 2]
        if end == 0:
            self._done = True
        return True


def encode_chunk(data: bytes) -> bytes:
    """One chunk of a chunked body (an empty ``data`` is the last chunk)."""
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b"0\r\n\r\n"


def encode_response_head(status: int, reason: str, headers: list[tuple[str, str]]) -> bytes:
    """A response head, blank line included (header values must hold no line breaks)."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One server-sent event: its ``data`` lines joined, its ``id``, ``event`` and ``retry``."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


def encode_sse(data: bytes, *, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    """One ``message`` event carrying ``data`` (a JSON document: it holds no raw newline)."""
    out = b""
    if event_id is not None:
        out += b"id: " + event_id.encode() + b"\n"
    if retry_ms is not None:
        out += b"retry: %d\n" % retry_ms
    if data:
        out += b"event: message\n"
    return out + b"data: " + data.rstrip(b"\n") + b"\n\n"


class SseParser:
    """Cut a ``text/event-stream`` into events (the WHATWG rules MCP needs)."""

    __slots__ = ("_buffer", "_data", "_event", "_id", "_retry", "_size")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._size = 0

    def feed(self, data: bytes) -> list[SseEvent]:
        """Consume ``data``; return the events it completed.

        Raises:
            HttpError: one event grew past :data:`MAX_SSE_EVENT_BYTES` (502).
        """
        self._buffer += data
        events: list[SseEvent] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > MAX_SSE_EVENT_BYTES:
                    raise HttpError(502, "server-sent event too large")
                return events
            line = bytes(self._buffer[:end]).rstrip(b"\r").decode("utf-8", "replace")
            del self._buffer[: end + 1]
            self._size += len(line)
            if self._size > MAX_SSE_EVENT_BYTES:
                raise HttpError(502, "server-sent event too large")
            if not line:
                if self._data:
                    events.append(
                        SseEvent(
                            "\n".join(self._data), self._event or "message", self._id, self._retry
                        )
                    )
                self._data, self._event, self._retry, self._size = [], "", None, 0
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id" and "\0" not in value:
                self._id = value
            elif name == "retry" and value.isascii() and value.isdigit() and len(value) < 10:
                self._retry = int(value)
