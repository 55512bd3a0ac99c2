"""The Glove sandbox: run a command contained by namespaces, a minimal root, seccomp and limits.

Typical use::

    from glove.container import SandboxSpec, Bind, Limits, run

    spec = SandboxSpec(argv=("make", "test"), binds=(Bind("/usr"),), workspace="/src/proj",
                       limits=Limits(wall_time=60, memory=512 * 2**20))
    result = run(spec)          # blocks; see run_async for asyncio callers
    print(result.outcome, result.exit_code)

Profiles (:func:`load_profile`, :func:`build_spec`) turn the embedded ``default`` profile or
a TOML file plus command-line overrides into a :class:`SandboxSpec`. :func:`launch` starts a
sandbox and returns a :class:`SandboxProcess` for callers that drive it themselves (the
daemon); ``SandboxSpec.pass_fds`` passes extra descriptors (sockets) into the command.
"""

from __future__ import annotations

from glove.container._backend import (
    SandboxProcess,
    create_file_no_symlinks,
    describe,
    launch,
    probe_host_limits,
    run,
)
from glove.container._description import SandboxDescription
from glove.container._limits import LIMIT_NAMES, HostLimitSupport, LimitPlan, Limits, plan_limits
from glove.container._limits import parse_seconds as parse_seconds
from glove.container._limits import parse_size as parse_size
from glove.container._profile import (
    AgentSection,
    Overrides,
    Profile,
    build_spec,
    decode_profile,
    embedded_profiles,
    load_profile,
)
from glove.container._result import (
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    EXIT_SETUP_FAILED,
    Durations,
    LimitReport,
    OutputReport,
    RetainedReport,
    SandboxResult,
)
from glove.container._selftest import LimitSupport, limit_support, self_test
from glove.container._spec import Bind, Protected, Retained, SandboxSpec
from glove.container.errors import (
    LimitRefused,
    ProfileError,
    SandboxError,
    SandboxSetupError,
    SpecError,
    UnsupportedPlatform,
)


async def run_async(
    spec: SandboxSpec, *, stdin: int = 0, stdout: int = 1, stderr: int = 2
) -> SandboxResult:
    """Run ``spec`` from asyncio without blocking the loop (a worker thread supervises it).

    Cancelling the awaiting task kills the whole sandbox, waits for the worker to finish
    (so nothing is left behind), then re-raises the cancellation.

    Raises:
        LimitRefused: a requested limit cannot be enforced as asked.
        SpecError: the spec is invalid on this host.
        UnsupportedPlatform: the machine lacks seccomp or namespaces.
    """
    import asyncio  # here, not at module level: the CLI never needs it
    import os

    cancel_read, cancel_write = os.pipe2(os.O_CLOEXEC)
    worker = asyncio.ensure_future(
        asyncio.to_thread(
            run, spec, stdin=stdin, stdout=stdout, stderr=stderr, cancel_fd=cancel_read
        )
    )
    try:
        return await asyncio.shield(worker)
    except asyncio.CancelledError:
        os.write(cancel_write, b"x")
        await asyncio.wait([worker])
        raise
    finally:
        os.close(cancel_write)
        if worker.done():
            os.close(cancel_read)
        else:  # pragma: no cover - only if the loop itself is torn down mid-run
            worker.add_done_callback(lambda _: os.close(cancel_read))


__all__ = [
    "EXIT_NOT_EXECUTABLE",
    "EXIT_NOT_FOUND",
    "EXIT_SETUP_FAILED",
    "LIMIT_NAMES",
    "AgentSection",
    "Bind",
    "Durations",
    "HostLimitSupport",
    "LimitPlan",
    "LimitRefused",
    "LimitReport",
    "LimitSupport",
    "Limits",
    "OutputReport",
    "Overrides",
    "Profile",
    "ProfileError",
    "Protected",
    "Retained",
    "RetainedReport",
    "SandboxDescription",
    "SandboxError",
    "SandboxProcess",
    "SandboxResult",
    "SandboxSetupError",
    "SandboxSpec",
    "SpecError",
    "UnsupportedPlatform",
    "build_spec",
    "create_file_no_symlinks",
    "decode_profile",
    "describe",
    "embedded_profiles",
    "launch",
    "limit_support",
    "load_profile",
    "parse_seconds",
    "parse_size",
    "plan_limits",
    "probe_host_limits",
    "run",
    "run_async",
    "self_test",
]
