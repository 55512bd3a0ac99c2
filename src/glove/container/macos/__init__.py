"""macOS implementation of the sandbox: a deny-default Seatbelt (SBPL) profile.

:func:`render_sbpl` turns a :class:`~glove.container.SandboxSpec` into the profile text on
any machine (for review: ``glove exec --dry-run --platform macos``); :func:`run` applies it
with ``/usr/bin/sandbox-exec -p`` before the command runs, on macOS only, and refuses with
:class:`~glove.container.UnsupportedPlatform` elsewhere. See docs/macos.md.
"""

from glove.container.macos._run import (
    SANDBOX_EXEC,
    SandboxProcess,
    create_file_no_symlinks,
    launch,
    macos_cwd,
    macos_environment,
    on_macos,
    probe_host_limits,
    resolve_spec_paths,
    rlimits_for,
    run,
    sandbox_exec_argv,
    supervise,
)
from glove.container.macos._sbpl import (
    PRIVATE_TMP_PARAM,
    granted_paths,
    macos_path,
    render_sbpl,
    sbpl_string,
)

__all__ = [
    "PRIVATE_TMP_PARAM",
    "SANDBOX_EXEC",
    "SandboxProcess",
    "create_file_no_symlinks",
    "granted_paths",
    "launch",
    "macos_cwd",
    "macos_environment",
    "macos_path",
    "on_macos",
    "probe_host_limits",
    "render_sbpl",
    "resolve_spec_paths",
    "rlimits_for",
    "run",
    "sandbox_exec_argv",
    "sbpl_string",
    "supervise",
]
