"""The ``gloved`` control service: owner-only socket, method registry, clients.

The wire format and every error code: ``docs/protocol.md``. The server side:
:class:`MethodRegistry` (typed methods, the lifecycle gate), :class:`ControlServer` (the
socket actor), :class:`Composition` (what a daemon composes around them; ``gloved``'s root
tree is :func:`glove.daemon.build_root`). The client side: :class:`Client` (blocking),
:class:`AsyncClient`, each with typed calls (``client.session_status(sid)`` is a
:class:`SessionStatus`) besides ``call``; the one-shot :func:`call`, and :func:`call_once`,
the same call in JSON alone (no msgspec) for the CLI's one-call commands.

Every name but the errors is imported from its module on first use (PEP 562): a one-call
command (``glove capabilities``, ``glove session status``) loads :func:`call_once` alone,
never a typed client, its codec, the server, the registry or the notifier (issue 22).
"""

from typing import TYPE_CHECKING, Any

from glove.control.errors import (
    ClientClosed,
    ClientTimeout,
    ConnectionLost,
    ControlError,
    DaemonAlreadyRunning,
    DaemonProtocolError,
    DaemonUnavailable,
    MethodError,
    NotifyError,
    RegistryError,
    RemoteError,
    RequestInvalid,
    SocketPathTooLong,
    UnsafeRuntimeDir,
)

if TYPE_CHECKING:
    # The runtime directory's choice is glove.config's (several layers read it); named here too.
    from glove.config import RuntimeDirChoice, choose_runtime_dir, glove_state_dir
    from glove.control._address import (
        MAX_SOCKET_PATH_BYTES,
        SOCKET_NAME,
        long_socket_route,
        socket_address,
    )
    from glove.control._async_client import AsyncClient, AsyncStream
    from glove.control._auth import PeerCredentials, peer_credentials, peer_uid
    from glove.control._builtin import BuiltinMethods, CapabilitiesProvider
    from glove.control._client import Client, SyncStream, call
    from glove.control._composition import Composition
    from glove.control._connection import Limits
    from glove.control._notify import Notifier, ServiceNotifier

    # The sd_notify datagram's codec, under a name that says whose message it decodes.
    from glove.control._notify_wire import decode_message as decode_notify_message
    from glove.control._oneshot import call_once
    from glove.control._paths import (
        RuntimePaths,
        acquire_lock,
        check_owner_only_dir,
        default_runtime_dir,
        prepare_runtime_dir,
    )
    from glove.control._registry import (
        DEFAULT_STREAM_DEADLINE_S,
        DEFAULT_UNARY_DEADLINE_S,
        CallContext,
        MethodRegistry,
        MethodSpec,
    )
    from glove.control._results import (
        Acked,
        Attached,
        AttachEvent,
        AttachModes,
        DetachResult,
        Ended,
        Exposure,
        Gap,
        InputResult,
        Output,
        PlanVerdict,
        ReceiptPage,
        ReceiptRow,
        ResizeResult,
        Role,
        SessionPage,
        SessionState,
        SessionStatus,
        SignalName,
        SignalResult,
    )
    from glove.control._secret import read_secret
    from glove.control._server import ControlServer

