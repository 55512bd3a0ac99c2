"""HTTP/1.1 request heads and body framing for a forward proxy (sans-IO).

Bytes in, a :class:`RequestHead` out, or :class:`~glove.egress.errors.HttpHeadError`
(with the status the proxy answers: 400, 414, 431, 501 or 505). Like h11, every buffer has
a named cap checked *before* it grows, and the parser is exercised whole and one byte at a
time (``tests/egress/test_http.py``) and by ``fuzz/egress_http_head.py``.

Strict where a lenient parser would let two parties disagree about where a request ends
(request smuggling): lines end in CRLF only (a bare CR or LF is an error, found as soon as
it arrives), no whitespace before a header's colon, no obsolete line folding, no control
characters, ``Content-Length`` and ``Transfer-Encoding`` never together,
``Transfer-Encoding`` only ``chunked``, every ``Content-Length`` value identical. A proxy
that rejects these loses nothing a correct client sends.

The proxy serves one request per client connection (it forwards ``Connection: close``);
:class:`ChunkedFramer` and the ``Content-Length`` count tell it where the request body ends,
so bytes after it (a pipelined second request that a read-only rule never saw) are never
forwarded. What the forwarded head holds is decided in one place,
:func:`glove.egress._rewrite.rewrite_request`.
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
#: Most hex digits in a chunk size (leading zeros included).
MAX_CHUNK_SIZE_DIGITS: Final = 15
#: Largest chunk (bytes). A size of 2**31 or more is where parsers that keep sizes in 32
#: bits read a different length than the proxy counted (a smuggling classic); clients
#: send chunks of kilobytes.
MAX_CHUNK_BYTES: Final = (1 << 31) - 1
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
#: ``Upgrade`` and ``HTTP2-Settings`` never reach the origin, so it cannot switch the
#: connection to another protocol (h2c) behind the proxy's back.
HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "upgrade",
        "http2-settings",
    }
)
#: Headers the forwarded message's framing and routing depend on: the proxy writes them
#: itself from what it judged, and hop-by-hop handling may never remove one.
PROTECTED: Final = frozenset({"content-length", "transfer-encoding", "host"})
#: Fields a chunked body's trailer section may not carry (RFC 9110 section 6.5.1: framing,
#: routing, connection options and how the content is processed are never trailers).
TRAILER_FORBIDDEN: Final = (
    PROTECTED
    | HOP_BY_HOP
    | frozenset({"trailer", "content-encoding", "content-range", "content-type"})
)
CONNECT_ESTABLISHED: Final = b"HTTP/1.1 200 Connection established\r\n\r\n"

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_FIELD_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*\Z")
_TARGET = re.compile(rb"[\x21-\x7e]+\Z")
_HEX = re.compile(rb"[0-9A-Fa-f]+\Z")
_BARE_CR_OR_LF = re.compile(rb"\r(?!\n)|(?<!\r)\n")
_TCHARS = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = rb'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"'
#: ``size *( ";" name [ "=" ( token / quoted-string ) ] )`` with no whitespace (RFC 9112
#: section 7.1.1 allows BWS; no client sends it, and parsers disagree about it).
_CHUNK_SIZE_LINE = re.compile(
    rb"([0-9A-Fa-f]+)(?:;" + _TCHARS + rb"(?:=(?:" + _TCHARS + rb"|" + _QUOTED + rb"))?)*\Z"
)
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
        before = len(self._buffer)
        start = max(0, before - len(HEAD_END) + 1)
        room = self._max - before
        self._buffer += data[:room]  # the cap is checked before the buffer grows
        end = self._buffer.find(HEAD_END, start)
        _no_bare_line_end(self._buffer, max(0, before - 1), end)
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


def _no_bare_line_end(buffer: bytearray, start: int, end: int) -> None:
    """Refuse a CR or LF that is not part of a CRLF in the head, as soon as it arrives.

    A head whose lines end in LF alone never ends in CRLF CRLF; without this it would wait
    for the head deadline. Only the head is scanned (``end`` is where its CRLF CRLF starts,
    or -1 when it has not arrived yet, and then a final CR may still get its LF).
    """
    stop = end + len(HEAD_END) if end >= 0 else len(buffer)
    found = _BARE_CR_OR_LF.search(buffer, start, stop)
    if found is None:
        return
    if end < 0 and found.start() == len(buffer) - 1 and buffer[-1:] == b"\r":
        return
    raise HttpHeadError("a line ends in a bare CR or LF")


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
    """Finds the end of a chunked body and lets through only what it has checked.

    The bytes are never changed, but a chunk-size line, the CRLF after a chunk's data and
    the last chunk with its trailer section pass only once they are complete and valid:
    :meth:`forward` returns what may be sent now, so a malformed line or a forbidden
    trailer (``Content-Length``, ``Host``, ...) ends the body with nothing of it sent, and
    the origin never sees the body's end unless the proxy saw all of it. At most one line
    (:data:`MAX_CHUNK_LINE_BYTES`) and one trailer section (:data:`MAX_TRAILER_BYTES`) are
    held. Once :attr:`done` is true, everything after the body's last byte is not part of
    this request.
    """

    def __init__(self) -> None:
        """Start before the first chunk-size line."""
        self._state: Literal["size", "data", "data-crlf", "trailer"] = "size"
        self._line = bytearray()
        self._held = bytearray()
        self._remaining = 0
        self._trailer_bytes = 0
        self.done = False

    def feed(self, data: bytes) -> int:
        """Consume ``data``; return how many bytes of it are body bytes.

        Raises:
            HttpHeadError: see :meth:`forward`.
        """
        used, _ = self._advance(data)
        return used

    def forward(self, data: bytes) -> bytes:
        """Consume ``data`` (up to the body's end); return the body bytes safe to send now.

        Raises:
            HttpHeadError: a malformed chunk line, a chunk over :data:`MAX_CHUNK_BYTES`, a
                missing CRLF after chunk data, a malformed or forbidden trailer field, or a
                line or trailer section over its cap.
        """
        _, out = self._advance(data)
        return out

    def _advance(self, data: bytes) -> tuple[int, bytes]:
        out = bytearray()
        used = 0
        view = memoryview(data)
        while used < len(view) and not self.done:
            if self._state == "data":
                take = min(self._remaining, len(view) - used)
                out += view[used : used + take]
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
                line = bytes(self._line)
                self._line.clear()
                out += self._line_done(line)
        return used, bytes(out)

    def _line_done(self, line: bytes) -> bytes:
        """Check one complete line; return what may be forwarded now."""
        if not line.endswith(b"\r\n") or b"\r" in line[:-2]:
            raise HttpHeadError("a chunk line does not end in CRLF")
        body = line[:-2]
        if self._state == "data-crlf":
            if body:
                raise HttpHeadError("chunk data longer than its size")
            self._state = "size"
            return line
        if self._state == "size":
            match = _CHUNK_SIZE_LINE.match(body)
            if match is None or len(match.group(1)) > MAX_CHUNK_SIZE_DIGITS:
                raise HttpHeadError("bad chunk size or extension")
            self._remaining = int(match.group(1), 16)
            if self._remaining > MAX_CHUNK_BYTES:
                raise HttpHeadError(f"a chunk larger than {MAX_CHUNK_BYTES} bytes")
            if self._remaining:
                self._state = "data"
                return line
            self._state = "trailer"
            self._held += line  # the last chunk waits for the whole trailer section
            return b""
        self._trailer_bytes += len(line)  # trailer section: field lines until an empty line
        if self._trailer_bytes > MAX_TRAILER_BYTES:
            raise HttpHeadError("trailer section over its cap")
        self._held += line
        if not body:
            self.done = True
            held = bytes(self._held)
            self._held.clear()
            return held
        name, _ = _field(body)
        if lookalike(name) in TRAILER_FORBIDDEN:
            raise HttpHeadError("a trailer field that frames, routes or describes the request")
        return b""


def is_token(text: str) -> bool:
    """True when ``text`` is an RFC 9110 token (a field name, a ``Connection`` option)."""
    return text.isascii() and bool(_TOKEN.match(text.encode("ascii")))


def lookalike(name: str) -> str:
    """``name`` as the servers that read it most loosely do: lowercase, ``_`` as ``-``.

    CGI-style servers give ``Content_Length`` and ``Content-Length`` one variable, so a
    field that equals a protected one this way is treated as that field.
    """
    return name.lower().replace("_", "-")
