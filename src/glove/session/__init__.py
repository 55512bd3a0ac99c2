"""Sessions: the ``session-<id>`` subtree that owns one contained run (``glove run`` and
``gloved`` alike), and the daemon's session lifecycle."""

from typing import TYPE_CHECKING, Any

from glove.session._build import (
    Foreground,
    SandboxLaunch,
    SessionDescription,
    SessionParts,
    build_session,
    open_session,
    run_foreground,
    session_children,
)
from glove.session._escape import (
    EscapeFilter,
    FilterMode,
    LogFilter,
    ModeTracker,
    TerminalFilter,
    TerminalModes,
)
from glove.session._faults import FAULT_STAGES, KILL_STAGES, arm_fault_hook
from glove.session._sandbox import Kill, SandboxActor, SendSignal
from glove.session._tree import (
    SANDBOX_CHILD,
    SessionOutcome,
    all_started,
    close_once_launched,
    run_session,
    session_result,
    session_tree,
)
from glove.session._wiring import GuestParts, SessionWiring, egress_guest, relay_guest
from glove.session.errors import (
    ExposureError,
    ProjectionRefused,
    RecoveryRefused,
    SessionConflict,
    SessionError,
    SessionLimit,
    SessionNotFound,
)

if TYPE_CHECKING:
    from glove.session._attach import SIGNALS
    from glove.session._methods import SESSION_ERROR_CODES, SessionMethods
    from glove.session._registry import SessionRegistry
    from glove.session._service import LIFECYCLE_METHODS, SessionService, load_service
    from glove.session._views import SessionView

#: gloved's parts, imported on first use: ``glove run`` needs only the session tree.
_LAZY = {
    "SIGNALS": "glove.session._attach",
    "SESSION_ERROR_CODES": "glove.session._methods",
    "SessionMethods": "glove.session._methods",
    "SessionRegistry": "glove.session._registry",
    "SessionView": "glove.session._views",
    "LIFECYCLE_METHODS": "glove.session._service",
    "SessionService": "glove.session._service",
    "load_service": "glove.session._service",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'glove.session' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "FAULT_STAGES",
    "KILL_STAGES",
    "LIFECYCLE_METHODS",
    "SANDBOX_CHILD",
    "SESSION_ERROR_CODES",
    "SIGNALS",
    "EscapeFilter",
    "ExposureError",
    "FilterMode",
    "Foreground",
    "GuestParts",
    "Kill",
    "LogFilter",
    "ModeTracker",
    "ProjectionRefused",
    "RecoveryRefused",
    "SandboxActor",
    "SandboxLaunch",
    "SendSignal",
    "SessionConflict",
    "SessionDescription",
    "SessionError",
    "SessionLimit",
    "SessionMethods",
    "SessionNotFound",
    "SessionOutcome",
    "SessionParts",
    "SessionRegistry",
    "SessionService",
    "SessionView",
    "SessionWiring",
    "TerminalFilter",
    "TerminalModes",
    "all_started",
    "arm_fault_hook",
    "build_session",
    "close_once_launched",
    "egress_guest",
    "load_service",
    "open_session",
    "relay_guest",
    "run_foreground",
    "run_session",
    "session_children",
    "session_result",
    "session_tree",
]
