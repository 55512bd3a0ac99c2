"""What every Streamable HTTP request must pass before it reaches a session (pure).

:func:`check_request` judges a parsed request head against :class:`HttpOptions`: the path,
``Host`` and ``Origin`` against DNS rebinding, the bearer token, the protocol version.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Final

from glove.mcp._http import RequestHead
from glove.mcp._upstream import LEGACY_VERSIONS
from glove.mcp.errors import HttpError

MCP_PATH: Final = "/mcp"
DEFAULT_MAX_SESSIONS: Final = 64
DEFAULT_SESSION_IDLE_S: Final = 1800.0
DEFAULT_RETRY_MS: Final = 1000
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How the HTTP front listens and whom it lets in."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_s: float = DEFAULT_SESSION_IDLE_S
    retry_ms: int = DEFAULT_RETRY_MS

    def host_names(self) -> frozenset[str]:
        """The names ``Host`` and ``Origin`` may carry (lowercase, no port)."""
        bound = self.host.lower()
        extra = {name.lower() for name in self.allowed_hosts}
        return LOOPBACK_NAMES | extra | {bound, f"[{bound}]"}


def _hostname(authority: str) -> str:
    """``host[:port]`` -> ``host`` (bracketed IPv6 kept in brackets), lowercase."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        end = authority.find("]")
        return authority[: end + 1] if end > 0 else authority
    return authority.rpartition(":")[0] if authority.count(":") == 1 else authority


def check_request(head: RequestHead, options: HttpOptions) -> None:
    """The checks every request passes before it reaches a session (pure).

    Raises:
        HttpError: wrong path (404), a Host or Origin that is not allowed (403), a missing
            or wrong bearer token (401), an unknown protocol version (400).
    """
    if head.path != MCP_PATH:
        raise HttpError(404, f"not found: the MCP endpoint is {MCP_PATH}")
    names = options.host_names()
    host = head.header("host")
    if host is None or _hostname(host) not in names:
        raise HttpError(403, "Host header not allowed (DNS rebinding protection)")
    origin = head.header("origin")
    if origin is not None and origin != "null":
        scheme, sep, rest = origin.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or _hostname(rest) not in names:
            raise HttpError(403, "Origin not allowed (DNS rebinding protection)")
    elif origin == "null":
        raise HttpError(403, "Origin not allowed (DNS rebinding protection)")
    if options.token is not None:
        given = head.header("authorization") or ""
        scheme, _, credential = given.partition(" ")
        expected = options.token.encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            credential.strip().encode(), expected
        ):
            raise HttpError(401, "a valid bearer token is required")
    version = head.header("mcp-protocol-version")
    if version is not None and version not in LEGACY_VERSIONS:
        raise HttpError(400, f"unsupported MCP-Protocol-Version {version[:32]!r}")


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> ``(host, port)``.

    Raises:
        ValueError: not ``HOST:PORT`` with a port in 0-65535.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ValueError(f"--http needs HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names the loopback interface."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


REASONS: Final = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
