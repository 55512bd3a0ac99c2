"""The sandbox's ``/etc/resolv.conf``: name resolution that fails at once offline (sans-IO).

Without a ``resolv.conf`` every resolver (glibc, c-ares, musl, Go, Bun) falls back to a
name server on ``127.0.0.1:53``. In the sandbox's network namespace ``lo`` is up and nothing
listens there, so each query is answered by an ICMP port-unreachable that surfaces as
``ECONNREFUSED`` on the *next* read of an already-connected UDP socket: a resolver that
polls that socket and retries on the error spins (Claude Code was measured at ~9,400
``epoll_pwait2`` calls a second, 100 % CPU for 24-27 s per lookup, 153 s of CPU for one
``-p`` run with its retries).

Offline (network mode ``none``) the sandbox therefore gets a file naming a name server on
a documentation address (RFC 5737 TEST-NET-1) that has no route in the route-less network
namespace: ``connect``/``sendto`` fails synchronously with ``ENETUNREACH``, no socket is
left in any poll set, and every lookup fails at once with a temporary-failure error
(``EAI_AGAIN``) that programs already treat as "offline". Names in ``/etc/hosts``
(``localhost``) still resolve.

With approved egress (network mode ``proxy``, issue 12) the name server is the sandbox's
DNS stub on ``127.0.0.1``, which answers allowlisted names through the proxy's channel and
``NXDOMAIN`` for everything else, so the same options keep a refused name fast.
"""

from __future__ import annotations

from typing import Final

#: Where the file appears inside.
RESOLV_CONF_PATH: Final = "/etc/resolv.conf"
#: A name server with no route in a route-less namespace (RFC 5737 TEST-NET-1).
OFFLINE_NAMESERVER: Final = "192.0.2.1"
#: The egress DNS stub inside the sandbox (the egress helper listens there).
PROXY_NAMESERVER: Final = "127.0.0.1"
#: One try per server, one second each: a lookup that cannot succeed ends quickly.
RESOLVER_OPTIONS: Final = "options timeout:1 attempts:1"

_OFFLINE: Final = (
    "# Written by glove: this sandbox has no network (network mode 'none').\n"
    f"# {OFFLINE_NAMESERVER} (RFC 5737) has no route here, so every lookup fails at once\n"
    "# (ENETUNREACH) instead of waiting on 127.0.0.1:53, where nothing listens.\n"
    f"nameserver {OFFLINE_NAMESERVER}\n"
    f"{RESOLVER_OPTIONS}\n"
)
_PROXY: Final = (
    "# Written by glove: names resolve through the egress proxy's DNS stub (allowlist\n"
    "# only; NXDOMAIN for every other name).\n"
    f"nameserver {PROXY_NAMESERVER}\n"
    f"{RESOLVER_OPTIONS}\n"
)


def resolv_conf(network_mode: str) -> bytes:
    """The ``resolv.conf`` bytes for a sandbox in ``network_mode`` (``none`` or ``proxy``).

    Raises:
        ValueError: an unknown network mode.
    """
    if network_mode == "none":
        return _OFFLINE.encode()
    if network_mode == "proxy":
        return _PROXY.encode()
    raise ValueError(f"no resolv.conf for network mode {network_mode!r}")
