"""What happened to a sandbox, decided from what its supervisor observed (sans-IO).

Both supervisors (the blocking one of ``glove exec`` and the asyncio one that ``gloved``
and ``glove run`` use) collect the same :class:`Observed` facts: the init's status messages,
why the supervisor killed it (a limit, a cancel), what the cgroups report, the output
accounting and the seccomp denials. :func:`decide` turns them into the
:class:`~glove.container.SandboxResult`, in one place, so the two can never disagree.

Precedence (first that applies): a limit the supervisor enforced, a cancel, a setup
failure, an exec failure, the memory limit (an OOM kill), the command's signal (a CPU limit
when SIGXCPU or the cgroup says so; SIGSYS is a seccomp violation), its exit code, and last
the init's own death.
"""

from __future__ import annotations

import errno
import signal
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

import msgspec

from glove.container._limits import (
    MECH_RLIMIT_AS,
    MECH_RLIMIT_CPU,
    MECH_RLIMIT_NPROC_USERNS,
    LimitPlan,
)
from glove.container._result import (
    Durations,
    LimitReport,
    Outcome,
    OutputReport,
    RetainedReport,
    SandboxResult,
    Usage,
    exit_code_for_signal,
)
from glove.container._spec import DEFAULT_SCRATCH_BYTES, SandboxSpec
from glove.container._status import (
    Disk,
    ExecFailed,
    Exited,
    Ready,
    RetainedUse,
    SetupFailed,
    Signaled,
    StatusMessage,
)
from glove.container._status import Usage as UsageLine
from glove.exits import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SETUP_FAILED

#: Scratch usage within this many bytes of the size counts as reaching the disk limit.
DISK_HIT_SLACK_BYTES: Final = 64 * 1024


class Observed(msgspec.Struct):
    """Everything a supervisor saw of one sandbox.

    Attributes:
        messages: the init's status messages, in order.
        kill_reason: the limit the supervisor killed it for (``wall_time``, ``cpu_time``,
            ``output``), if any.
        cancelled: the caller asked for it to be killed.
        denied: seccomp refusals by syscall name (violations).
        expected: refusals that were expected probes, by probe name (not violations).
        output_bytes: output passed on.
        output_truncated: output was cut at the cap.
        oom_seen: an out-of-memory message showed on stderr or the terminal.
        memory_oom_killed: the memory cgroup recorded an OOM kill.
        pids_hit: the pids cgroup refused a fork.
        cpus_throttled: the CPU-rate limit held the tree back in some period (``cpu.stat``
            ``nr_throttled`` > 0); the rate limit never ends a sandbox.
        init_wait_status: the init's wait status, once reaped.
        setup_s: seconds from the clone to the release.
        total_s: seconds from the start of the run to now.
    """

    messages: list[StatusMessage] = msgspec.field(default_factory=list)
    kill_reason: str | None = None
    cancelled: bool = False
    denied: dict[str, int] = msgspec.field(default_factory=dict)
    expected: dict[str, int] = msgspec.field(default_factory=dict)
    output_bytes: int = 0
    output_truncated: bool = False
    oom_seen: bool = False
    memory_oom_killed: bool = False
    pids_hit: bool = False
    cpus_throttled: bool = False
    init_wait_status: int | None = None
    setup_s: float = 0.0
    total_s: float = 0.0


class _Verdict(NamedTuple):
    outcome: Outcome
    exit_code: int
    signal: int | None
    error: str | None
    violation: str | None = None


def _first(messages: list[StatusMessage]) -> dict[type, StatusMessage]:
    seen: dict[type, StatusMessage] = {}
    for message in messages:
        seen.setdefault(type(message), message)
    return seen


def usage_of(messages: list[StatusMessage]) -> Usage:
    """The ``usage`` and ``disk`` messages as the result's :class:`Usage`."""
    first = _first(messages)
    line = first.get(UsageLine)
    disk = first.get(Disk)
    used = disk.used_bytes if isinstance(disk, Disk) else None
    if isinstance(line, UsageLine):
        return Usage(line.user_s, line.system_s, line.maxrss_bytes, used)
    return Usage(disk_bytes=used)


def _signaled_by(wait_status: int) -> int | None:
    """The signal in a wait status (``WIFSIGNALED``/``WTERMSIG``, by their definition)."""
    low = wait_status & 0x7F
    return low if low not in (0, 0x7F) else None


