"""Sessions: the ``session-<id>`` subtree that owns one contained run (``glove run`` and
``gloved`` alike), and the daemon's session lifecycle."""

from glove.session._sandbox import Kill, SandboxActor, SendSignal
from glove.session._tree import SANDBOX_CHILD, SessionOutcome, run_session, session_tree
from glove.session.errors import (
    ExposureError,
    RecoveryRefused,
    SessionConflict,
    SessionError,
    SessionLimit,
    SessionNotFound,
)

__all__ = [
    "SANDBOX_CHILD",
    "ExposureError",
    "Kill",
    "RecoveryRefused",
    "SandboxActor",
    "SendSignal",
    "SessionConflict",
    "SessionError",
    "SessionLimit",
    "SessionNotFound",
    "SessionOutcome",
    "run_session",
    "session_tree",
]
