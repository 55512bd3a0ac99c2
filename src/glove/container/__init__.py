"""The Glove sandbox: run a command contained by namespaces, a minimal root, seccomp and limits.

Typical use::

    from glove.container import SandboxSpec, Bind, Limits, run

    spec = SandboxSpec(argv=("make", "test"), binds=(Bind("/usr"),), workspace="/src/proj",
                       limits=Limits(wall_time=60, memory=512 * 2**20))
    result = run(spec)          # blocks; see run_async for asyncio callers
    print(result.outcome, result.exit_code)

Profiles (:func:`load_profile`, :func:`build_spec`) turn the embedded ``default`` profile or
a TOML file plus command-line overrides into a :class:`SandboxSpec`. :class:`AsyncSandbox`
owns a sandbox from the event loop (no thread held: the daemon's sessions use it) and
:func:`run_async` runs one with its output to host descriptors; :func:`launch` starts a
sandbox and returns a :class:`SandboxProcess` for callers that drive it themselves.
``SandboxSpec.pass_fds`` passes extra descriptors (sockets) into the command.
"""

from __future__ import annotations

from glove.container._backend import (
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
from glove.container._description import SandboxDescription
from glove.container._limits import (
    LIMIT_NAMES,
    SANDBOX_LIMIT_NAMES,
    HostLimitSupport,
    LimitPlan,
    Limits,
    plan_limits,
)
from glove.container._limits import parse_cpus as parse_cpus
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
from glove.container._socket_gate import GateSupport
from glove.container._spec import Bind, Protected, Retained, SandboxSpec
from glove.container.errors import (
    LimitRefused,
    ProfileError,
    SandboxError,
    SandboxSetupError,
    SpecError,
    UnsupportedPlatform,
)

__all__ = [
    "EXIT_NOT_EXECUTABLE",
    "EXIT_NOT_FOUND",
    "EXIT_SETUP_FAILED",
    "LIMIT_NAMES",
    "SANDBOX_LIMIT_NAMES",
    "AgentSection",
    "AsyncSandbox",
    "Bind",
    "Durations",
    "GateSupport",
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
    "parse_cpus",
    "parse_seconds",
    "parse_size",
    "plan_limits",
    "probe_host_limits",
    "probe_unix_gate",
    "run",
    "run_async",
    "self_test",
]