#: name -> (module, attribute) of every lazily imported name.
_LAZY: dict[str, tuple[str, str]] = {
    "RuntimeDirChoice": ("glove.config", "RuntimeDirChoice"),
    "choose_runtime_dir": ("glove.config", "choose_runtime_dir"),
    "glove_state_dir": ("glove.config", "glove_state_dir"),
    "AsyncClient": ("glove.control._async_client", "AsyncClient"),
    "AsyncStream": ("glove.control._async_client", "AsyncStream"),
    "PeerCredentials": ("glove.control._auth", "PeerCredentials"),
    "peer_credentials": ("glove.control._auth", "peer_credentials"),
    "peer_uid": ("glove.control._auth", "peer_uid"),
    "read_secret": ("glove.control._secret", "read_secret"),
    "BuiltinMethods": ("glove.control._builtin", "BuiltinMethods"),
    "CapabilitiesProvider": ("glove.control._builtin", "CapabilitiesProvider"),
    "Client": ("glove.control._client", "Client"),
    "SyncStream": ("glove.control._client", "SyncStream"),
    "call": ("glove.control._client", "call"),
    "Composition": ("glove.control._composition", "Composition"),
    "Limits": ("glove.control._connection", "Limits"),
    "Notifier": ("glove.control._notify", "Notifier"),
    "ServiceNotifier": ("glove.control._notify", "ServiceNotifier"),
    "decode_notify_message": ("glove.control._notify_wire", "decode_message"),
    "call_once": ("glove.control._oneshot", "call_once"),
    "MAX_SOCKET_PATH_BYTES": ("glove.control._address", "MAX_SOCKET_PATH_BYTES"),
    "RuntimePaths": ("glove.control._paths", "RuntimePaths"),
    "SOCKET_NAME": ("glove.control._address", "SOCKET_NAME"),
    "acquire_lock": ("glove.control._paths", "acquire_lock"),
    "check_owner_only_dir": ("glove.control._paths", "check_owner_only_dir"),
    "default_runtime_dir": ("glove.control._paths", "default_runtime_dir"),
    "long_socket_route": ("glove.control._address", "long_socket_route"),
    "prepare_runtime_dir": ("glove.control._paths", "prepare_runtime_dir"),
    "socket_address": ("glove.control._address", "socket_address"),
    "Exposure": ("glove.control._results", "Exposure"),
    "Acked": ("glove.control._results", "Acked"),
    "AttachEvent": ("glove.control._results", "AttachEvent"),
    "AttachModes": ("glove.control._results", "AttachModes"),
    "Attached": ("glove.control._results", "Attached"),
    "DetachResult": ("glove.control._results", "DetachResult"),
    "Ended": ("glove.control._results", "Ended"),
    "Gap": ("glove.control._results", "Gap"),
    "InputResult": ("glove.control._results", "InputResult"),
    "Output": ("glove.control._results", "Output"),
    "ReceiptPage": ("glove.control._results", "ReceiptPage"),
    "ReceiptRow": ("glove.control._results", "ReceiptRow"),
    "ResizeResult": ("glove.control._results", "ResizeResult"),
    "Role": ("glove.control._results", "Role"),
    "SignalName": ("glove.control._results", "SignalName"),
    "SignalResult": ("glove.control._results", "SignalResult"),
    "PlanVerdict": ("glove.control._results", "PlanVerdict"),
    "SessionPage": ("glove.control._results", "SessionPage"),
    "SessionState": ("glove.control._results", "SessionState"),
    "SessionStatus": ("glove.control._results", "SessionStatus"),
    "CallContext": ("glove.control._registry", "CallContext"),
    "DEFAULT_STREAM_DEADLINE_S": ("glove.control._registry", "DEFAULT_STREAM_DEADLINE_S"),
    "DEFAULT_UNARY_DEADLINE_S": ("glove.control._registry", "DEFAULT_UNARY_DEADLINE_S"),
    "MethodRegistry": ("glove.control._registry", "MethodRegistry"),
    "MethodSpec": ("glove.control._registry", "MethodSpec"),
    "ControlServer": ("glove.control._server", "ControlServer"),
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'glove.control' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_STREAM_DEADLINE_S",
    "DEFAULT_UNARY_DEADLINE_S",
    "MAX_SOCKET_PATH_BYTES",
    "SOCKET_NAME",
    "Acked",
    "AsyncClient",
    "AsyncStream",
    "AttachEvent",
    "AttachModes",
    "Attached",
    "BuiltinMethods",
    "CallContext",
    "CapabilitiesProvider",
    "Client",
    "ClientClosed",
    "ClientTimeout",
    "Composition",
    "ConnectionLost",
    "ControlError",
    "ControlServer",
    "DaemonAlreadyRunning",
    "DaemonProtocolError",
    "DaemonUnavailable",
    "DetachResult",
    "Ended",
    "Exposure",
    "Gap",
    "InputResult",
    "Limits",
    "MethodError",
    "MethodRegistry",
    "MethodSpec",
    "Notifier",
    "NotifyError",
    "Output",
    "PeerCredentials",
    "PlanVerdict",
    "ReceiptPage",
    "ReceiptRow",
    "RegistryError",
    "RemoteError",
    "RequestInvalid",
    "ResizeResult",
    "Role",
    "RuntimeDirChoice",
    "RuntimePaths",
    "ServiceNotifier",
    "SessionPage",
    "SessionState",
    "SessionStatus",
    "SignalName",
    "SignalResult",
    "SocketPathTooLong",
    "SyncStream",
    "UnsafeRuntimeDir",
    "acquire_lock",
    "call",
    "call_once",
    "check_owner_only_dir",
    "choose_runtime_dir",
    "decode_notify_message",
    "default_runtime_dir",
    "glove_state_dir",
    "long_socket_route",
    "peer_credentials",
    "peer_uid",
    "prepare_runtime_dir",
    "read_secret",
    "socket_address",
]
