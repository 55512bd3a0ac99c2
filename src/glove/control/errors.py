"""Errors of the control service and its client.

::

    GloveError
    └── ControlError
        ├── UnsafeRuntimeDir       the runtime directory is not ours, or not owner-only
        ├── SocketPathTooLong      gloved.sock's path does not fit a Unix socket (no /proc)
        ├── DaemonAlreadyRunning   another gloved holds the lock
        ├── DaemonUnavailable      no daemon answers: no socket, refused, no bootstrap secret
        │   └── ConnectionLost     it broke: the daemon closed or reset the connection mid-call
        ├── ClientClosed           you closed it: a call on a client after close()
        ├── ClientTimeout          no reply within the call's timeout (also a ``TimeoutError``)
        ├── RequestInvalid         the request cannot be sent: too large, or not encodable
        ├── RemoteError            the daemon answered with a typed error (``code``, ``data``)
        ├── DaemonProtocolError    the daemon's reply broke the protocol (also a ``ProtocolError``)
        ├── MethodError            a handler refuses a request with a code of its own
        ├── RegistryError          a method registered twice, or with an unusable params type
        └── NotifyError            the service manager's NOTIFY_SOCKET/WATCHDOG_* are unusable

The client raises ``DaemonUnavailable`` through ``DaemonProtocolError`` (one error boundary:
``glove.control._client``); ``gloved``'s start raises the first three; the server side raises
``MethodError`` (handlers) and ``RegistryError`` (wiring).
"""

from __future__ import annotations

import re
from typing import Any

from glove.errors import GloveError
from glove.protocol import ERROR_CODE_PATTERN
from glove.protocol.errors import ProtocolError


class ControlError(GloveError):
    """Base class of control service errors."""


class UnsafeRuntimeDir(ControlError):
    """The runtime directory exists but is not an owner-only directory of this user."""


class SocketPathTooLong(ControlError):
    """``gloved.sock``'s path is longer than a Unix socket address takes, and this platform
    has no ``/proc/self/fd`` route around the limit."""


class DaemonAlreadyRunning(ControlError):
    """Another ``gloved`` instance holds the lock for this runtime directory."""


class DaemonUnavailable(ControlError):
    """Nothing answers on the control socket (or its bootstrap secret cannot be read)."""


class ConnectionLost(DaemonUnavailable):
    """The daemon closed or reset the connection before the call completed."""


class ClientClosed(ControlError):
    """The client was closed by its owner; nothing more can be sent on it."""


class ClientTimeout(ControlError, TimeoutError):
    """No reply arrived within the call's timeout."""


class RequestInvalid(ControlError, ValueError):
    """The caller's request cannot be sent (over the request cap, or params not encodable)."""


class RemoteError(ControlError):
    """The daemon refused a request with a typed error."""

    def __init__(self, code: str, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class DaemonProtocolError(ControlError, ProtocolError):
    """The daemon sent something that is not a valid reply; the connection is unusable."""

    code = "malformed_reply"


class MethodError(ControlError):
    """A method refused a request; the client gets ``code`` (and ``data``), the connection
    stays open.

    Raises:
        ValueError: ``code`` is not snake_case, or is one only the protocol may send.
    """

    def __init__(self, code: str, message: str, data: Any = None) -> None:
        if re.match(ERROR_CODE_PATTERN, code) is None:
            raise ValueError(f"error code {code!r} is not lowercase snake_case")
        # The table of codes is the codec's (msgspec): a client raising errors never needs it.
        from glove.protocol.control import RESERVED_CODES

        if code in RESERVED_CODES:
            raise ValueError(f"error code {code!r} is reserved for the protocol itself")
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class RegistryError(ControlError):
    """A method cannot be registered as asked (duplicate name, params type not strict)."""


class NotifyError(ControlError):
    """The service manager's notification settings are malformed, or a send failed."""
