"""Who is on the other end of the control socket: ``SO_PEERCRED`` and the bootstrap secret.

Two checks, both required:

1. ``SO_PEERCRED`` as a connection is accepted, before a byte is read: the peer's uid must
   be ours. The kernel fills it at ``connect()``, so it cannot be forged by the peer.
2. The per-start bootstrap secret: 32 random bytes, written as 64 hex characters (no
   newline) to ``bootstrap-secret`` (0600) beside the socket at every start, and removed at
   stop. A client proves it can read that file in its first frame (``hello``); the server
   compares in constant time. The uid check alone admits every process of the owner,
   including ones that merely inherited a connected socket or can only ``connect()`` (a
   sandbox that was handed the socket path but not the runtime directory); the secret also
   proves read access to the 0700 runtime directory, and a new start invalidates every old
   copy of it.

The file is written atomically: a temporary name created ``O_EXCL|O_NOFOLLOW`` with mode
0600 inside the verified owner-only directory (by descriptor, so the directory cannot be
swapped underneath), then ``rename``d over the old one. It is not fsynced: the runtime
directory is volatile by design and a daemon that crashes writes a fresh secret when it
starts again.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from glove.control._address import SECRET_NAME
from glove.control._paths import check_owner_only_dir
from glove.control._secret import SECRET_BYTES

SECRET_MODE: Final = 0o600
_UCRED: Final = struct.Struct("3i")
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    """The process on the other end of a Unix stream socket, as the kernel saw it connect."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """Return the ``SO_PEERCRED`` credentials of a connected Unix stream socket.

    Raises:
        OSError: the socket is not a connected Unix socket.
    """
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCredentials(pid=int(pid), uid=int(uid), gid=int(gid))


def peer_uid(sock: socket.socket) -> int:
    """Return the uid of the process on the other end of a Unix stream socket."""
    return peer_credentials(sock).uid


def write_secret(directory: Path) -> bytes:
    """Write a fresh bootstrap secret into ``directory`` atomically; return it (hex, ASCII).

    Raises:
        UnsafeRuntimeDir: ``directory`` is not an owner-only directory of ours.
        OSError: the file could not be written.
    """
    import secrets  # the server's: a client never pays for hashlib and random

    check_owner_only_dir(directory)
    secret = secrets.token_hex(SECRET_BYTES).encode("ascii")
    dir_fd = os.open(directory, _DIR_FLAGS)
    temp = f".{SECRET_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            SECRET_MODE,
            dir_fd=dir_fd,
        )
        try:
            os.fchmod(fd, SECRET_MODE)  # the mode asked for, whatever the umask
            view = memoryview(secret)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.rename(temp, SECRET_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    finally:
        os.close(dir_fd)
    return secret


def remove_secret(directory: Path) -> None:
    """Remove the bootstrap secret (at stop: no client can prove a dead start's secret)."""
    with contextlib.suppress(FileNotFoundError):
        (directory / SECRET_NAME).unlink()


def secret_matches(expected: bytes, offered: str) -> bool:
    """Compare a secret offered in ``hello`` with ours in constant time (for equal lengths)."""
    import hmac  # the server's, like secrets above

    # surrogatepass: JSON may carry a lone surrogate, which plain UTF-8 cannot encode.
    return hmac.compare_digest(expected, offered.encode("utf-8", "surrogatepass"))
