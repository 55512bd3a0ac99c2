"""HTTP/1.1 request heads and body framing for a forward proxy (sans-IO).

Bytes in, a :class:`RequestHead` out, or :class:`~glove.egress.errors.HttpHeadError`
(with the status the proxy answers: 400, 414, 431, 501 or 505). Like h11, every buffer has
a named cap checked *before* it grows, and the parser is exercised whole and one byte at a
time (``tests/egress/test_http.py``) and by ``fuzz/egress_http_head.py``.

Strict where a lenient parser would let two parties disagree about where a request ends
(request smuggling): lines end in CRLF only (a bare CR or LF is an error), no whitespace
before a header's colon, no obsolete line folding, no control characters, ``Content-Length``
and ``Transfer-Encoding`` never together, ``Transfer-Encoding`` only ``chunked``, every
``Content-Length`` value identical. A proxy that rejects these loses nothing a correct
client sends.

The proxy serves one request per client connection (it forwards ``Connection: close``);
:class:`ChunkedFramer` and the ``Content-Length`` count tell it where the request body ends,
so bytes after it (a pipelined second request that a read-only rule never saw) are never
forwarded.
"""

from __future__ import annotations

import re
from typing import Final, Literal

import msgspec

from glove.egress.errors import HttpHeadError

#: Largest request head (request line and headers, the final CRLF included).
MAX_HEAD_BYTES: Final = 16 * 1024
#: Most header fields in one head.
MAX_HEADERS: Final = 128
#: Longest request target.
MAX_TARGET_BYTES: Final = 8 * 1024
#: Longest method name.
MAX_METHOD_BYTES: Final = 32
#: Longest chunk-size line (size, extensions and CRLF) in a chunked body.
MAX_CHUNK_LINE_BYTES: Final = 4 * 1024
#: Largest trailer section of a chunked body.
MAX_TRAILER_BYTES: Final = 16 * 1024
#: Most hex digits in a chunk size (2**60 bytes is plenty).
MAX_CHUNK_SIZE_DIGITS: Final = 15
#: Most decimal digits in a Content-Length.
MAX_LENGTH_DIGITS: Final = 18
#: Header fields and bytes a request from the sandbox leaves for the proxy's own ``Host`` and
#: ``Connection`` lines, so the head it forwards always fits :data:`MAX_HEAD_BYTES` and
#: :data:`MAX_HEADERS` too (the fuzz target checks that a forwarded head parses back).
FORWARD_RESERVED_HEADERS: Final = 2
FORWARD_RESERVED_BYTES: Final = 64
#: The caps :class:`RequestHeadParser` applies to what the sandbox sends.
MAX_REQUEST_HEAD_BYTES: Final = MAX_HEAD_BYTES - FORWARD_RESERVED_BYTES
MAX_REQUEST_HEADERS: Final = MAX_HEADERS - FORWARD_RESERVED_HEADERS
#: Leading empty lines tolerated before the request line (RFC 9112 section 2.2).
MAX_LEADING_EMPTY_LINES: Final = 4

HEAD_END: Final = b"\r\n\r\n"
VERSIONS: Final = frozenset({"HTTP/1.1", "HTTP/1.0"})
#: Headers that describe one connection (RFC 9110 section 7.6.1) and never travel further.
HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "upgrade",
    }
)
CONNECT_ESTABLISHED: Final = b"HTTP/1.1 200 Connection established\r\n\r\n"

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_FIELD_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*\Z")
_TARGET = re.compile(rb"[\x21-\x7e]+\Z")
_HEX = re.compile(rb"[0-9A-Fa-f]+\Z")
_REASONS: Final = {
    400: "Bad Request",
    403: "Forbidden",
    414: "URI Too Long",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    502: "Bad Gateway",
    504: "Gateway Timeout",
    505: "HTTP Version Not Supported",
}


class RequestHead(msgspec.Struct, frozen=True):
    """A parsed request head.

    Attributes:
        method: the method token, as sent (methods are case-sensitive).
        target: the request target, as sent.
        version: ``HTTP/1.1`` or ``HTTP/1.0``.
        headers: ``(name, value)`` pairs in order; names as sent, values without the
            optional whitespace around them.
    """

    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]

    def values(self, name: str) -> list[str]:
        """Every value of header ``name`` (case-insensitive), in order."""
        lowered = name.lower()
        return [value for key, value in self.headers if key.lower() == lowered]


