"""The server side of SOCKS5 (RFC 1928), CONNECT only, no authentication (sans-IO).

The inherited channel is the authentication: only the sandbox's own helper can hand the
proxy a connection, so the proxy offers method ``0x00`` (no authentication) and nothing
else, and the sandbox holds no secret. A client that does not offer ``0x00`` gets ``0xFF``
(no acceptable method).

Bytes in, events out: :class:`Socks5Parser` yields a :class:`Socks5Greeting`, then a
:class:`Socks5Request`, or raises :class:`~glove.egress.errors.Socks5Error` whose ``reply_code``
is the failure the proxy sends (when the protocol still allows a reply). Address types:
IPv4, IPv6 and domain names (the proxy resolves them: ``socks5h`` semantics). Replies never
carry the proxy's own address: the bound address is always ``0.0.0.0:0``.
"""

from __future__ import annotations

import ipaddress
from typing import Final, Literal

import msgspec

from glove.egress.errors import Socks5Error

VERSION: Final = 5
METHOD_NO_AUTH: Final = 0x00
METHOD_NONE_ACCEPTABLE: Final = 0xFF
CMD_CONNECT: Final = 1
CMD_BIND: Final = 2
CMD_UDP_ASSOCIATE: Final = 3
ATYP_IPV4: Final = 1
ATYP_DOMAIN: Final = 3
ATYP_IPV6: Final = 4

REPLY_SUCCEEDED: Final = 0x00
REPLY_GENERAL_FAILURE: Final = 0x01
REPLY_NOT_ALLOWED: Final = 0x02
REPLY_NETWORK_UNREACHABLE: Final = 0x03
REPLY_HOST_UNREACHABLE: Final = 0x04
REPLY_CONNECTION_REFUSED: Final = 0x05
REPLY_TTL_EXPIRED: Final = 0x06
REPLY_COMMAND_NOT_SUPPORTED: Final = 0x07
REPLY_ADDRESS_TYPE_NOT_SUPPORTED: Final = 0x08

#: Largest greeting: version, count, 255 methods.
MAX_GREETING_BYTES: Final = 2 + 255
#: Largest request: 4 header bytes, a length byte, a 255-byte name, 2 port bytes.
MAX_REQUEST_BYTES: Final = 4 + 1 + 255 + 2

_ADDRESS_BYTES: Final = {ATYP_IPV4: 4, ATYP_IPV6: 16}


class Socks5Greeting(msgspec.Struct, frozen=True):
    """The client's method offer."""

    methods: frozenset[int]

    @property
    def reply(self) -> bytes:
        """The method selection: no authentication if offered, else "none acceptable"."""
        chosen = METHOD_NO_AUTH if METHOD_NO_AUTH in self.methods else METHOD_NONE_ACCEPTABLE
        return bytes((VERSION, chosen))


class Socks5Request(msgspec.Struct, frozen=True):
    """A request: ``command`` (only CONNECT is served), the destination host and port.

    Attributes:
        command: 1 CONNECT, 2 BIND, 3 UDP ASSOCIATE (the proxy refuses 2 and 3).
        address_type: how the client named the host (1 IPv4, 3 domain, 4 IPv6).
        host: the domain name as sent (latin-1 decoded; the rules judge it) or the
            address in canonical text.
        port: the destination port (0 is possible on the wire; the rules refuse it).
    """

    command: int
    address_type: int
    host: str
    port: int


def reply(code: int) -> bytes:
    """A reply with ``code`` and the bound address ``0.0.0.0:0`` (nothing about the host)."""
    return bytes((VERSION, code, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0))


class Socks5Parser:
    """Parses one greeting, then one request; never buffers more than both can take."""

    def __init__(self) -> None:
        """Start expecting the greeting."""
        self._state: Literal["greeting", "request", "done"] = "greeting"
        self._buffer = bytearray()
        self._overflow = b""
        self.trailing = b""
        """Bytes received after the request (RFC 1928 clients send none before the reply)."""

    def feed(self, data: bytes) -> Socks5Greeting | Socks5Request | None:
        """Add ``data`` and return the next complete message, or None (send more).

        After a :class:`Socks5Greeting`, call ``feed(b"")`` again: a client that sends its
        request without waiting for the method reply has it buffered already. The buffer
        holds at most a greeting and a request (both have a maximum size, so a full buffer
        always holds complete messages); bytes beyond it wait, then become
        :attr:`trailing`.

        Raises:
            Socks5Error: not SOCKS5, a malformed message, data after the request, or an
                address type it cannot parse (``reply_code`` says what to answer, None for
                no reply).
        """
        if self._state == "done":
            raise Socks5Error("bytes after the request before its reply", reply_code=None)
        pending = self._overflow + data if self._overflow else data
        room = MAX_GREETING_BYTES + MAX_REQUEST_BYTES - len(self._buffer)
        self._buffer += pending[:room]  # the cap is checked before the buffer grows
        self._overflow = pending[room:]
        if self._state == "greeting":
            greeting = self._greeting()
            if greeting is not None:
                self._state = "request"
            return greeting
        request = self._request()
        if request is not None:
            self._state = "done"
            self.trailing = bytes(self._buffer) + self._overflow
            self._buffer, self._overflow = bytearray(), b""
        return request

    def _greeting(self) -> Socks5Greeting | None:
        buf = self._buffer
        if not buf:
            return None
        if buf[0] != VERSION:
            raise Socks5Error(f"not SOCKS5 (version byte {buf[0]})", reply_code=None)
        if len(buf) < 2:
            return None
        count = buf[1]
        if count == 0:
            raise Socks5Error("a greeting that offers no method", reply_code=None)
        if len(buf) < 2 + count:
            return None
        methods = frozenset(buf[2 : 2 + count])
        del buf[: 2 + count]
        return Socks5Greeting(methods)

    def _request(self) -> Socks5Request | None:  # noqa: PLR0912 - one branch per field check
        buf = self._buffer
        if len(buf) < 4:
            if buf and buf[0] != VERSION:
                raise Socks5Error("bad version byte in the request", reply_code=None)
            return None
        version, command, reserved, atyp = buf[0], buf[1], buf[2], buf[3]
        if version != VERSION:
            raise Socks5Error("bad version byte in the request", reply_code=None)
        if reserved != 0:
            raise Socks5Error("reserved byte is not zero", reply_code=REPLY_GENERAL_FAILURE)
        if atyp == ATYP_DOMAIN:
            if len(buf) < 5:
                return None
            length = buf[4]
            if length == 0:
                raise Socks5Error("empty domain name", reply_code=REPLY_GENERAL_FAILURE)
            start, end = 5, 5 + length
        elif atyp in _ADDRESS_BYTES:
            start, end = 4, 4 + _ADDRESS_BYTES[atyp]
        else:
            raise Socks5Error(
                f"address type {atyp} is not supported",
                reply_code=REPLY_ADDRESS_TYPE_NOT_SUPPORTED,
            )
        if len(buf) < end + 2:
            return None
        raw = bytes(buf[start:end])
        port = int.from_bytes(buf[end : end + 2], "big")
        del buf[: end + 2]
        if atyp == ATYP_DOMAIN:
            host = raw.decode("latin-1")
        elif atyp == ATYP_IPV4:
            host = str(ipaddress.IPv4Address(raw))
        else:
            host = str(ipaddress.IPv6Address(raw))
        return Socks5Request(command, atyp, host, port)
