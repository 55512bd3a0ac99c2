"""The synthetic owner's socketpair: construction checks, SO_PEERCRED, the guest end."""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from glove.testing.wallet import OfflineWorld
from glove.wallet import (
    CloseReason,
    EndpointCheckFailed,
    GuestEndpointTaken,
    StatusProcessor,
    SyntheticOwner,
    WalletDisabled,
    open_socketpair,
)
from tests.conftest import Unpriv
from tests.wallet._owner_helpers import (
    fd_count,
    make_owner,
)

# -- construction --------------------------------------------------------------------------------


def test_disabled_by_default_and_creates_nothing(processor: StatusProcessor) -> None:
    """Without enabled=True construction is refused before any descriptor is created."""
    before = fd_count()
    with pytest.raises(WalletDisabled):
        SyntheticOwner(processor)
    assert fd_count() == before


def test_real_pair_passes_every_check(processor: StatusProcessor) -> None:
    """The default pair: unnamed AF_UNIX stream, non-blocking, close-on-exec, our uid."""
    owner = SyntheticOwner(processor, enabled=True)
    guest = owner.take_guest_endpoint()
    try:
        for sock in (guest, owner.worker._endpoints.host):
            assert sock is not None
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN) == socket.AF_UNIX
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM
            assert fcntl.fcntl(sock.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK
            assert fcntl.fcntl(sock.fileno(), fcntl.F_GETFD) & fcntl.FD_CLOEXEC
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            assert int.from_bytes(creds[4:8], sys.byteorder) == os.getuid()
    finally:
        guest.close()
        asyncio.run(owner.destroy())
    assert not owner.endpoints_open


def _dgram() -> tuple[socket.socket, socket.socket]:
    flags = socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
    return socket.socketpair(socket.AF_UNIX, flags)


def _seqpacket() -> tuple[socket.socket, socket.socket]:
    flags = socket.SOCK_SEQPACKET | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
    return socket.socketpair(socket.AF_UNIX, flags)


def _blocking() -> tuple[socket.socket, socket.socket]:
    host, guest = open_socketpair()
    guest.setblocking(True)
    return host, guest


def _inheritable() -> tuple[socket.socket, socket.socket]:
    host, guest = open_socketpair()
    os.set_inheritable(host.fileno(), True)
    return host, guest


def _tcp_loopback() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    for sock in (client, accepted):
        sock.setblocking(False)
    return accepted, client


def _named_unix() -> tuple[socket.socket, socket.socket]:
    path = Path(tempfile.mkdtemp(prefix="wallet-named-")) / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(path))
        accepted, _ = server.accept()
    path.unlink()
    path.parent.rmdir()
    for sock in (client, accepted):
        sock.setblocking(False)
    return accepted, client


@pytest.mark.parametrize(
    ("factory", "check"),
    [
        (_dgram, "type"),
        (_seqpacket, "type"),
        (_tcp_loopback, "family"),
        (_named_unix, "unnamed"),
        (_blocking, "nonblocking"),
        (_inheritable, "cloexec"),
    ],
)
def test_each_construction_check_refuses_and_closes_both_ends(
    processor: StatusProcessor,
    factory: Callable[[], tuple[socket.socket, socket.socket]],
    check: str,
) -> None:
    """A pair failing one check is refused by that check and both ends are closed."""
    made: list[socket.socket] = []

    def recording() -> tuple[socket.socket, socket.socket]:
        pair = factory()
        made.extend(pair)
        return pair

    with pytest.raises(EndpointCheckFailed) as caught:
        SyntheticOwner(processor, enabled=True, socketpair_factory=recording)
    assert caught.value.check == check
    assert [sock.fileno() for sock in made] == [-1, -1]