class Target(msgspec.Struct, frozen=True):
    """Where a proxy request goes: ``host`` (brackets stripped), ``port``, origin-form path."""

    host: str
    port: int
    path: str


class RequestHeadParser:
    """Accumulates bytes until a complete request head; never holds more than the cap."""

    def __init__(self, *, max_head_bytes: int = MAX_REQUEST_HEAD_BYTES) -> None:
        """Start empty; ``max_head_bytes`` caps the head (tests lower it)."""
        self._max = min(max_head_bytes, MAX_REQUEST_HEAD_BYTES)
        self._buffer = bytearray()
        self.trailing = b""
        """Bytes received after the head (a body's start, or tunnel data)."""

    def feed(self, data: bytes) -> RequestHead | None:
        """Add ``data``; return the head once it is complete, else None (send more).

        Raises:
            HttpHeadError: the head is malformed or larger than the cap.
        """
        start = max(0, len(self._buffer) - len(HEAD_END) + 1)
        room = self._max - len(self._buffer)
        self._buffer += data[:room]  # the cap is checked before the buffer grows
        end = self._buffer.find(HEAD_END, start)
        if end < 0:
            if len(self._buffer) >= self._max:
                raise HttpHeadError(f"request head larger than {self._max} bytes", status=431)
            _precheck(self._buffer)
            return None
        cut = end + len(HEAD_END)
        self.trailing = bytes(self._buffer[cut:]) + data[room:]
        head = bytes(self._buffer[:cut])
        self._buffer = bytearray()
        return parse_head(head, max_headers=MAX_REQUEST_HEADERS, max_bytes=self._max)


def _precheck(partial: bytearray) -> None:
    """Fail early on a request line that can never become valid (a non-HTTP client)."""
    line = bytes(partial[: MAX_METHOD_BYTES + 2 * MAX_LEADING_EMPTY_LINES + 2])
    while line.startswith(b"\r\n"):
        line = line[2:]
    method, space, _ = line.partition(b" ")
    if not space and method.endswith(b"\r"):
        method = method[:-1]  # a CRLF may be arriving
    if len(method) > MAX_METHOD_BYTES or (method and not _TOKEN.match(method)):
        raise HttpHeadError("bad method")


def parse_head(
    head: bytes, *, max_headers: int = MAX_HEADERS, max_bytes: int = MAX_HEAD_BYTES
) -> RequestHead:
    """Parse one complete head, CRLFCRLF included.

    Raises:
        HttpHeadError: anything RFC 9112 does not allow here, or a cap is exceeded.
    """
    if len(head) > max_bytes:
        raise HttpHeadError(f"request head larger than {max_bytes} bytes", status=431)
    if not head.endswith(HEAD_END):
        raise HttpHeadError("request head does not end in CRLF CRLF")
    lines = head[: -len(HEAD_END)].split(b"\r\n")
    skipped = 0
    while lines and lines[0] == b"":
        skipped += 1
        lines.pop(0)
    if skipped > MAX_LEADING_EMPTY_LINES or not lines:
        raise HttpHeadError("no request line")
    for line in lines:
        if b"\r" in line or b"\n" in line:
            raise HttpHeadError("a line ends in a bare CR or LF")
    method, target, version = _request_line(lines[0])
    if len(lines) - 1 > max_headers:
        raise HttpHeadError(f"more than {max_headers} header fields", status=431)
    headers = tuple(_field(line) for line in lines[1:])
    return RequestHead(method, target, version, headers)


