"""What every control client shares, without a codec: its bounds, paths and error boundary.

:func:`foreign` is the single place a foreign exception (``OSError``,
``TimeoutError``, a protocol error while decoding a reply) becomes a ``ControlError`` that
says who caused it:

==========================================  ============================================
what happened                               raised
==========================================  ============================================
no socket, connection refused, no secret    ``DaemonUnavailable``
reset, broken pipe, EOF mid-call            ``ConnectionLost`` (it broke)
the client was closed by its owner          ``ClientClosed`` (you closed it)
no reply in time                            ``ClientTimeout``
an error frame                              ``RemoteError(code, message, data)``
a reply that is not a valid frame           ``DaemonProtocolError``
==========================================  ============================================
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, Final

from glove._version import __version__
from glove.config import chosen_runtime_dir, path_text
from glove.control._address import SECRET_NAME, SOCKET_NAME
from glove.control.errors import (
    ConnectionLost,
    ControlError,
    DaemonProtocolError,
    DaemonUnavailable,
)
from glove.protocol import MAX_DEADLINE_MS, ProtocolError, TruncatedFrame

if TYPE_CHECKING:
    from pathlib import Path

#: A call's timeout when the caller gives none.
CLIENT_DEADLINE_S: Final = 10.0
#: The client waits this much longer than the deadline it sends, so the daemon's own
#: ``deadline_exceeded`` arrives before the client gives up.
CLIENT_GRACE_S: Final = 0.5
#: The client's name in ``hello`` when the caller gives none.
DEFAULT_CLIENT_NAME: Final = f"glove/{__version__}"
RECV_BYTES: Final = 64 * 1024
_CONNECT_UNAVAILABLE: Final = frozenset(
    {errno.ENOENT, errno.ECONNREFUSED, errno.EACCES, errno.ENOTDIR, errno.ENAMETOOLONG}
)


def runtime_socket(directory: Path | None = None) -> tuple[Path, Path]:
    """The socket and secret paths of a runtime directory (default: this user's)."""
    from pathlib import Path  # the typed clients' (the one-shot call reads runtime_files)

    socket_path, secret_path = runtime_files(directory)
    return Path(socket_path), Path(secret_path)


def runtime_files(directory: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """:func:`runtime_socket` on plain strings, written as ``str(Path)`` writes them."""
    base = chosen_runtime_dir() if directory is None else os.fspath(directory)
    return path_text(base, SOCKET_NAME), path_text(base, SECRET_NAME)


def foreign(exc: BaseException, *, connecting: bool, where: str | Path) -> ControlError:  # noqa: PLR0911 - one per row
    """Map a foreign exception to the ``ControlError`` that says who caused it."""
    if isinstance(exc, ControlError):
        return exc
    if isinstance(exc, TruncatedFrame):
        return ConnectionLost(f"gloved closed the connection inside a reply: {exc}")
    if isinstance(exc, ProtocolError):
        return DaemonProtocolError(f"gloved sent an invalid reply: {exc}")
    if isinstance(exc, OSError):
        if connecting and exc.errno in _CONNECT_UNAVAILABLE:
            hint = (
                "start it with `glove daemon install` or `gloved`"
                if exc.errno != errno.EACCES
                else "not ours?"
            )
            return DaemonUnavailable(f"no gloved listens on {where} ({exc.strerror}); {hint}")
        if connecting:
            return DaemonUnavailable(f"cannot connect to {where}: {exc.strerror or exc}")
        return ConnectionLost(f"the connection to gloved broke: {exc.strerror or exc}")
    return ControlError(f"control client failed: {type(exc).__name__}: {exc}")


def deadline_ms(timeout: float) -> int:
    """A request's ``deadline_ms`` for a call of ``timeout`` seconds (within the protocol's)."""
    return max(1, min(round(timeout * 1000), MAX_DEADLINE_MS))
