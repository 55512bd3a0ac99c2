"""What a host offers against host sockets: the Unix socket gate's mechanism, or why none.

Platform-neutral (the Linux backend's :mod:`glove.container.linux._unix_gate` fills it in;
elsewhere there is none). ``glove doctor`` reports it and gloved's exposures depend on it:
without a gate, a socket inside an exposure is refused at ``exposure.create`` and at launch.
"""

from __future__ import annotations

from typing import Final, NamedTuple

#: Every connect() performed by the launcher after resolving the address as the caller.
MECH_SECCOMP_CONNECT: Final = "seccomp-notify-connect"
#: The Landlock ABI that brings ``LANDLOCK_ACCESS_FS_RESOLVE_UNIX`` (Linux 7.1).
LANDLOCK_RESOLVE_UNIX_ABI: Final = 9


class GateSupport(NamedTuple):
    """The gate's mechanism (None: no gate here), why, and the Landlock ABI (0: none)."""

    mechanism: str | None
    reason: str
    landlock_abi: int