def test_creator_uid_must_be_the_owner(world: OfflineWorld) -> None:
    """An owner uid other than the creating process's is refused, nothing left open."""
    world.owner_uid = os.geteuid() + 1  # the binding agrees: only the creator check refuses
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    before = fd_count()
    with pytest.raises(EndpointCheckFailed) as caught:
        SyntheticOwner(processor, enabled=True, owner_uid=os.geteuid() + 1)
    assert caught.value.check == "creator_uid"
    assert "created by uid" in str(caught.value)
    assert fd_count() == before


def test_binding_owner_must_be_the_creator(world: OfflineWorld) -> None:
    """A session bound to another uid cannot be served by this process's owner."""
    world.owner_uid = os.getuid() + 1
    processor = StatusProcessor(world.binding(), world.authorities(), clock=world.clock)
    with pytest.raises(EndpointCheckFailed) as caught:
        SyntheticOwner(processor, enabled=True)
    assert caught.value.check == "creator_uid"
    assert "the session is bound to uid" in str(caught.value)


_FOREIGN_PAIR = """
import array, socket, sys
parent = socket.socket(fileno=int(sys.argv[1]))
flags = socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
a, b = socket.socketpair(socket.AF_UNIX, flags)
fds = array.array("i", [a.fileno(), b.fileno()])
parent.sendmsg([b"p"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
"""


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to create a pair as another uid")
def test_pair_created_by_another_uid_is_refused_by_so_peercred(
    processor: StatusProcessor, unpriv: Unpriv
) -> None:
    """A pair the test user created (passed over SCM_RIGHTS) fails the peer-uid check."""

    def foreign() -> tuple[socket.socket, socket.socket]:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            subprocess.run(
                ["/usr/bin/python3", "-c", _FOREIGN_PAIR, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                check=True,
                timeout=30,
                user=unpriv.uid,
                group=unpriv.gid,
                extra_groups=[],
            )
            _msg, fds, _flags, _addr = socket.recv_fds(ours, 1, 2)
        host, guest = (socket.socket(fileno=fd) for fd in fds)
        for sock in (host, guest):
            sock.setblocking(False)
            sock.set_inheritable(False)  # recv_fds ignores MSG_CMSG_CLOEXEC on 3.11
        creds = host.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        assert int.from_bytes(creds[4:8], sys.byteorder) == unpriv.uid
        return host, guest

    with pytest.raises(EndpointCheckFailed) as caught:
        SyntheticOwner(processor, enabled=True, socketpair_factory=foreign)
    assert caught.value.check == "peer_uid"


# -- the guest end ---------------------------------------------------------------------------------


async def test_guest_end_is_transferred_exactly_once(world: OfflineWorld) -> None:
    """The guest end can be taken once; a second take is refused."""
    owner = make_owner(world)
    guest = owner.take_guest_endpoint()
    try:
        with pytest.raises(GuestEndpointTaken, match="already transferred"):
            owner.take_guest_endpoint()
    finally:
        guest.close()
        await owner.destroy()


async def test_transferred_guest_end_stays_close_on_exec(world: OfflineWorld) -> None:
    """A child started without closing descriptors does not inherit the guest end."""
    owner = make_owner(world)
    guest = owner.take_guest_endpoint()
    try:
        assert fcntl.fcntl(guest.fileno(), fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import os, sys; os.fstat(int(sys.argv[1]))",
            str(guest.fileno()),
            close_fds=False,
            stderr=subprocess.PIPE,
        )
        _out, err = await child.communicate()
        assert child.returncode != 0
        assert b"Bad file descriptor" in err
    finally:
        guest.close()
        await owner.destroy()


async def test_untaken_guest_end_is_closed_with_the_session(world: OfflineWorld) -> None:
    """Destroying the session closes the guest end it still owns; it can no longer be taken."""
    owner = make_owner(world)
    guest = owner.worker._endpoints.guest
    assert guest is not None
    await owner.destroy()
    assert guest.fileno() == -1
    assert owner.close_reason is CloseReason.DESTROYED
    with pytest.raises(GuestEndpointTaken, match="session is closed"):
        owner.take_guest_endpoint()