def _request_line(line: bytes) -> tuple[str, str, str]:
    parts = line.split(b" ")
    if len(parts) != 3:
        raise HttpHeadError("the request line is not METHOD SP TARGET SP VERSION")
    method, target, version = parts
    if not method or len(method) > MAX_METHOD_BYTES or not _TOKEN.match(method):
        raise HttpHeadError("bad method")
    if len(target) > MAX_TARGET_BYTES:
        raise HttpHeadError(f"request target longer than {MAX_TARGET_BYTES} bytes", status=414)
    if not _TARGET.match(target):
        raise HttpHeadError("bad request target")
    text = version.decode("ascii", "replace")
    if text not in VERSIONS:
        status = 505 if text.startswith("HTTP/") else 400
        raise HttpHeadError("only HTTP/1.1 and HTTP/1.0 are spoken here", status=status)
    return method.decode("ascii"), target.decode("ascii"), text


def _field(line: bytes) -> tuple[str, str]:
    if line[:1] in (b" ", b"\t"):
        raise HttpHeadError("obsolete line folding is not accepted")
    name, colon, value = line.partition(b":")
    if not colon or not name or not _TOKEN.match(name):
        raise HttpHeadError("bad header field name (or whitespace before the colon)")
    value = value.strip(b" \t")
    if not _FIELD_VALUE.match(value):
        raise HttpHeadError("control character in a header field value")
    return name.decode("ascii"), value.decode("latin-1")


def parse_authority(text: str, *, default_port: int | None) -> tuple[str, int]:
    """Split ``host[:port]`` (IPv6 in brackets); return the host without brackets and port.

    Raises:
        HttpHeadError: userinfo, an empty host, a bad or missing port.
    """
    if "@" in text:
        raise HttpHeadError("credentials in the request target are refused")
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise HttpHeadError("unclosed '[' in the authority")
        host, rest = text[1:close], text[close + 1 :]
        if rest and not rest.startswith(":"):
            raise HttpHeadError("bad authority")
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_part = text.rpartition(":")
        if not colon:
            host, port_text = text, None
        else:
            port_text = port_part
    if not host:
        raise HttpHeadError("empty host")
    if port_text is None:
        if default_port is None:
            raise HttpHeadError("the authority needs a port")
        return host, default_port
    if not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        raise HttpHeadError("bad port")
    port = int(port_text, 10)
    if not 1 <= port <= 65535:
        raise HttpHeadError("bad port")
    return host, port


def proxy_target(head: RequestHead) -> Target:
    """Where a proxy request goes: CONNECT's authority or an absolute ``http://`` URI.

    Raises:
        HttpHeadError: origin-form (not a proxy request), ``https://`` without CONNECT,
            another scheme, a fragment, or a bad authority.
    """
    if head.method == "CONNECT":
        host, port = parse_authority(head.target, default_port=None)
        return Target(host, port, "")
    scheme, sep, rest = head.target.partition("://")
    if not sep:
        raise HttpHeadError("not a proxy request (the target must be absolute: http://...)")
    scheme = scheme.lower()
    if scheme == "https":
        raise HttpHeadError("use CONNECT for https:// (this proxy does not terminate TLS)")
    if scheme != "http":
        raise HttpHeadError("only http:// requests and CONNECT tunnels are proxied", status=501)
    if "#" in rest:
        raise HttpHeadError("a fragment in the request target")
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    host, port = parse_authority(authority, default_port=80)
    if not path.startswith("/"):
        path = "/" + path
    return Target(host, port, path)


Framing = (
    tuple[Literal["none"], int] | tuple[Literal["length"], int] | tuple[Literal["chunked"], int]
)


def body_framing(head: RequestHead) -> Framing:
    """How the request body is delimited: ``("none", 0)``, ``("length", n)``, ``("chunked", 0)``.

    Raises:
        HttpHeadError: both framings, a transfer coding other than ``chunked``, chunked on
            HTTP/1.0, or disagreeing or malformed ``Content-Length`` values.
    """
    codings = [c.strip().lower() for v in head.values("transfer-encoding") for c in v.split(",")]
    lengths = [c.strip() for v in head.values("content-length") for c in v.split(",")]
    if codings and lengths:
        raise HttpHeadError("both Content-Length and Transfer-Encoding")
    if codings:
        if codings != ["chunked"]:
            raise HttpHeadError("only the chunked transfer coding is accepted", status=501)
        if head.version == "HTTP/1.0":
            raise HttpHeadError("chunked on HTTP/1.0")
        return ("chunked", 0)
    if lengths:
        first = lengths[0]
        if any(v != first for v in lengths) or not first.isascii() or not first.isdigit():
            raise HttpHeadError("bad Content-Length")
        if len(first) > MAX_LENGTH_DIGITS:
            raise HttpHeadError("Content-Length too large")
        return ("length", int(first, 10))
    return ("none", 0)


