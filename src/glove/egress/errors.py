"""Errors raised by the egress subsystem (rules, protocol parsers, the proxy, the channel).

::

    GloveError
    └── EgressError
        ├── RuleError               a rule cannot be loaded: bad syntax, ``*``, a bare TLD
        ├── EgressProtocolError     the sandbox sent bytes its protocol forbids (its fault)
        │   ├── HttpHeadError       a malformed or over-cap HTTP/1.1 request head or body framing
        │   ├── Socks5Error         a malformed SOCKS5 greeting or request
        │   ├── TlsHelloError       a malformed TLS ClientHello (when the SNI check reads one)
        │   └── DnsMessageError     a malformed DNS message
        ├── ChannelError            the inherited descriptor channel is unusable
        └── UpstreamError           the far side failed: a name did not resolve, a connect failed
            ├── ResolveFailed       the proxy could not resolve the name (or in time)
            └── ConnectFailed       the proxy could not connect to the checked address (or in time)

A protocol error ends the one connection it came from, with a clear reply where the protocol
has one (400, a SOCKS5 failure code, DNS FORMERR); it never crashes the proxy. Every protocol
error carries a fixed, short ``reply_text`` that is safe to show the sandbox (it names what
was wrong, never echoes the sandbox's bytes back at length).
"""

from __future__ import annotations

from glove.errors import GloveError


class EgressError(GloveError):
    """Base class of every egress error."""


class RuleError(EgressError, ValueError):
    """An allow or deny rule cannot be loaded (the operator's input is wrong)."""


class EgressProtocolError(EgressError):
    """The sandbox's side sent bytes its protocol does not allow (a peer fault)."""


class HttpHeadError(EgressProtocolError):
    """A malformed or over-cap HTTP/1.1 request head, or a body whose framing is unsafe.

    Attributes:
        status: the HTTP status the proxy answers with (400, 414, 431, 501 or 505).
    """

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Socks5Error(EgressProtocolError):
    """A malformed SOCKS5 greeting or request.

    Attributes:
        reply_code: the RFC 1928 reply to send, or None when no reply fits (not SOCKS5).
    """

    def __init__(self, message: str, *, reply_code: int | None) -> None:
        super().__init__(message)
        self.reply_code = reply_code


class TlsHelloError(EgressProtocolError):
    """A malformed TLS ClientHello (only read when a rule asks for the SNI check)."""


class DnsMessageError(EgressProtocolError):
    """A malformed DNS message."""


class ChannelError(EgressError):
    """The inherited descriptor channel cannot be used (not a Unix stream socket, closed)."""


class UpstreamError(EgressError):
    """Resolving or connecting on the host's side failed (the far side's fault, or time)."""


class ResolveFailed(UpstreamError):
    """The proxy could not resolve a name, or not before its deadline.

    Attributes:
        missing: the name has no address (NXDOMAIN or no data), as opposed to a failure.
    """

    def __init__(self, message: str, *, missing: bool) -> None:
        super().__init__(message)
        self.missing = missing


class ConnectFailed(UpstreamError):
    """The proxy could not connect to the address it checked, or not before its deadline.

    Attributes:
        why: ``refused``, ``unreachable``, ``timeout`` or ``error``.
    """

    def __init__(self, message: str, *, why: str) -> None:
        super().__init__(message)
        self.why = why
