"""The ``gloved`` control service: owner-only socket, method registry, clients.

The wire format and every error code: ``docs/protocol.md``. The server side:
:class:`MethodRegistry` (typed methods, the lifecycle gate), :class:`ControlServer` (the
socket actor), :class:`Composition` (what a daemon composes around them; ``gloved``'s root
tree is :func:`glove.daemon.build_root`). The client side: :class:`Client` (blocking),
:class:`AsyncClient`, and the one-shot :func:`call`.
"""

# The runtime directory's choice is glove.config's (several layers read it); named here too.
from glove.config import RuntimeDirChoice, choose_runtime_dir, glove_state_dir
from glove.control._async_client import AsyncClient, AsyncStream
from glove.control._auth import PeerCredentials, peer_credentials, peer_uid, read_secret
from glove.control._builtin import BuiltinMethods, CapabilitiesProvider
from glove.control._client import Client, SyncStream, call
from glove.control._composition import Composition
from glove.control._connection import Limits
from glove.control._notify import Notifier, ServiceNotifier

# The sd_notify datagram's codec, under a name that says whose message it decodes.
from glove.control._notify_wire import decode_message as decode_notify_message
from glove.control._paths import (
    MAX_SOCKET_PATH_BYTES,
    SOCKET_NAME,
    RuntimePaths,
    acquire_lock,
    check_owner_only_dir,
    default_runtime_dir,
    long_socket_route,
    prepare_runtime_dir,
    socket_address,
)
from glove.control._registry import (
    DEFAULT_STREAM_DEADLINE_S,
    DEFAULT_UNARY_DEADLINE_S,
    CallContext,
    MethodRegistry,
    MethodSpec,
)
from glove.control._server import ControlServer
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

__all__ = [
    "DEFAULT_STREAM_DEADLINE_S",
    "DEFAULT_UNARY_DEADLINE_S",
    "MAX_SOCKET_PATH_BYTES",
    "SOCKET_NAME",
    "AsyncClient",
    "AsyncStream",
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
    "Limits",
    "MethodError",
    "MethodRegistry",
    "MethodSpec",
    "Notifier",
    "NotifyError",
    "PeerCredentials",
    "RegistryError",
    "RemoteError",
    "RequestInvalid",
    "RuntimeDirChoice",
    "RuntimePaths",
    "ServiceNotifier",
    "SocketPathTooLong",
    "SyncStream",
    "UnsafeRuntimeDir",
    "acquire_lock",
    "call",
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
