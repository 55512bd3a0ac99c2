"""Errors raised by the sandbox.

Every class derives from :class:`glove.errors.GloveError` through :class:`SandboxError`::

    SandboxError                   anything the sandbox refuses or fails to do on purpose
    ├── SpecError                  the requested sandbox is malformed (bad bind, bad size, ...)
    ├── ProfileError               a profile file is missing, unreadable or fails strict decoding
    ├── LimitRefused               a requested limit cannot be enforced on this machine
    ├── UnsupportedPlatform        this machine lacks a kernel feature the sandbox needs
    ├── CgroupFormatError          a cgroup or /proc file is not in the kernel's format
    └── SandboxSetupError          building the sandbox failed; the command never ran

A command that runs but cannot be executed (not found, not executable) is not an error: it is
a :class:`~glove.container.SandboxResult` with outcome ``"exec_error"``.
"""

from __future__ import annotations

from glove.errors import GloveError


class SandboxError(GloveError):
    """Base class of every error the sandbox raises deliberately."""


class SpecError(SandboxError, ValueError):
    """The sandbox specification is malformed (the caller's mistake)."""


class ProfileError(SandboxError, ValueError):
    """A profile could not be found, read or strictly decoded."""


class LimitRefused(SandboxError):
    """A requested limit cannot be enforced here at the strength asked for.

    Attributes:
        limit: the limit's name (``memory``, ``pids``, ...).
        reason: why no acceptable mechanism exists on this machine.
    """

    def __init__(self, limit: str, reason: str) -> None:
        super().__init__(f"limit {limit!r} refused: {reason}")
        self.limit = limit
        self.reason = reason


class UnsupportedPlatform(SandboxError):
    """The machine lacks a kernel feature the sandbox cannot work without."""


class CgroupFormatError(SandboxError, ValueError):
    """A cgroup interface file, ``/proc/self/cgroup`` or ``mountinfo`` could not be parsed."""


class SandboxSetupError(SandboxError):
    """Setting up the sandbox failed; the command was never executed."""
