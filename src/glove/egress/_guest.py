"""What a sandbox needs for ``--network proxy``: the helper, a resolv.conf, a channel, env.

The wiring into ``glove exec``/``glove run`` and the session tree is the lead's (issues 8
and 9); this module makes it small. :func:`prepare_guest` writes the helper script and the
sandbox's ``resolv.conf`` into a private directory, makes the channel socketpair, and returns
an :class:`EgressGuest` that says what to bind, which descriptor to pass, which variables
to add and which command line to run; the host end goes to :class:`~glove.egress.EgressProxy`.

Under ``glove run`` the same directory can also hold the MCP shim: run the helper with
``--mcp`` (one PID for both jobs, one channel for both kinds). Offline, the same script is
the MCP relay (:func:`write_helper` as ``glove-relay``).
"""

from __future__ import annotations

import os
import socket
import tempfile
from importlib import resources
from pathlib import Path
from typing import Final, NamedTuple

import msgspec

from glove.egress.helper import GUEST_HELPER_PATH, RESOLV_CONF, SYSTEM_PYTHON, proxy_environment

#: Where the private directory appears inside the sandbox (shared with ``glove run``).
GUEST_DIR: Final = "/opt/glove"
HELPER_NAME: Final = "glove-egress"
RESOLV_NAME: Final = "resolv.conf"
#: The descriptor number of the channel inside the sandbox (``glove run`` uses 3 too:
#: with ``--mcp`` one channel carries both).
GUEST_CHANNEL_FD: Final = 3
#: Where the sandbox's resolver configuration must appear.
RESOLV_TARGET: Final = "/etc/resolv.conf"


def resolv_conf() -> str:
    """The sandbox's ``/etc/resolv.conf``: the stub on 127.0.0.1, fail fast, no search list."""
    return RESOLV_CONF


class EgressGuest(msgspec.Struct, frozen=True):
    """The sandbox side of ``--network proxy``.

    Attributes:
        bind_dir: host directory to bind read-only at :data:`GUEST_DIR`.
        resolv_conf: host file to bind read-only at :data:`RESOLV_TARGET`.
        env: variables to add to the command's environment (the helper sets them too).
        pass_fds: ``{fd inside: fd here}`` for ``SandboxSpec.pass_fds``.
    """

    bind_dir: str
    resolv_conf: str
    env: dict[str, str]
    pass_fds: dict[int, int]

    def command(
        self, argv: list[str] | tuple[str, ...], *, mcp: bool = False, dns: bool = True
    ) -> tuple[str, ...]:
        """The sandbox's command line: the helper (one PID), then ``argv``."""
        flags = (*(["--mcp"] if mcp else []), *([] if dns else ["--no-dns"]))
        return (SYSTEM_PYTHON, GUEST_HELPER_PATH, str(GUEST_CHANNEL_FD), *flags, "--", *argv)


def write_helper(directory: str | Path, name: str = HELPER_NAME) -> Path:
    """Write the in-sandbox helper script into ``directory`` as ``name`` (mode 0555).

    The one helper for every sandbox job: as ``glove-egress`` the network listeners (and
    ``--mcp``), as ``glove-relay`` (:mod:`glove.mcp`'s guest directory) MCP alone.
    """
    helper = Path(directory) / name
    helper.write_bytes(resources.files("glove.egress").joinpath("helper.py").read_bytes())
    helper.chmod(0o555)
    return helper


def write_guest_files(directory: str | Path) -> None:
    """Write the helper (mode 0555) and ``resolv.conf`` (0444) into ``directory``."""
    target = Path(directory)
    write_helper(target)
    resolv = target / RESOLV_NAME
    resolv.write_text(RESOLV_CONF)
    resolv.chmod(0o444)


def prepare_guest(
    directory: str | Path | None = None,
) -> tuple[EgressGuest, socket.socket, socket.socket]:
    """Prepare a sandbox for the proxy; return the guest plan and both channel ends.

    ``directory`` (created if missing; default: a fresh temporary directory the caller
    removes) is made 0700 and receives the helper and ``resolv.conf``. Give the first
    socket (the host end) to :class:`~glove.egress.EgressProxy`; the second (the guest
    end) is what ``pass_fds`` names: close it here once the sandbox has started.
    """
    if directory is None:
        private = Path(tempfile.mkdtemp(prefix="glove-egress-"))
    else:
        private = Path(directory)
        private.mkdir(mode=0o700, exist_ok=True)
    private.chmod(0o700)
    write_guest_files(private)
    host_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    guest = EgressGuest(
        bind_dir=str(private),
        resolv_conf=os.fspath(private / RESOLV_NAME),
        env=proxy_environment(),
        pass_fds={GUEST_CHANNEL_FD: guest_end.fileno()},
    )
    return guest, host_end, guest_end


class EgressParts(NamedTuple):
    """The guest parts of one proxied sandbox and the channel's two ends.

    ``host_end`` goes to the :class:`~glove.egress.EgressProxy`; ``guest_end`` is passed into
    the sandbox as descriptor 3 and closed by its owner once the sandbox has started.
    """

    guest: EgressGuest
    host_end: socket.socket
    guest_end: socket.socket

    def close(self) -> None:
        """Close both ends (each is idempotent; the proxy may already own the host end)."""
        self.guest_end.close()
        self.host_end.close()


def prepare_egress(directory: Path | None = None) -> EgressParts:
    """Write the helper into ``directory`` (default: a fresh 0700 one) and make the channel.

    Raises:
        OSError: the directory or the socketpair cannot be made.
    """
    guest, host_end, guest_end = prepare_guest(directory)
    return EgressParts(guest, host_end, guest_end)