def forward_head(head: RequestHead, target: Target) -> bytes:
    """The head to send upstream: origin-form, one ``Host``, no hop-by-hop headers, close.

    The ``Host`` header is rewritten to the target's authority (RFC 9112 section 3.2.2), so
    a request cannot name one host in its URI (the one the rules checked) and another in
    ``Host``.
    """
    listed = {
        token.strip().lower() for value in head.values("connection") for token in value.split(",")
    }
    drop = HOP_BY_HOP | listed | {"host"}
    host = f"[{target.host}]" if ":" in target.host else target.host
    authority = host if target.port == 80 else f"{host}:{target.port}"
    lines = [f"{head.method} {target.path} {head.version}", f"Host: {authority}"]
    lines.extend(f"{name}: {value}" for name, value in head.headers if name.lower() not in drop)
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def error_response(status: int, message: str, *, rule: str | None = None) -> bytes:
    """A short plain-text reply that closes the connection; ``X-Glove-Egress`` names the rule.

    ``message`` must be one of the proxy's fixed texts (with the host and port at most).
    """
    body = f"glove egress: {message}\n".encode("latin-1", "replace")
    tag = "denied" if status == 403 else "error"
    if rule is not None:
        tag += f'; rule="{rule}"'
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\n"
        f"X-Glove-Egress: {tag}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1", "replace") + body


class ChunkedFramer:
    """Finds the end of a chunked body without changing it: bytes pass through verbatim.

    :meth:`feed` returns how many of the given bytes belong to the body; once :attr:`done`
    is true, everything after the body's last byte is not part of this request.
    """

    def __init__(self) -> None:
        """Start before the first chunk-size line."""
        self._state: Literal["size", "data", "data-crlf", "trailer"] = "size"
        self._line = bytearray()
        self._remaining = 0
        self._trailer_bytes = 0
        self.done = False

    def feed(self, data: bytes) -> int:
        """Consume ``data``; return how many bytes of it are body bytes.

        Raises:
            HttpHeadError: a malformed chunk line, a missing CRLF after chunk data, or a
                line or trailer section over its cap.
        """
        used = 0
        view = memoryview(data)
        while used < len(view) and not self.done:
            if self._state == "data":
                take = min(self._remaining, len(view) - used)
                used += take
                self._remaining -= take
                if self._remaining == 0:
                    self._state = "data-crlf"
                continue
            newline = data.find(b"\n", used)
            stop = len(data) if newline < 0 else newline + 1
            cap = MAX_CHUNK_LINE_BYTES if self._state != "trailer" else MAX_TRAILER_BYTES
            if len(self._line) + (stop - used) > cap:
                raise HttpHeadError("chunk line or trailer section over its cap")
            self._line += view[used:stop]
            used = stop
            if newline >= 0:
                self._line_done(bytes(self._line))
                self._line.clear()
        return used

    def _line_done(self, line: bytes) -> None:
        if not line.endswith(b"\r\n") or b"\r" in line[:-2]:
            raise HttpHeadError("a chunk line does not end in CRLF")
        body = line[:-2]
        if self._state == "data-crlf":
            if body:
                raise HttpHeadError("chunk data longer than its size")
            self._state = "size"
        elif self._state == "size":
            size_text = body.split(b";", 1)[0]
            if not size_text or len(size_text) > MAX_CHUNK_SIZE_DIGITS or not _HEX.match(size_text):
                raise HttpHeadError("bad chunk size")
            self._remaining = int(size_text, 16)
            self._state = "data" if self._remaining else "trailer"
        else:  # trailer section: field lines until an empty line
            self._trailer_bytes += len(line)
            if not body:
                self.done = True
            elif self._trailer_bytes > MAX_TRAILER_BYTES:
                raise HttpHeadError("trailer section over its cap")
            else:
                _field(body)
