"""The server name a TLS ClientHello asks for (SNI, RFC 6066), read without terminating TLS.

Used only for rules with the ``sni`` option: after the proxy has answered a CONNECT (or a
SOCKS5 request), it reads the client's first flight, takes the ``server_name`` from the
ClientHello, and compares it with the host the client asked the proxy for. The bytes are
then forwarded unchanged; the proxy never holds a key and never sees plaintext.

Sans-IO and strict: :class:`ClientHelloParser` gathers handshake bytes across TLS records
(a ClientHello may span several, and post-quantum key shares make it large: one cap,
:data:`MAX_CLIENT_HELLO_BYTES`, checked before the buffer grows) and returns a
:class:`ClientHello` or raises :class:`~glove.egress.errors.TlsHelloError`. Duplicate
extensions and several host names are errors (RFC 8446 section 4.2, RFC 6066 section 3). A
hello that carries Encrypted Client Hello (``encrypted_client_hello``) is reported as such:
its outer SNI is a public name, not the destination, so an SNI rule refuses it.
"""

from __future__ import annotations

from typing import Final

import msgspec

from glove.egress.errors import TlsHelloError

CONTENT_HANDSHAKE: Final = 22
HANDSHAKE_CLIENT_HELLO: Final = 1
EXT_SERVER_NAME: Final = 0x0000
EXT_ENCRYPTED_CLIENT_HELLO: Final = 0xFE0D
NAME_TYPE_HOST: Final = 0
#: Largest TLS plaintext record fragment (RFC 8446 section 5.1).
MAX_RECORD_BYTES: Final = 1 << 14
#: Largest ClientHello the proxy reads before deciding (handshake header included).
MAX_CLIENT_HELLO_BYTES: Final = 64 * 1024
RECORD_HEADER_BYTES: Final = 5
HANDSHAKE_HEADER_BYTES: Final = 4
MAX_HOST_NAME_BYTES: Final = 255
#: A fatal ``access_denied`` alert (TLS 1.0-1.3 plaintext record): what a refused client sees.
ALERT_ACCESS_DENIED: Final = bytes((21, 3, 3, 0, 2, 2, 49))


class ClientHello(msgspec.Struct, frozen=True):
    """What the proxy learned from a ClientHello.

    Attributes:
        server_name: the SNI host name (lowercase, trailing dot removed), or None if absent.
        encrypted: the hello carries Encrypted Client Hello (the real name is hidden).
        size: bytes the hello occupied on the wire (its records), for the audit record.
    """

    server_name: str | None
    encrypted: bool
    size: int


class _Reader:
    """Bounds-checked reads over one message; any overrun is a malformed hello."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, count: int) -> bytes:
        end = self.pos + count
        if end > len(self.data):
            raise TlsHelloError("truncated ClientHello")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def number(self, width: int) -> int:
        return int.from_bytes(self.take(width), "big")

    def vector(self, width: int) -> bytes:
        return self.take(self.number(width))

    @property
    def left(self) -> int:
        return len(self.data) - self.pos


class ClientHelloParser:
    """Gathers the ClientHello handshake message from TLS records, one cap for all of it."""

    def __init__(self, *, max_bytes: int = MAX_CLIENT_HELLO_BYTES) -> None:
        """Start before the first record; ``max_bytes`` caps the bytes read."""
        self._max = max_bytes
        self._wire = bytearray()
        self._handshake = bytearray()
        self._used = 0

    def feed(self, data: bytes) -> ClientHello | None:
        """Add ``data`` (the client's first bytes); return the hello once complete.

        Raises:
            TlsHelloError: not a TLS handshake, a malformed record or ClientHello, or more
                than ``max_bytes`` before the hello ends.
        """
        if len(self._wire) + len(data) > self._max:
            raise TlsHelloError(f"ClientHello larger than {self._max} bytes")
        self._wire += data
        while True:
            if len(self._handshake) >= HANDSHAKE_HEADER_BYTES:
                if self._handshake[0] != HANDSHAKE_CLIENT_HELLO:
                    raise TlsHelloError("the first handshake message is not a ClientHello")
                length = int.from_bytes(self._handshake[1:4], "big")
                if length + HANDSHAKE_HEADER_BYTES > self._max:
                    raise TlsHelloError(f"ClientHello larger than {self._max} bytes")
                if len(self._handshake) >= length + HANDSHAKE_HEADER_BYTES:
                    body = bytes(self._handshake[HANDSHAKE_HEADER_BYTES : length + 4])
                    name, encrypted = _parse_hello(body)
                    return ClientHello(name, encrypted, self._used)
            header = self._wire[self._used : self._used + RECORD_HEADER_BYTES]
            if len(header) < RECORD_HEADER_BYTES:
                if header and header[0] != CONTENT_HANDSHAKE:
                    raise TlsHelloError("not a TLS handshake")
                return None
            if header[0] != CONTENT_HANDSHAKE:
                raise TlsHelloError("not a TLS handshake")
            if header[1] != 3 or header[2] > 4:
                raise TlsHelloError("bad TLS record version")
            size = int.from_bytes(header[3:5], "big")
            if size == 0 or size > MAX_RECORD_BYTES:
                raise TlsHelloError("bad TLS record length")
            end = self._used + RECORD_HEADER_BYTES + size
            if len(self._wire) < end:
                return None
            self._handshake += self._wire[self._used + RECORD_HEADER_BYTES : end]
            self._used = end


def _parse_hello(body: bytes) -> tuple[str | None, bool]:
    reader = _Reader(body)
    version = reader.take(2)
    if version[0] != 3:
        raise TlsHelloError("bad ClientHello version")
    reader.take(32)  # random
    if len(reader.vector(1)) > 32:
        raise TlsHelloError("session id longer than 32 bytes")
    suites = reader.vector(2)
    if not suites or len(suites) % 2:
        raise TlsHelloError("bad cipher suite list")
    if not reader.vector(1):
        raise TlsHelloError("empty compression method list")
    if reader.left == 0:
        return None, False  # no extensions at all
    extensions = _Reader(reader.vector(2))
    if reader.left:
        raise TlsHelloError("bytes after the extensions")
    seen: set[int] = set()
    name: str | None = None
    while extensions.left:
        kind = extensions.number(2)
        data = extensions.vector(2)
        if kind in seen:
            raise TlsHelloError(f"duplicate extension {kind:#06x}")
        seen.add(kind)
        if kind == EXT_SERVER_NAME:
            name = _server_name(data)
    return name, EXT_ENCRYPTED_CLIENT_HELLO in seen


def _server_name(data: bytes) -> str | None:
    outer = _Reader(data)
    names = _Reader(outer.vector(2))
    if outer.left:
        raise TlsHelloError("bytes after the server name list")
    found: str | None = None
    while names.left:
        kind = names.number(1)
        value = names.vector(2)
        if kind != NAME_TYPE_HOST:
            continue
        if found is not None:
            raise TlsHelloError("more than one host name in server_name")
        if not value or len(value) > MAX_HOST_NAME_BYTES:
            raise TlsHelloError("bad host name length in server_name")
        try:
            text = value.decode("ascii")
        except UnicodeDecodeError as exc:
            raise TlsHelloError("server_name host name is not ASCII") from exc
        found = text[:-1].lower() if text.endswith(".") else text.lower()
    return found
