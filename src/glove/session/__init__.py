"""Sessions: the ``session-<id>`` subtree that owns one contained run (``glove run`` and
``gloved`` alike), and the daemon's session lifecycle."""

from typing import TYPE_CHECKING

from glove._lazy import lazy_exports

if TYPE_CHECKING:
    from glove.session._attach import SIGNALS
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
    from glove.session._methods import SESSION_ERROR_CODES, SessionMethods
    from glove.session._projections import load_projections
    from glove.session._registry import SessionRegistry
    from glove.session._sandbox import AwaitResult, Kill, SandboxActor, SendSignal
    from glove.session._service import LIFECYCLE_METHODS, SessionService, load_service
    from glove.session._tree import (
        SANDBOX_CHILD,
        SessionOutcome,
        all_started,
        close_once_launched,
        run_session,
        session_result,
        session_tree,
    )
    from glove.session._views import SessionView
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

#: Every name, imported on first use (PEP 562): ``glove exec`` on a terminal needs only the
#: terminal filter, ``glove run`` only the session tree, never gloved's parts.
_LAZY: dict[str, str] = {
    "Foreground": "glove.session._build",
    "SandboxLaunch": "glove.session._build",
    "SessionDescription": "glove.session._build",
    "SessionParts": "glove.session._build",
    "build_session": "glove.session._build",
    "open_session": "glove.session._build",
    "run_foreground": "glove.session._build",
    "session_children": "glove.session._build",
    "EscapeFilter": "glove.session._escape",
    "FilterMode": "glove.session._escape",
    "LogFilter": "glove.session._escape",
    "ModeTracker": "glove.session._escape",
    "TerminalFilter": "glove.session._escape",
    "TerminalModes": "glove.session._escape",
    "FAULT_STAGES": "glove.session._faults",
    "KILL_STAGES": "glove.session._faults",
    "arm_fault_hook": "glove.session._faults",
    "AwaitResult": "glove.session._sandbox",
    "Kill": "glove.session._sandbox",
    "SandboxActor": "glove.session._sandbox",
    "SendSignal": "glove.session._sandbox",
    "SANDBOX_CHILD": "glove.session._tree",
    "SessionOutcome": "glove.session._tree",
    "all_started": "glove.session._tree",
    "close_once_launched": "glove.session._tree",
    "run_session": "glove.session._tree",
    "session_result": "glove.session._tree",
    "session_tree": "glove.session._tree",
    "GuestParts": "glove.session._wiring",
    "SessionWiring": "glove.session._wiring",
    "egress_guest": "glove.session._wiring",
    "relay_guest": "glove.session._wiring",
    "ExposureError": "glove.session.errors",
    "ProjectionRefused": "glove.session.errors",
    "RecoveryRefused": "glove.session.errors",
    "SessionConflict": "glove.session.errors",
    "SessionError": "glove.session.errors",
    "SessionLimit": "glove.session.errors",
    "SessionNotFound": "glove.session.errors",
    "SIGNALS": "glove.session._attach",
    "SESSION_ERROR_CODES": "glove.session._methods",
    "SessionMethods": "glove.session._methods",
    "SessionRegistry": "glove.session._registry",
    "SessionView": "glove.session._views",
    "LIFECYCLE_METHODS": "glove.session._service",
    "SessionService": "glove.session._service",
    "load_service": "glove.session._service",
    "load_projections": "glove.session._projections",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "FAULT_STAGES",
    "KILL_STAGES",
    "LIFECYCLE_METHODS",
    "SANDBOX_CHILD",
    "SESSION_ERROR_CODES",
    "SIGNALS",
    "AwaitResult",
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
    "load_projections",
    "load_service",
    "open_session",
    "relay_guest",
    "run_foreground",
    "run_session",
    "session_children",
    "session_result",
    "session_tree",
]
