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

Each name is imported from its private module on first use (PEP 562, ``_LAZY``): importing
the package costs nothing, and ``glove exec``, which takes the blocking ``run``, never loads
the asyncio shell or the launcher client (decision 0053).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from glove._lazy import lazy_exports

if TYPE_CHECKING:
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
        MECH_CGROUP_V1_CPU_CFS,
        MECH_CGROUP_V1_CPUACCT,
        MECH_CGROUP_V1_MEMORY,
        MECH_CGROUP_V1_PIDS,
        MECH_CGROUP_V2_CPU,
        MECH_CGROUP_V2_CPU_MAX,
        MECH_CGROUP_V2_MEMORY,
        MECH_CGROUP_V2_PIDS,
        MECH_PIPE_ACCOUNTING,
        MECH_RLIMIT_AS,
        MECH_RLIMIT_CPU,
        MECH_RLIMIT_FSIZE,
        MECH_RLIMIT_NPROC_USER,
        MECH_RLIMIT_NPROC_USERNS,
        MECH_TMPFS_SIZE,
        MECH_WATCHDOG,
        MECH_WATCHDOG_PGROUP,
        MIN_DISK_BYTES,
        MIN_MEMORY_BYTES,
        MIN_PIDS,
        SANDBOX_LIMIT_NAMES,
        HostLimitSupport,
        LimitPlan,
        Limits,
        explain_limit,
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
    from glove.container._protect import Shown, check_protected
    from glove.container._result import (
        Durations,
        LimitReport,
        OutputReport,
        RetainedReport,
        SandboxResult,
        setup_failure,
    )
    from glove.container._selftest import LimitSupport, limit_support, self_test
    from glove.container._socket_gate import LANDLOCK_RESOLVE_UNIX_ABI, GateSupport
    from glove.container._spec import (
        DEFAULT_HOSTNAME,
        Bind,
        FileProjection,
        NetworkMode,
        PortableProjection,
        ProjectionLoader,
        ProjectionRecord,
        Protected,
        Retained,
        SandboxSpec,
        normalize_inside,
        projection_conflict,
        sandbox_owned,
    )
    from glove.container.errors import (
        LimitRefused,
        ProfileError,
        SandboxError,
        SandboxSetupError,
        SpecError,
        UnsupportedPlatform,
    )
    from glove.exits import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SETUP_FAILED

