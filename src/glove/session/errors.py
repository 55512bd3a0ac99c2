"""Errors of sessions: the subtree that owns one contained run, and the daemon's registry.

::

    GloveError
    └── SessionError
        ├── SessionNotFound       no session has that id
        ├── SessionConflict       the request does not fit the session's state
        ├── SessionLimit          too many sessions are running at once
        ├── ExposureError         an exposure cannot be created, resolved or revoked
        ├── ProjectionRefused     a plan's projection cannot be resolved, verified, frozen
        │                         or mounted (``code``: glove.library's, or
        │                         projection_target_conflict, projection_unavailable)
        ├── RecoveryRefused       the daemon's journals disagree; it will not start
        ├── FixtureRefused        a refinement plan's fixture cannot be read or decoded
        ├── EnvelopeMismatch      a terminal envelope of the wrong kind for its plan
        └── TerminalError         a session's terminal cannot do what was asked
            ├── NoTerminal        the session has no terminal (pipes), or its transcript is gone
            ├── NotWriter         the viewer is not the session's writer
            ├── InputBusy         the agent is not reading its input; the queue is full
            └── TranscriptCorrupt a transcript's files do not verify
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


class ProjectionRefused(SessionError):
    """A plan's projection was refused at prepare or in the sandbox's init; nothing of it
    is mounted and the command does not run.

    Attributes:
        code: the stable code (``glove.library``'s, such as ``projection_digest_mismatch``,
            or ``projection_target_conflict``, ``projection_unavailable``); the text is
            ``[code] message`` so that the init's one-line setup report keeps it.
        alias: the projection's alias.
    """

    def __init__(self, code: str, message: str, *, alias: str = "") -> None:
        """Build the error."""
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.alias = alias


class RecoveryRefused(SessionError):
    """The daemon's journals do not verify or disagree with each other: it will not start."""


class FixtureRefused(SessionError):
    """A refinement plan's fixture was refused at prepare: the library refused the bundle
    (its ``projection_*`` or ``library_*`` code), or the bytes are no fixture
    (``fixture_invalid``). Nothing was launched.

    Attributes:
        code: the stable error code, as the receipt carries it.
    """

    def __init__(self, code: str, message: str) -> None:
        """Build the refusal with its code."""
        super().__init__(message)
        self.code = code


class EnvelopeMismatch(SessionError):
    """A terminal envelope of the wrong kind for its plan (a resource receipt for a
    refinement plan, or a refinement envelope for a resource plan): a bug, refused before
    anything is appended."""


class TerminalError(SessionError):
    """A session's terminal cannot do what was asked."""


class NoTerminal(TerminalError):
    """The session has no terminal (its plan says pipes), or its transcript is gone."""


class NotWriter(TerminalError):
    """The viewer is not the session's writer (another client took the terminal)."""


class InputBusy(TerminalError):
    """The agent is not reading its terminal: the input queue is full."""


class TranscriptCorrupt(TerminalError):
    """A transcript's ring or its metadata does not verify (torn, resized, or tampered)."""
