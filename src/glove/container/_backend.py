"""The sandbox backend of this platform: Linux namespaces, or the macOS Seatbelt profile.

``glove.container`` re-exports these names. The choice is made once, at import, from
``sys.platform``, and only the chosen backend is imported (on Linux each name on first
use, PEP 562, so a caller of the blocking ``run`` never loads the asyncio shell): on macOS
(or any other system) nothing under ``glove.container.linux`` is loaded, so its ctypes
bindings to Linux-only syscalls never run. Elsewhere than Linux, ``launch`` and
``SandboxProcess`` refuse with ``UnsupportedPlatform`` and ``run`` applies the Seatbelt
profile (macOS) or refuses.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if sys.platform == "linux":
    if TYPE_CHECKING:
        from glove.container.linux import (
            AsyncSandbox,
            SandboxProcess,
            create_file_no_symlinks,
            describe,
            launch,
            probe_host_limits,
            probe_unix_gate,
            run,
            run_async,
        )

    def __getattr__(name: str) -> Any:
        # Each name from its own module on first use (glove.container.linux's table):
        # ``glove exec`` takes the blocking run and never loads the asyncio shell.
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from glove.container import linux

        value = getattr(linux, name)
        globals()[name] = value
        return value

else:
    from glove.container._description import SandboxDescription
    from glove.container._result import SandboxResult
    from glove.container._socket_gate import GateSupport
    from glove.container._spec import SandboxSpec
    from glove.container.errors import UnsupportedPlatform
    from glove.container.macos import (
        SandboxProcess,
        create_file_no_symlinks,
        launch,
        probe_host_limits,
        run,
    )

    class AsyncSandbox:  # type: ignore[no-redef]
        """Owning a sandbox from the event loop is the Linux backend's.

        Raises:
            UnsupportedPlatform: always, off Linux.
        """

        def __init__(self, *_args: object, **_kwargs: object) -> None:
            raise UnsupportedPlatform(f"AsyncSandbox needs Linux, not {sys.platform}")

    async def run_async(
        spec: SandboxSpec, *, stdin: int | None = 0, stdout: int = 1, stderr: int = 2
    ) -> SandboxResult:
        """Run ``spec`` in a worker thread (the macOS backend is blocking).

        Raises:
            UnsupportedPlatform: no sandbox backend applies here.
        """
        import asyncio

        return await asyncio.to_thread(
            run, spec, stdin=stdin if stdin is not None else 0, stdout=stdout, stderr=stderr
        )

    def probe_unix_gate() -> GateSupport:
        """No Unix socket gate off Linux (the Seatbelt profile is its own perimeter)."""
        return GateSupport(None, f"the Unix socket gate is Linux's, not {sys.platform}'s", 0)

    def describe(spec: SandboxSpec) -> SandboxDescription:
        """``--dry-run`` describes the Linux sandbox only.

        Raises:
            UnsupportedPlatform: always, off Linux.
        """
        del spec
        raise UnsupportedPlatform(
            f"--dry-run describes the Linux sandbox; on {sys.platform} print the Seatbelt "
            "profile with --dry-run --platform macos"
        )


__all__ = [
    "AsyncSandbox",
    "SandboxProcess",
    "create_file_no_symlinks",
    "describe",
    "launch",
    "probe_host_limits",
    "probe_unix_gate",
    "run",
    "run_async",
]
