"""The ``gloved`` control service: owner-only socket, root tree, client."""

from glove.control._daemon import build_root, run_daemon, serve
from glove.control._notify import Notifier, ServiceNotifier
from glove.control._paths import (
    RuntimePaths,
    acquire_lock,
    check_owner_only_dir,
    default_runtime_dir,
    prepare_runtime_dir,
)
from glove.control._server import ControlServer, MethodError, peer_uid
from glove.control.client import call
from glove.control.errors import (
    ControlError,
    DaemonAlreadyRunning,
    DaemonUnavailable,
    NotifyError,
    RemoteError,
    UnsafeRuntimeDir,
)

__all__ = [
    "ControlError",
    "ControlServer",
    "DaemonAlreadyRunning",
    "DaemonUnavailable",
    "MethodError",
    "Notifier",
    "NotifyError",
    "RemoteError",
    "RuntimePaths",
    "ServiceNotifier",
    "UnsafeRuntimeDir",
    "acquire_lock",
    "build_root",
    "call",
    "check_owner_only_dir",
    "default_runtime_dir",
    "peer_uid",
    "prepare_runtime_dir",
    "run_daemon",
    "serve",
]
