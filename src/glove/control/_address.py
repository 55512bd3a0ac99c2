"""The runtime directory's file names and a socket's address, on plain strings.

What a client needs to reach ``gloved``, without ``pathlib`` or ``dataclasses`` (the CLI's
one-call commands: docs/decisions/0049-a-json-only-one-shot-call.md);
:mod:`glove.control._paths` re-exports every name and holds the rest (the checks, the lock,
the directory's preparation). Its docstring explains the ``/proc/self/fd`` route.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Final

SOCKET_NAME: Final = "gloved.sock"
LOCK_NAME: Final = "gloved.lock"
SECRET_NAME: Final = "bootstrap-secret"  # noqa: S105 - a file name, not a secret
MAX_SOCKET_PATH_BYTES: Final = 103 if sys.platform == "darwin" else 107
"""Longest socket path ``bind``/``connect`` take, in bytes (``sun_path`` less its NUL)."""
PROC_FD_DIR: Final = "/proc/self/fd"


def long_socket_route() -> bool:
    """Whether a socket path over :data:`MAX_SOCKET_PATH_BYTES` can be reached here (through
    ``/proc/self/fd``)."""
    return sys.platform.startswith("linux") and os.path.isdir(PROC_FD_DIR)  # noqa: PTH112 - no pathlib (0049)


@contextlib.contextmanager
def socket_address(path: str | os.PathLike[str]) -> Iterator[str]:
    """The address to ``bind`` or ``connect`` for the socket at ``path``, valid in the block.

    The path itself when it fits; else ``/proc/self/fd/<n>/<name>`` through an ``O_PATH``
    descriptor of its directory, held open for the block.

    Raises:
        OSError: ``ENAMETOOLONG`` when the path does not fit and there is no ``/proc`` route;
            the directory cannot be opened.
    """
    text = os.fspath(path)
    if len(os.fsencode(text)) <= MAX_SOCKET_PATH_BYTES:
        yield text
        return
    if not long_socket_route():
        raise OSError(
            errno.ENAMETOOLONG,
            f"the socket path is {len(os.fsencode(text))} bytes, over the "
            f"{MAX_SOCKET_PATH_BYTES} a Unix socket takes",
            text,
        )
    directory, name = os.path.split(text)
    fd = os.open(directory or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"{PROC_FD_DIR}/{fd}/{name}"
    finally:
        os.close(fd)
