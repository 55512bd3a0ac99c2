"""The synthetic owner: one unnamed socketpair, verified, and the worker that serves it.

Disabled by default and construction-only: nothing in Glove builds one (no launcher maps
its guest end into a child, no environment variable names it, no capability discovery
advertises it). Construction refuses, and leaves nothing open, unless all of these hold:

* the creating process's effective uid is the owner uid (``creator_uid``), and the
  session binding names that same owner;
* on both ends: ``SO_DOMAIN`` is ``AF_UNIX`` (``family``), ``SO_TYPE`` is ``SOCK_STREAM``
  (``type``), the socket has no name (``unnamed``), ``O_NONBLOCK`` is set
  (``nonblocking``), ``FD_CLOEXEC`` is set (``cloexec``), and ``SO_PEERCRED``'s uid, the
  credentials recorded when the pair was created, is the owner uid (``peer_uid``).

The checks read the kernel's view of each descriptor (``getsockopt``, ``fcntl``), never
Python's idea of the socket object, so a factory that hands over a different descriptor
is caught. The owner's lifetime is independent of its worker: :meth:`SyntheticOwner.destroy`
refuses to run from inside the worker (an authority callback), which may only request a
close through :attr:`SyntheticOwner.closer`.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import struct
from collections.abc import Callable
from typing import Final

from glove.wallet._processor import StatusProcessor
from glove.wallet._worker import (
    IN_WORKER,
    REQUEST_DEADLINE_S,
    CloseReason,
    Endpoints,
    SessionCloser,
    WalletStatusWorker,
)
from glove.wallet.errors import EndpointCheckFailed, OwnerLifetimeError, WalletDisabled

DESTROY_GRACE_S: Final = 5.0
"""How long :meth:`SyntheticOwner.destroy` waits for the worker to close the session."""

_UCRED: Final = struct.Struct("3i")

SocketpairFactory = Callable[[], tuple[socket.socket, socket.socket]]


def open_socketpair() -> tuple[socket.socket, socket.socket]:
    """Create the session's unnamed ``AF_UNIX`` stream pair, non-blocking and close-on-exec.

    Raises:
        OSError: the kernel refused to create it.
    """
    flags = socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
    host, guest = socket.socketpair(socket.AF_UNIX, flags)
    for sock in (host, guest):
        sock.setblocking(False)  # keep Python's view in line with the kernel's
    return host, guest


def check_endpoint(sock: socket.socket, owner_uid: int, end: str) -> None:
    """Verify one end of the pair against the construction checks above.

    Raises:
        EndpointCheckFailed: a check failed; ``check`` names which.
    """

    def fail(check: str, detail: str) -> EndpointCheckFailed:
        return EndpointCheckFailed(check, f"{end} end: {detail}")

    try:
        domain = sock.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
        if domain != socket.AF_UNIX:
            raise fail("family", f"SO_DOMAIN is {domain}, not AF_UNIX")
        kind = sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
        if kind != socket.SOCK_STREAM:
            raise fail("type", f"SO_TYPE is {kind}, not SOCK_STREAM")
        if sock.getsockname() not in ("", b"") or sock.getpeername() not in ("", b""):
            raise fail("unnamed", "the socket has a name: not an unnamed socketpair")
        if not fcntl.fcntl(sock.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK:
            raise fail("nonblocking", "O_NONBLOCK is not set")
        if not fcntl.fcntl(sock.fileno(), fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
            raise fail("cloexec", "FD_CLOEXEC is not set")
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except OSError as exc:
        raise fail("family", f"the descriptor cannot be inspected ({exc.strerror})") from exc
    _pid, uid, _gid = _UCRED.unpack(raw)
    if uid != owner_uid:
        raise fail("peer_uid", f"SO_PEERCRED uid is {uid}, the owner is uid {owner_uid}")


class SyntheticOwner:
    """Owns one session's socketpair and the worker that serves its host end.

    Run :attr:`worker` as an actor (under a supervisor, or ``glove.actors.running``);
    :meth:`take_guest_endpoint` hands the guest end out once; :meth:`destroy` ends it all.
    """

    def __init__(
        self,
        processor: StatusProcessor,
        *,
        enabled: bool = False,
        owner_uid: int | None = None,
        request_deadline_s: float = REQUEST_DEADLINE_S,
        socketpair_factory: SocketpairFactory = open_socketpair,
    ) -> None:
        """Create and verify the pair, and build (not start) the worker.

        Raises:
            WalletDisabled: ``enabled`` was not set (the default).
            EndpointCheckFailed: a construction check failed; both ends were closed.
            OSError: the socketpair could not be created.
        """
        if not enabled:
            raise WalletDisabled("the wallet status synthetic owner")
        uid = os.geteuid() if owner_uid is None else owner_uid
        if os.geteuid() != uid:
            raise EndpointCheckFailed("creator_uid", f"created by uid {os.geteuid()}, not {uid}")
        if processor.binding.owner_uid != uid:
            raise EndpointCheckFailed(
                "creator_uid", f"the session is bound to uid {processor.binding.owner_uid}"
            )
        host, guest = socketpair_factory()
        try:
            check_endpoint(host, uid, "host")
            check_endpoint(guest, uid, "guest")
        except BaseException:
            host.close()
            guest.close()
            raise
        self.owner_uid = uid
        self._endpoints = Endpoints(host, guest)
        self.closer = SessionCloser()
        self.worker = WalletStatusWorker(
            processor, self._endpoints, self.closer, request_deadline_s=request_deadline_s
        )
        self.destroyed = False

    @property
    def close_reason(self) -> CloseReason | None:
        """Why the session closed, once it has."""
        return self.worker.close_reason

    @property
    def endpoints_open(self) -> bool:
        """True while the session still owns its host end."""
        return self._endpoints.open

    def take_guest_endpoint(self) -> socket.socket:
        """Transfer the guest end to the caller, exactly once (in-process tests only).

        The socket stays close-on-exec; from now on the caller owns and closes it.

        Raises:
            GuestEndpointTaken: already transferred, or the session is closed.
            EndpointCheckFailed: the guest end is no longer close-on-exec.
        """
        guest = self._endpoints.take_guest()
        if not fcntl.fcntl(guest.fileno(), fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
            guest.close()
            raise EndpointCheckFailed("cloexec", "guest end: FD_CLOEXEC was cleared")
        return guest

    async def wait_closed(self, timeout: float = DESTROY_GRACE_S) -> CloseReason:
        """Wait until the session has closed and return why.

        Raises:
            TimeoutError: it is still open after ``timeout`` seconds.
        """
        async with asyncio.timeout(timeout):
            await self.worker.closed.wait()
        assert self.worker.close_reason is not None
        return self.worker.close_reason

    async def destroy(self) -> None:
        """Close the session (if open) and every endpoint it owns; idempotent.

        Raises:
            OwnerLifetimeError: called from the owner's own worker (an authority callback,
                or a task it started): the owner's lifetime is not the worker's to end.
            TimeoutError: the worker did not close within :data:`DESTROY_GRACE_S`.
        """
        if IN_WORKER.get() is self.worker:
            raise OwnerLifetimeError(
                "the synthetic owner cannot be destroyed from its own worker; "
                "request a close through owner.closer instead"
            )
        self.destroyed = True
        self.worker.mark_destroyed()
        if self.worker.state == "new":
            self._endpoints.close_all()  # never started: nobody else will close them
            self.worker.closed.set()
            return
        self.worker.stop()
        await self.wait_closed(DESTROY_GRACE_S)