def _limit_reports(
    observed: Observed, spec: SandboxSpec, plans: Mapping[str, LimitPlan]
) -> dict[str, LimitReport]:
    first = _first(observed.messages)
    signaled = first.get(Signaled)
    disk = first.get(Disk)
    reports: dict[str, LimitReport] = {}
    for name, plan in plans.items():
        hit: bool | None = observed.kill_reason == name
        if name == "memory" and plan.mechanism.startswith("cgroup-"):
            hit = hit or observed.memory_oom_killed
        elif name == "pids" and plan.mechanism.startswith("cgroup-"):
            hit = hit or observed.pids_hit
        elif name == "memory" and plan.mechanism == MECH_RLIMIT_AS and not hit:
            # A refused allocation is ENOMEM inside one process: invisible from here,
            # unless the process said so on stderr or its resident set reached the limit.
            evidence = observed.oom_seen or usage_of(observed.messages).peak_rss_bytes >= plan.value
            hit = True if evidence else None
        elif name == "pids" and plan.mechanism == MECH_RLIMIT_NPROC_USERNS and not hit:
            # Hit comes from the kill reason: the supervisor's task count found the tree at
            # its RLIMIT_NPROC and killed it. Not killed is not "not reached": a refused
            # fork is EAGAIN inside, and a burst to the limit and back between two samples
            # of the count is not seen, so the report says unknown.
            hit = None
        elif name == "cpu_time" and plan.mechanism == MECH_RLIMIT_CPU:
            hit = isinstance(signaled, Signaled) and signaled.signum == signal.SIGXCPU
        elif name == "cpus":
            hit = observed.cpus_throttled
        elif name == "output":
            hit = hit or observed.output_truncated
        elif name == "disk" and isinstance(disk, Disk):
            size = spec.limits.disk or DEFAULT_SCRATCH_BYTES
            hit = disk.used_bytes + DISK_HIT_SLACK_BYTES >= size
        reports[name] = LimitReport(value=plan.value, mechanism=plan.mechanism, hit=hit)
    return reports


def _verdict(  # noqa: PLR0911 - one return per outcome, in precedence order
    observed: Observed,
    spec: SandboxSpec,
    limits: dict[str, LimitReport],
    strerror: Callable[[int], str],
) -> _Verdict:
    first = _first(observed.messages)
    killed = exit_code_for_signal(signal.SIGKILL)
    if observed.kill_reason is not None:
        return _Verdict("limit", killed, signal.SIGKILL, f"{observed.kill_reason} limit reached")
    if observed.cancelled:
        return _Verdict("signaled", killed, signal.SIGKILL, "cancelled by the caller")
    setup = first.get(SetupFailed)
    if isinstance(setup, SetupFailed):
        return _Verdict(
            "setup_error", EXIT_SETUP_FAILED, None, f"sandbox setup failed: {setup.message}"
        )
    failed = first.get(ExecFailed)
    if isinstance(failed, ExecFailed):
        not_found = failed.errno in (errno.ENOENT, errno.ENOTDIR)
        code = EXIT_NOT_FOUND if not_found else EXIT_NOT_EXECUTABLE
        reason = f"cannot execute {spec.argv[0]}: {strerror(failed.errno)}"
        return _Verdict("exec_error", code, None, reason)
    signaled, exited = first.get(Signaled), first.get(Exited)
    memory = limits.get("memory")
    if memory is not None and memory.hit and (signaled is not None or exited is None):
        return _Verdict("limit", killed, signal.SIGKILL, "memory limit reached")
    if isinstance(signaled, Signaled):
        signum = signaled.signum
        cpu = limits.get("cpu_time")
        if signum in (signal.SIGXCPU, signal.SIGKILL) and cpu is not None and cpu.hit:
            return _Verdict("limit", exit_code_for_signal(signum), signum, "cpu_time limit reached")
        violation = "seccomp" if signum == signal.SIGSYS else None
        return _Verdict("signaled", exit_code_for_signal(signum), signum, None, violation)
    if isinstance(exited, Exited):
        return _Verdict("exited", exited.code & 0xFF, None, None)
    wait_status = observed.init_wait_status or 0
    init_signal = _signaled_by(wait_status)
    if Ready in first and init_signal is not None:
        code = exit_code_for_signal(init_signal)
        return _Verdict("signaled", code, init_signal, "the sandbox init was killed")
    return _Verdict(
        "setup_error",
        EXIT_SETUP_FAILED,
        None,
        f"sandbox init ended during setup (wait status {wait_status})",
    )


def _retained_reports(observed: Observed, spec: SandboxSpec) -> dict[str, RetainedReport]:
    used = {m.target: m.used_bytes for m in observed.messages if isinstance(m, RetainedUse)}
    return {
        item.target: RetainedReport(item.image, item.size, used.get(item.target))
        for item in spec.retained
    }


def _errno_name(number: int) -> str:
    return errno.errorcode.get(number, f"errno {number}")


def decide(
    observed: Observed,
    spec: SandboxSpec,
    plans: Mapping[str, LimitPlan],
    *,
    strerror: Callable[[int], str] = _errno_name,
) -> SandboxResult:
    """The structured result of one sandbox (``strerror`` words an exec failure)."""
    limits = _limit_reports(observed, spec, plans)
    verdict = _verdict(observed, spec, limits, strerror)
    return SandboxResult(
        outcome=verdict.outcome,
        exit_code=verdict.exit_code,
        signal=verdict.signal,
        error=verdict.error,
        violation=verdict.violation or ("seccomp" if observed.denied else None),
        durations=Durations(setup_s=round(observed.setup_s, 6), total_s=round(observed.total_s, 6)),
        limits=limits,
        output=OutputReport(bytes=observed.output_bytes, truncated=observed.output_truncated),
        retained=_retained_reports(observed, spec),
        denied_syscalls=dict(observed.denied),
        expected_denials=dict(observed.expected),
        usage=usage_of(observed.messages),
    )
