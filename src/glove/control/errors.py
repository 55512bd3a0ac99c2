"""Errors of the control service and its client.

::

    GloveError
    └── ControlError
        ├── UnsafeRuntimeDir       the runtime directory is not ours, or not owner-only
        ├── DaemonAlreadyRunning   another gloved holds the lock
        ├── DaemonUnavailable      no daemon answers on the socket
        ├── RemoteError            the daemon answered with a typed error (``code``)
        └── NotifyError            the service manager's NOTIFY_SOCKET/WATCHDOG_* are unusable
"""

from __future__ import annotations

from glove.errors import GloveError


class ControlError(GloveError):
    """Base class of control service errors."""


class UnsafeRuntimeDir(ControlError):
    """The runtime directory exists but is not an owner-only directory of this user."""


class DaemonAlreadyRunning(ControlError):
    """Another ``gloved`` instance holds the lock for this runtime directory."""


class DaemonUnavailable(ControlError):
    """Nothing answers on the control socket."""


class RemoteError(ControlError):
    """The daemon refused a request with a typed error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class NotifyError(ControlError):
    """The service manager's notification settings are malformed, or a send failed."""
