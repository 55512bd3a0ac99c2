"""Errors of sessions: the subtree that owns one contained run, and the daemon's registry.

::

    GloveError
    └── SessionError
        ├── SessionNotFound       no session has that id
        ├── SessionConflict       the request does not fit the session's state
        ├── SessionLimit          too many sessions are running at once
        ├── ExposureError         an exposure cannot be created, resolved or revoked
        └── RecoveryRefused       the daemon's journals disagree; it will not start
"""

from __future__ import annotations

from glove.errors import GloveError


class SessionError(GloveError):
    """Base class of session errors."""


class SessionNotFound(SessionError):
    """No session has that id."""


class SessionConflict(SessionError):
    """The request does not fit the session's state (stop a terminal one, clean a running one)."""


class SessionLimit(SessionError):
    """The daemon already runs as many sessions as its configuration allows."""


class ExposureError(SessionError):
    """An exposure cannot be created, resolved (revoked, stale, changed) or revoked."""


class RecoveryRefused(SessionError):
    """The daemon's journals do not verify or disagree with each other: it will not start."""
