"""Linux implementation of the sandbox (namespaces, mounts, seccomp, cgroups, PTY).

Each name below is imported from its private module on first use (PEP 562): importing this
package costs nothing, so a caller that needs only the PTY helpers does not load the
launcher, and on another platform nothing here runs until asked for (``glove.container``
chooses the backend by ``sys.platform``).
"""

from typing import TYPE_CHECKING

from glove._lazy import lazy_exports

if TYPE_CHECKING:
    from glove.container._filter import OutputFilter
    from glove.container.linux._async import AsyncSandbox, OutputHandler
    from glove.container.linux._async_run import FdWriter, raw_terminal, run_async
    from glove.container.linux._cgroups import claim_cgroup_v2, probe_host_limits
    from glove.container.linux._describe import describe
    from glove.container.linux._events import READ_CHUNK_BYTES
    from glove.container.linux._jobs import HOST_SIGNALS, suspend
    from glove.container.linux._launch import SandboxProcess, launch
    from glove.container.linux._launch_guard import (
        InProcessLaunchForbidden,
        forbid_in_process_launch,
    )
    from glove.container.linux._launcher import LauncherHandle, fork_launcher
    from glove.container.linux._launcher_client import (
        LauncherClient,
        LauncherGone,
        RemoteSandboxProcess,
        install_launcher,
        installed_launcher,
    )
    from glove.container.linux._pty import DEFAULT_WINSIZE, RawTerminal, get_winsize, set_winsize
    from glove.container.linux._supervise import run
    from glove.container.linux._syscalls import (
        RESOLVE_NO_MAGICLINKS,
        RESOLVE_NO_SYMLINKS,
        create_file_no_symlinks,
        filesystem_magic,
        openat2,
    )
    from glove.container.linux._unix_gate import probe_unix_gate

_LAZY: dict[str, str] = {
    "DEFAULT_WINSIZE": "glove.container.linux._pty",
    "HOST_SIGNALS": "glove.container.linux._jobs",
    "READ_CHUNK_BYTES": "glove.container.linux._events",
    "RESOLVE_NO_MAGICLINKS": "glove.container.linux._syscalls",
    "RESOLVE_NO_SYMLINKS": "glove.container.linux._syscalls",
    "AsyncSandbox": "glove.container.linux._async",
    "FdWriter": "glove.container.linux._async_run",
    "InProcessLaunchForbidden": "glove.container.linux._launch_guard",
    "OutputFilter": "glove.container._filter",
    "OutputHandler": "glove.container.linux._async",
    "RawTerminal": "glove.container.linux._pty",
    "LauncherClient": "glove.container.linux._launcher_client",
    "LauncherGone": "glove.container.linux._launcher_client",
    "LauncherHandle": "glove.container.linux._launcher",
    "RemoteSandboxProcess": "glove.container.linux._launcher_client",
    "SandboxProcess": "glove.container.linux._launch",
    "forbid_in_process_launch": "glove.container.linux._launch_guard",
    "fork_launcher": "glove.container.linux._launcher",
    "install_launcher": "glove.container.linux._launcher_client",
    "installed_launcher": "glove.container.linux._launcher_client",
    "claim_cgroup_v2": "glove.container.linux._cgroups",
    "create_file_no_symlinks": "glove.container.linux._syscalls",
    "describe": "glove.container.linux._describe",
    "filesystem_magic": "glove.container.linux._syscalls",
    "get_winsize": "glove.container.linux._pty",
    "launch": "glove.container.linux._launch",
    "openat2": "glove.container.linux._syscalls",
    "probe_host_limits": "glove.container.linux._cgroups",
    "probe_unix_gate": "glove.container.linux._unix_gate",
    "raw_terminal": "glove.container.linux._async_run",
    "run": "glove.container.linux._supervise",
    "run_async": "glove.container.linux._async_run",
    "set_winsize": "glove.container.linux._pty",
    "suspend": "glove.container.linux._jobs",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "DEFAULT_WINSIZE",
    "HOST_SIGNALS",
    "READ_CHUNK_BYTES",
    "RESOLVE_NO_MAGICLINKS",
    "RESOLVE_NO_SYMLINKS",
    "AsyncSandbox",
    "FdWriter",
    "InProcessLaunchForbidden",
    "LauncherClient",
    "LauncherGone",
    "LauncherHandle",
    "OutputFilter",
    "OutputHandler",
    "RawTerminal",
    "RemoteSandboxProcess",
    "SandboxProcess",
    "claim_cgroup_v2",
    "create_file_no_symlinks",
    "describe",
    "filesystem_magic",
    "forbid_in_process_launch",
    "fork_launcher",
    "get_winsize",
    "install_launcher",
    "installed_launcher",
    "launch",
    "openat2",
    "probe_host_limits",
    "probe_unix_gate",
    "raw_terminal",
    "run",
    "run_async",
    "set_winsize",
    "suspend",
]
