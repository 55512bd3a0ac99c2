"""Name resolution for the proxy: one lookup per connection, then the checked address.

The proxy resolves a name itself, once, checks every address it got, and connects to one
of the addresses it checked: the sandbox's own DNS view never decides where a connection
goes, and a name that changes its answer between the check and the connect (DNS rebinding)
cannot slip past, because there is no second lookup.

:class:`SystemResolver` asks the host's resolver (``getaddrinfo`` on the loop's executor)
under a deadline; :class:`StaticResolver` answers from a fixed table (tests, and operators
who pin names). ``localhost`` (RFC 6761) and IP literals never reach a resolver.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from glove.egress._addresses import IPAddress, parse_address
from glove.egress._rules import LOCALHOST, LOCALHOST_ADDRESSES
from glove.egress.errors import ResolveFailed

#: Seconds one lookup may take.
RESOLVE_TIMEOUT_S: Final = 5.0
#: Most addresses kept from one lookup.
MAX_ADDRESSES: Final = 16
_MISSING_ERRORS: Final = frozenset(
    code
    for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if code is not None
)


class Resolver(Protocol):
    """Something that turns a normalized host name into addresses."""

    async def resolve(self, name: str) -> list[IPAddress]:
        """Every address of ``name``, in preference order.

        Raises:
            ResolveFailed: the name has no address (``missing``) or the lookup failed.
        """
        ...


def fixed_addresses(host: str) -> list[IPAddress] | None:
    """The addresses of an IP literal or ``localhost`` (no lookup), else None."""
    address = parse_address(host)
    if address is not None:
        return [address]
    if host == LOCALHOST:
        return [a for a in LOCALHOST_ADDRESSES if a is not None]
    return None


class SystemResolver:
    """``getaddrinfo`` on the host, bounded in time and in the number of addresses."""

    def __init__(self, *, timeout: float = RESOLVE_TIMEOUT_S) -> None:
        """Use the loop's default executor; every lookup gets ``timeout`` seconds."""
        self._timeout = timeout

    async def resolve(self, name: str) -> list[IPAddress]:
        """Every address of ``name`` (IPv4 and IPv6, deduplicated, in the resolver's order).

        Raises:
            ResolveFailed: no such name, no address, a resolver error, or the deadline.
        """
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._timeout):
                infos = await loop.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except TimeoutError as exc:
            raise ResolveFailed(f"looking up {name} timed out", missing=False) from exc
        except socket.gaierror as exc:
            missing = exc.errno in _MISSING_ERRORS
            raise ResolveFailed(f"cannot resolve {name}: {exc.strerror}", missing=missing) from exc
        except (OSError, UnicodeError) as exc:
            raise ResolveFailed(f"cannot resolve {name}: {exc}", missing=False) from exc
        seen: list[IPAddress] = []
        for _family, _type, _proto, _canon, sockaddr in infos:
            address = parse_address(str(sockaddr[0]))
            if address is not None and address not in seen:
                seen.append(address)
            if len(seen) >= MAX_ADDRESSES:
                break
        if not seen:
            raise ResolveFailed(f"{name} has no address", missing=True)
        return seen


class StaticResolver:
    """Answers from a fixed table; every other name does not exist."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        """``table`` maps a lowercase name to address texts.

        Raises:
            ValueError: an entry is not an IP address.
        """
        self._table: dict[str, list[IPAddress]] = {}
        for name, texts in table.items():
            addresses = [parse_address(text) for text in texts]
            if any(a is None for a in addresses):
                raise ValueError(f"not an IP address in the entry for {name!r}")
            self._table[name.lower().rstrip(".")] = [a for a in addresses if a is not None]

    async def resolve(self, name: str) -> list[IPAddress]:
        """The table's addresses for ``name``.

        Raises:
            ResolveFailed: the name is not in the table (``missing``).
        """
        addresses = self._table.get(name)
        if not addresses:
            raise ResolveFailed(f"{name} does not exist", missing=True)
        return list(addresses)
