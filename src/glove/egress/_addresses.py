"""The address-class check: which resolved addresses a name may lead to (sans-IO).

A name the proxy resolves may lead to a public address, or to one of the classes below.
Those are refused unless the operator listed the address itself (an IP-literal rule, or
``localhost``): a name that resolves to ``127.0.0.1`` (DNS rebinding, an ``/etc/hosts``
entry, a hostile resolver) must not open the host's loopback services to the sandbox.

The classes are checked in the order of :data:`ADDRESS_CLASSES`; anything that Python's
``ipaddress`` does not call global and no class names is ``reserved``. IPv4 addresses
embedded in IPv6 forms that reach an IPv4 host (IPv4-mapped ``::ffff:a.b.c.d``, the NAT64
well-known prefix, 6to4, Teredo) are judged as the IPv4 address they carry, so
``::ffff:127.0.0.1`` is loopback.
"""

from __future__ import annotations

import ipaddress
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

#: ``(class name, networks)`` in the order they are checked.
ADDRESS_CLASSES: Final[tuple[tuple[str, tuple[_V4 | _V6, ...]], ...]] = (
    ("unspecified", (_V4("0.0.0.0/8"), _V6("::/128"))),
    ("loopback", (_V4("127.0.0.0/8"), _V6("::1/128"))),
    ("link-local", (_V4("169.254.0.0/16"), _V6("fe80::/10"))),
    ("private", (_V4("10.0.0.0/8"), _V4("172.16.0.0/12"), _V4("192.168.0.0/16"))),
    ("unique-local", (_V6("fc00::/7"),)),
    ("shared", (_V4("100.64.0.0/10"),)),  # carrier-grade NAT (RFC 6598)
    ("multicast", (_V4("224.0.0.0/4"), _V6("ff00::/8"))),
    ("site-local", (_V6("fec0::/10"),)),  # deprecated, still routed privately somewhere
)
#: The class of an address that is public (routable on the internet).
PUBLIC: Final = "public"
#: The class of any other non-global address (documentation, benchmarking, 240/4, ...).
RESERVED: Final = "reserved"

_NAT64: Final = _V6("64:ff9b::/96")


def canonical(address: IPAddress) -> IPAddress:
    """The address a connection really reaches: the IPv4 address an IPv6 form embeds."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
        if address.teredo is not None:
            return address.teredo[1]
    return address


def address_class(address: IPAddress) -> str:
    """Name the class of ``address`` (``public`` when it is routable on the internet)."""
    real = canonical(address)
    for name, networks in ADDRESS_CLASSES:
        if any(real.version == net.version and real in net for net in networks):
            return name
    return PUBLIC if real.is_global else RESERVED


def is_public(address: IPAddress) -> bool:
    """True when ``address`` (after :func:`canonical`) is a public, routable address."""
    return address_class(address) == PUBLIC


def parse_address(text: str) -> IPAddress | None:
    """The address ``text`` spells in canonical form (IPv6 without brackets), else None.

    Only the strict forms count (``127.0.0.1``, ``::1``); shorthand that ``inet_aton``
    accepts (``127.1``, ``0x7f000001``) is not an address here, so it can never match an
    IP-literal rule (and the rules refuse such names: see :mod:`glove.egress._rules`).
    """
    if "%" in text:  # an IPv6 zone index names a host interface: never a destination
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
