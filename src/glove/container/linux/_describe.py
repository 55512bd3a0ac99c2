"""What a spec would build, computed without building it (``--dry-run``).

Everything the launcher checks before the clone is checked here the same way (bind sources
opened strictly, the mediator's protected paths, the limit plan against this host), so a
dry run that passes is a launch that would pass those checks; nothing is created, mounted or
started.
"""

# The paths below are the sandbox's own mount points, described, not host temp files.
# ruff: noqa: S108
from __future__ import annotations

from typing import Final

from glove.container._description import (
    LimitDescription,
    MountPlan,
    SandboxDescription,
    SeccompSummary,
)
from glove.container._limits import plan_limits
from glove.container._protect import check_protected
from glove.container._spec import DEFAULT_SCRATCH_BYTES, SandboxSpec
from glove.container.linux._cgroups import probe_host_limits
from glove.container.linux._mounts import (
    DEVICE_NODES,
    open_sources,
    shown_sources,
)
from glove.container.linux._seccomp import DENIED_SYSCALLS
from glove.container.linux._unix_gate import probe_unix_gate

#: Socket families the filter lets through.
ALLOWED_SOCKET_FAMILIES: Final = (
    "AF_UNIX",
    "AF_INET",
    "AF_INET6",
    "AF_NETLINK (NETLINK_ROUTE only)",
)


def describe(spec: SandboxSpec) -> SandboxDescription:
    """Check ``spec`` as a launch would and describe the sandbox it builds.

    Raises:
        SpecError: a bind source is missing, unreadable, passes a symlink, or would show a
            protected path.
        LimitRefused: a limit cannot be enforced as asked here.
        UnsupportedPlatform: the machine lacks what the sandbox needs.
    """
    plans = plan_limits(spec.limits, probe_host_limits(), spec.accept_weaker)
    sources = open_sources(spec)
    check_protected(shown_sources(spec, sources), spec.protected)
    size = spec.limits.disk if spec.limits.disk is not None else DEFAULT_SCRATCH_BYTES
    mounts = [
        MountPlan("/", "tmpfs", "ro", note=f"{size} bytes; /tmp and /dev/shm share it"),
        MountPlan(
            "/tmp",
            "tmpfs",
            "rw",
            note="private: the root tmpfs (disk limit), none of the host's /tmp; binds "
            "below it come after",
        ),
    ]
    for source in sources:
        if source.kind == "symlink":
            mounts.append(MountPlan(source.target, "symlink", "ro", note=f"-> {source.link}"))
        else:
            mode = "rw" if source.writable else "ro"
            mounts.append(MountPlan(source.target, "bind", mode, source=source.source))
    mounts += [
        MountPlan("/proc", "proc", "rw", note="own pid namespace; kernel knobs read-only"),
        MountPlan("/dev", "tmpfs", "ro", note="only " + ", ".join(DEVICE_NODES)),
        MountPlan("/dev/pts", "devpts", "rw", note="a new instance"),
        MountPlan("/dev/shm", "tmpfs", "rw", note="the root tmpfs (disk limit)"),
    ]
    shown = {source.source for source in sources}
    skipped = [b.source for b in spec.binds if b.optional and b.source not in shown]
    return SandboxDescription(
        argv=list(spec.argv),
        cwd=spec.working_directory,
        hostname=spec.hostname,
        pty=spec.pty,
        network={"mode": spec.network, "interfaces": ["lo"], "routes": 0},
        mounts=mounts,
        skipped_binds=skipped,
        env=dict(spec.env),
        limits={
            name: LimitDescription(plan.value, plan.mechanism, plan.full)
            for name, plan in plans.items()
        },
        seccomp=SeccompSummary(
            default="allow",
            denied_syscalls=sorted(set(DENIED_SYSCALLS)),
            denied_ioctls=["TIOCSTI", "TIOCLINUX"],
            socket_families=list(ALLOWED_SOCKET_FAMILIES),
            other=[
                "clone with any namespace flag: EPERM",
                "clone3: ENOSYS (libc falls back to clone)",
                "raw IP sockets: EPERM",
                "datagram Unix sockets: EPERM",
                _connect_in_words(),
                "creating setuid/setgid files: EPERM",
                "a foreign-architecture syscall: the process is killed",
            ],
        ),
        pass_fds=dict(spec.pass_fds),
        protected=[item.path for item in spec.protected],
    )


def _connect_in_words() -> str:
    gate = probe_unix_gate()
    if gate.mechanism is None:
        return f"connect: not gated ({gate.reason})"
    return (
        f"connect: performed by the launcher ({gate.mechanism}); a Unix socket outside "
        "the sandbox's own /tmp and /dev/shm: EACCES"
    )
