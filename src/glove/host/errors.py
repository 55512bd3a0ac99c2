"""Errors of host integration: setup and the per-user service.

::

    GloveError
    └── HostError
        └── ServiceError                 glove daemon could not do what was asked
            ├── UnsupportedPlatform      neither systemd (Linux) nor launchd (macOS)
            ├── ExecutableNotFound       no installed gloved next to the interpreter or on PATH
            ├── UnsafeExecutable         gloved, or a directory above it, is writable by others
            ├── TemplateError            a service template is missing or renders wrongly
            ├── ServiceFileModified      an installed file is not what install wrote (--force)
            ├── ManifestError            the install manifest is unreadable or not ours
            └── ServiceManagerFailed     systemctl/launchctl failed (its argv and stderr)
                └── NoUserManager        this user has no systemd user manager to talk to

``UnsafePath`` and ``GlovedConfigError``, which this module names too, are
:mod:`glove.config`'s (``glove.config.errors``): Glove's own files and gloved.toml are read
by layers below this one.
"""

from __future__ import annotations

from collections.abc import Sequence

from glove.config.errors import GlovedConfigError, UnsafePath
from glove.errors import GloveError

__all__ = [
    "ExecutableNotFound",
    "GlovedConfigError",
    "HostError",
    "ManifestError",
    "ServiceError",
    "ServiceFileModified",
    "ServiceManagerFailed",
    "TemplateError",
    "UnsafeExecutable",
    "UnsafePath",
    "UnsupportedPlatform",
]


class HostError(GloveError):
    """Base class of host integration errors."""


class ServiceError(HostError):
    """Base class of ``glove daemon`` errors."""


class UnsupportedPlatform(ServiceError):
    """This platform has no supported per-user service manager."""


class ExecutableNotFound(ServiceError):
    """No ``gloved`` executable could be resolved locally."""


class UnsafeExecutable(ServiceError):
    """The resolved ``gloved`` could be replaced by another user."""


class TemplateError(ServiceError):
    """A service template is missing, has unexpected tokens, or renders invalid output."""


class ServiceFileModified(ServiceError):
    """A service file exists that install did not write, or was edited since.

    Attributes:
        path: the file.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


class ManifestError(ServiceError):
    """The install manifest cannot be read, is malformed, or is not owner-only."""


class ServiceManagerFailed(ServiceError):
    """The service manager tool failed, or is missing.

    Attributes:
        argv: the command that was run.
        returncode: its exit status (None when it could not be started).
        stderr: what it printed on stderr (trimmed).
    """

    def __init__(
        self, argv: Sequence[str], returncode: int | None, stderr: str, message: str
    ) -> None:
        super().__init__(message)
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


class NoUserManager(ServiceManagerFailed):
    """This user has no systemd user manager (no login session, no lingering): the message
    says how to get one (``loginctl enable-linger``, a login session)."""