_LAZY: dict[str, str] = {
    "AsyncSandbox": "glove.container._backend",
    "SandboxProcess": "glove.container._backend",
    "create_file_no_symlinks": "glove.container._backend",
    "describe": "glove.container._backend",
    "launch": "glove.container._backend",
    "probe_host_limits": "glove.container._backend",
    "probe_unix_gate": "glove.container._backend",
    "run": "glove.container._backend",
    "run_async": "glove.container._backend",
    "SandboxDescription": "glove.container._description",
    "LIMIT_NAMES": "glove.container._limits",
    "MECH_CGROUP_V1_CPU_CFS": "glove.container._limits",
    "MECH_CGROUP_V1_CPUACCT": "glove.container._limits",
    "MECH_CGROUP_V1_MEMORY": "glove.container._limits",
    "MECH_CGROUP_V1_PIDS": "glove.container._limits",
    "MECH_CGROUP_V2_CPU": "glove.container._limits",
    "MECH_CGROUP_V2_CPU_MAX": "glove.container._limits",
    "MECH_CGROUP_V2_MEMORY": "glove.container._limits",
    "MECH_CGROUP_V2_PIDS": "glove.container._limits",
    "MECH_PIPE_ACCOUNTING": "glove.container._limits",
    "MECH_RLIMIT_AS": "glove.container._limits",
    "MECH_RLIMIT_CPU": "glove.container._limits",
    "MECH_RLIMIT_FSIZE": "glove.container._limits",
    "MECH_RLIMIT_NPROC_USER": "glove.container._limits",
    "MECH_RLIMIT_NPROC_USERNS": "glove.container._limits",
    "MECH_TMPFS_SIZE": "glove.container._limits",
    "MECH_WATCHDOG": "glove.container._limits",
    "MECH_WATCHDOG_PGROUP": "glove.container._limits",
    "MIN_DISK_BYTES": "glove.container._limits",
    "MIN_MEMORY_BYTES": "glove.container._limits",
    "MIN_PIDS": "glove.container._limits",
    "SANDBOX_LIMIT_NAMES": "glove.container._limits",
    "HostLimitSupport": "glove.container._limits",
    "LimitPlan": "glove.container._limits",
    "Limits": "glove.container._limits",
    "explain_limit": "glove.container._limits",
    "plan_limits": "glove.container._limits",
    "parse_cpus": "glove.container._limits",
    "parse_seconds": "glove.container._limits",
    "parse_size": "glove.container._limits",
    "AgentSection": "glove.container._profile",
    "Overrides": "glove.container._profile",
    "Profile": "glove.container._profile",
    "build_spec": "glove.container._profile",
    "decode_profile": "glove.container._profile",
    "embedded_profiles": "glove.container._profile",
    "load_profile": "glove.container._profile",
    "Shown": "glove.container._protect",
    "check_protected": "glove.container._protect",
    "Durations": "glove.container._result",
    "LimitReport": "glove.container._result",
    "OutputReport": "glove.container._result",
    "RetainedReport": "glove.container._result",
    "SandboxResult": "glove.container._result",
    "setup_failure": "glove.container._result",
    "LimitSupport": "glove.container._selftest",
    "limit_support": "glove.container._selftest",
    "self_test": "glove.container._selftest",
    "LANDLOCK_RESOLVE_UNIX_ABI": "glove.container._socket_gate",
    "GateSupport": "glove.container._socket_gate",
    "DEFAULT_HOSTNAME": "glove.container._spec",
    "Bind": "glove.container._spec",
    "FileProjection": "glove.container._spec",
    "NetworkMode": "glove.container._spec",
    "PortableProjection": "glove.container._spec",
    "ProjectionLoader": "glove.container._spec",
    "ProjectionRecord": "glove.container._spec",
    "Protected": "glove.container._spec",
    "Retained": "glove.container._spec",
    "SandboxSpec": "glove.container._spec",
    "normalize_inside": "glove.container._spec",
    "projection_conflict": "glove.container._spec",
    "sandbox_owned": "glove.container._spec",
    "LimitRefused": "glove.container.errors",
    "ProfileError": "glove.container.errors",
    "SandboxError": "glove.container.errors",
    "SandboxSetupError": "glove.container.errors",
    "SpecError": "glove.container.errors",
    "UnsupportedPlatform": "glove.container.errors",
    "EXIT_NOT_EXECUTABLE": "glove.exits",
    "EXIT_NOT_FOUND": "glove.exits",
    "EXIT_SETUP_FAILED": "glove.exits",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "DEFAULT_HOSTNAME",
    "EXIT_NOT_EXECUTABLE",
    "EXIT_NOT_FOUND",
    "EXIT_SETUP_FAILED",
    "LANDLOCK_RESOLVE_UNIX_ABI",
    "LIMIT_NAMES",
    "MECH_CGROUP_V1_CPUACCT",
    "MECH_CGROUP_V1_CPU_CFS",
    "MECH_CGROUP_V1_MEMORY",
    "MECH_CGROUP_V1_PIDS",
    "MECH_CGROUP_V2_CPU",
    "MECH_CGROUP_V2_CPU_MAX",
    "MECH_CGROUP_V2_MEMORY",
    "MECH_CGROUP_V2_PIDS",
    "MECH_PIPE_ACCOUNTING",
    "MECH_RLIMIT_AS",
    "MECH_RLIMIT_CPU",
    "MECH_RLIMIT_FSIZE",
    "MECH_RLIMIT_NPROC_USER",
    "MECH_RLIMIT_NPROC_USERNS",
    "MECH_TMPFS_SIZE",
    "MECH_WATCHDOG",
    "MECH_WATCHDOG_PGROUP",
    "MIN_DISK_BYTES",
    "MIN_MEMORY_BYTES",
    "MIN_PIDS",
    "SANDBOX_LIMIT_NAMES",
    "AgentSection",
    "AsyncSandbox",
    "Bind",
    "Durations",
    "FileProjection",
    "GateSupport",
    "HostLimitSupport",
    "LimitPlan",
    "LimitRefused",
    "LimitReport",
    "LimitSupport",
    "Limits",
    "NetworkMode",
    "OutputReport",
    "Overrides",
    "PortableProjection",
    "Profile",
    "ProfileError",
    "ProjectionLoader",
    "ProjectionRecord",
    "Protected",
    "Retained",
    "RetainedReport",
    "SandboxDescription",
    "SandboxError",
    "SandboxProcess",
    "SandboxResult",
    "SandboxSetupError",
    "SandboxSpec",
    "Shown",
    "SpecError",
    "UnsupportedPlatform",
    "build_spec",
    "check_protected",
    "create_file_no_symlinks",
    "decode_profile",
    "describe",
    "embedded_profiles",
    "explain_limit",
    "launch",
    "limit_support",
    "load_profile",
    "normalize_inside",
    "parse_cpus",
    "parse_seconds",
    "parse_size",
    "plan_limits",
    "probe_host_limits",
    "probe_unix_gate",
    "projection_conflict",
    "run",
    "run_async",
    "sandbox_owned",
    "self_test",
    "setup_failure",
]
