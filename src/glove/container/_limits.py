"""The sandbox's limits and the choice of the mechanism that enforces each (sans-IO).

The Sage six-limit contract names wall time, CPU time, memory, PIDs, writable disk and
output bytes. A seventh, optional limit is outside that contract: ``cpus``, a CPU *rate*
(Docker's ``--cpus``, systemd's ``CPUQuota=``) that throttles the tree instead of ending it.
Each requested limit is matched against what the host offers
(:class:`HostLimitSupport`, probed elsewhere) and gets one mechanism. A mechanism is either
*full* (it bounds the whole sandbox tree) or *weaker* (it bounds each process, or less); a
weaker one is used only when the operator accepted it for that limit, otherwise the limit is
refused with the reason. Nothing here touches the system.

On Linux each of memory, PIDs and CPU time has a ladder, best first: cgroup v2 (a child group
of a delegated v2 subtree), cgroup v1 (a writable v1 hierarchy), an rlimit. The planner takes
the first rung the host offers *for that limit*, so a hybrid host (controllers bound to v1, an
empty v2 tree) gets v1 memory and PIDs next to v2 CPU accounting, which needs no controller.
Every rung passed over carries the probe's reason, for refusals and ``glove doctor``.

The rate limit has two rungs and nothing weaker: ``cpu.max`` in a v2 group with the ``cpu``
controller, then CFS bandwidth (``cpu.cfs_quota_us``) in a v1 ``cpu`` group. A rate cannot be
enforced per process, so where neither exists ``cpus`` is refused, and ``--accept-weaker``
does not apply to it.
"""

from __future__ import annotations

import math
import re
from typing import Final, Literal

import msgspec

from glove.container.errors import LimitRefused, SpecError

LimitName = Literal["wall_time", "cpu_time", "memory", "pids", "disk", "output", "cpus"]

#: The six limit names of the contract, in the order reports list them.
LIMIT_NAMES: Final[tuple[LimitName, ...]] = (
    "wall_time",
    "cpu_time",
    "memory",
    "pids",
    "disk",
    "output",
)
#: Limits outside the contract: a CPU rate, which throttles rather than ends the sandbox.
RATE_LIMIT_NAMES: Final[tuple[LimitName, ...]] = ("cpus",)
#: Every limit a sandbox takes, in the order reports list them (the six, then the rate).
SANDBOX_LIMIT_NAMES: Final[tuple[LimitName, ...]] = LIMIT_NAMES + RATE_LIMIT_NAMES

#: Mechanisms, as reported in results.
MECH_WATCHDOG: Final = "watchdog"
MECH_PIPE_ACCOUNTING: Final = "pipe-accounting"
MECH_TMPFS_SIZE: Final = "tmpfs-size"
MECH_CGROUP_V1_MEMORY: Final = "cgroup-v1-memory"
MECH_CGROUP_V1_PIDS: Final = "cgroup-v1-pids"
MECH_CGROUP_V1_CPUACCT: Final = "cgroup-v1-cpuacct-watchdog"
#: cgroup v2: ``memory.max`` (swap 0, OOM kills the whole group), ``pids.max``, and the tree's
#: CPU from ``cpu.stat`` (a core file: no controller needed) polled by the watchdog.
MECH_CGROUP_V2_MEMORY: Final = "cgroup-v2-memory"
MECH_CGROUP_V2_PIDS: Final = "cgroup-v2-pids"
MECH_CGROUP_V2_CPU: Final = "cgroup-v2-cpu-watchdog"
#: The CPU rate: ``cpu.max`` ("<quota> <period>") of a v2 group with the ``cpu`` controller,
#: or ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` of a v1 ``cpu`` group (CFS bandwidth).
MECH_CGROUP_V2_CPU_MAX: Final = "cgroup-v2-cpu-max"
MECH_CGROUP_V1_CPU_CFS: Final = "cgroup-v1-cpu-cfs"
#: Mechanisms whose CPU-time limit the supervisor's watchdog enforces from the group's usage.
CGROUP_CPU_WATCHDOGS: Final = frozenset({MECH_CGROUP_V1_CPUACCT, MECH_CGROUP_V2_CPU})
MECH_RLIMIT_NPROC_USERNS: Final = "rlimit-nproc-userns"
MECH_RLIMIT_AS: Final = "rlimit-as-per-process"
MECH_RLIMIT_CPU: Final = "rlimit-cpu-per-process"
#: macOS mechanisms (glove.container.macos): no namespaces, cgroups or quota-backed scratch.
MECH_WATCHDOG_PGROUP: Final = "watchdog-process-group"
MECH_RLIMIT_NPROC_USER: Final = "rlimit-nproc-per-user"
MECH_RLIMIT_FSIZE: Final = "rlimit-fsize-per-file"
#: What macOS offers for each limit (best first), and why a limit with nothing is refused.
MACOS_CANDIDATES: Final[dict[str, tuple[tuple[str, bool], ...]]] = {
    "wall_time": ((MECH_WATCHDOG_PGROUP, False),),  # a setsid'd descendant leaves the group
    "cpu_time": ((MECH_RLIMIT_CPU, False),),
    "memory": (),
    "pids": ((MECH_RLIMIT_NPROC_USER, False),),
    "disk": ((MECH_RLIMIT_FSIZE, False),),
    "output": ((MECH_PIPE_ACCOUNTING, True),),
    "cpus": (),
}
MACOS_NO_MECHANISM: Final = (
    "no mechanism on macOS: XNU does not enforce RLIMIT_AS or RLIMIT_DATA and there is no "
    "per-sandbox memory controller"
)
#: Why a limit with no macOS mechanism is refused, by limit.
MACOS_NO_MECHANISM_FOR: Final = {
    "memory": MACOS_NO_MECHANISM,
    "cpus": "no mechanism on macOS: there is no per-sandbox CPU-rate control (no cgroups)",
}

#: The smallest sizes that make sense; smaller requests are a caller mistake.
MIN_MEMORY_BYTES: Final = 4 * 1024 * 1024
MIN_DISK_BYTES: Final = 64 * 1024
MIN_PIDS: Final = 2
#: The CFS period Glove writes (``cpu.max``'s second field, ``cpu.cfs_period_us``), in µs:
#: the kernel's and Docker's default.
CPU_PERIOD_US: Final = 100_000
#: The kernel's smallest CFS quota, in µs (``cpu.max`` and ``cpu.cfs_quota_us`` refuse less).
MIN_CPU_QUOTA_US: Final = 1_000
#: The range of ``cpus``: one hundredth of a CPU (the smallest quota per period) to a count
#: no machine reaches (above the host's CPUs the rate never throttles).
MIN_CPUS: Final = MIN_CPU_QUOTA_US / CPU_PERIOD_US
MAX_CPUS: Final = 4096.0

_SIZE_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)?\s*$", re.IGNORECASE)
_SIZE_UNITS: Final = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str | int) -> int:
    """Parse a byte count such as ``4096``, ``64M``, ``1G`` or ``1.5GiB`` (binary units).

    Raises:
        SpecError: the text is not a non-negative size.
    """
    if isinstance(text, int):
        if text < 0:
            raise SpecError(f"size must not be negative: {text}")
        return text
    match = _SIZE_RE.match(text)
    if match is None:
        raise SpecError(f"not a size: {text!r} (use a number with an optional K, M, G or T)")
    number, unit = match.group(1), match.group(2).upper()
    return int(float(number) * _SIZE_UNITS[unit])


_SECONDS_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$", re.IGNORECASE)
_SECONDS_UNITS: Final = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_seconds(text: str | float) -> float:
    """Parse a positive duration: seconds (``30``, ``2.5``) or with a unit (``500ms``,
    ``90s``, ``30m``, ``8h``, ``1d``).

    Raises:
        SpecError: the text is not a positive, finite duration.
    """
    if isinstance(text, bool):
        raise SpecError(f"not a duration: {text!r}")
    if isinstance(text, int | float):
        value = float(text)
    else:
        match = _SECONDS_RE.match(text)
        if match is None:
            raise SpecError(
                f"not a duration: {text!r} (use seconds, or a number with ms, s, m, h or d)"
            )
        value = float(match.group(1)) * _SECONDS_UNITS[(match.group(2) or "s").lower()]
    if not math.isfinite(value) or value <= 0:
        raise SpecError(f"a duration must be positive and finite: {text!r}")
    return value


_CPUS_RE: Final = re.compile(r"^\s*(?:\d+(?:\.\d*)?|\.\d+)\s*$", re.ASCII)


def parse_cpus(text: str | float) -> float:
    """Parse a CPU rate: a decimal number of CPUs (``0.5``, ``2``, ``1.25``).

    Raises:
        SpecError: not a number between :data:`MIN_CPUS` and :data:`MAX_CPUS`.
    """
    if isinstance(text, bool):
        raise SpecError(f"not a number of CPUs: {text!r}")
    if isinstance(text, int | float):
        value = float(text)
    else:
        if _CPUS_RE.match(text) is None:
            raise SpecError(f"not a number of CPUs: {text!r} (use a decimal, e.g. 0.5 or 2)")
        value = float(text)
    if not math.isfinite(value) or not MIN_CPUS <= value <= MAX_CPUS:
        raise SpecError(f"cpus must be between {MIN_CPUS:g} and {MAX_CPUS:g}, got {text!r}")
    return value


def cpu_quota_us(cpus: float) -> int:
    """The CFS quota per :data:`CPU_PERIOD_US` that gives ``cpus`` CPUs, in µs."""
    return max(MIN_CPU_QUOTA_US, round(cpus * CPU_PERIOD_US))


class Limits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Requested limits; ``None`` means unlimited.

    Attributes:
        wall_time: wall-clock seconds before the whole tree is killed.
        cpu_time: CPU seconds, summed over the tree where the mechanism allows.
        memory: bytes of memory.
        pids: tasks alive at once, the sandbox's init included.
        disk: bytes of writable scratch (the tmpfs behind ``/``, ``/tmp`` and ``/dev/shm``).
        output: bytes of stdout plus stderr (or PTY output) passed on before truncation.
        cpus: the CPU rate of the whole tree, in CPUs (``0.5``: half of one CPU's time in
            every 100 ms period); the tree is throttled, never ended, by it. Not one of the
            six limits of the contract.
    """

    wall_time: float | None = None
    cpu_time: float | None = None
    memory: int | None = None
    pids: int | None = None
    disk: int | None = None
    output: int | None = None
    cpus: float | None = None

    def __post_init__(self) -> None:
        """Reject values no mechanism can apply.

        Raises:
            SpecError: a value is out of range.
        """
        for name in ("wall_time", "cpu_time"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value <= 0):
                raise SpecError(f"{name} must be positive seconds, got {value}")
        floors = {"memory": MIN_MEMORY_BYTES, "pids": MIN_PIDS, "disk": MIN_DISK_BYTES}
        for name, floor in floors.items():
            value = getattr(self, name)
            if value is not None and value < floor:
                raise SpecError(f"{name} must be at least {floor}, got {value}")
        if self.output is not None and self.output < 0:
            raise SpecError(f"output must not be negative, got {self.output}")
        if self.cpus is not None:
            parse_cpus(self.cpus)

    def get(self, name: LimitName) -> float | int | None:
        """Return the value of one limit by name."""
        value: float | int | None = getattr(self, name)
        return value


class HostLimitSupport(msgspec.Struct, frozen=True):
    """What this host can use to enforce limits (probed by ``linux._cgroups``).

    Attributes:
        cgroup_v2_group: each sandbox can get its own cgroup v2 group (a writable, delegated
            v2 subtree with ``cgroup.kill``): teardown, ``cgroup.events`` and ``cpu.stat``.
        cgroup_v2_memory: the v2 ``memory`` controller is (or can be) enabled for those groups.
        cgroup_v2_pids: the v2 ``pids`` controller is (or can be) enabled for those groups.
        cgroup_v2_cpu: the v2 ``cpu`` controller is (or can be) enabled for those groups.
        cgroup_v1_memory: a writable cgroup v1 memory hierarchy.
        cgroup_v1_pids: a writable cgroup v1 pids hierarchy.
        cgroup_v1_cpuacct: a writable cgroup v1 cpuacct hierarchy.
        cgroup_v1_cpu: a writable cgroup v1 cpu hierarchy with CFS bandwidth control.
        host_uid: the launcher's uid; RLIMIT_NPROC is per user namespace only when non-zero.
        platform: ``linux``, or ``macos`` for the Seatbelt backend's mechanisms.
        unavailable: for a mechanism the probe found unusable, why (for a person to read).
    """

    cgroup_v1_memory: bool = False
    cgroup_v1_pids: bool = False
    cgroup_v1_cpuacct: bool = False
    host_uid: int = 0
    platform: Literal["linux", "macos"] = "linux"
    cgroup_v2_group: bool = False
    cgroup_v2_memory: bool = False
    cgroup_v2_pids: bool = False
    unavailable: dict[str, str] = msgspec.field(default_factory=dict)
    cgroup_v2_cpu: bool = False
    cgroup_v1_cpu: bool = False


class LimitPlan(msgspec.Struct, frozen=True):
    """The mechanism chosen for one requested limit.

    Attributes:
        name: the limit.
        value: the requested value (seconds or a count of bytes or tasks).
        mechanism: which mechanism enforces it.
        full: whether the mechanism bounds the whole sandbox tree.
    """

    name: str
    value: float | int
    mechanism: str
    full: bool


#: Linux's ladder per limit: (mechanism, full), best first.
LINUX_LADDERS: Final[dict[str, tuple[tuple[str, bool], ...]]] = {
    "wall_time": ((MECH_WATCHDOG, True),),
    "cpu_time": (
        (MECH_CGROUP_V2_CPU, True),
        (MECH_CGROUP_V1_CPUACCT, True),
        (MECH_RLIMIT_CPU, False),
    ),
    "memory": (
        (MECH_CGROUP_V2_MEMORY, True),
        (MECH_CGROUP_V1_MEMORY, True),
        (MECH_RLIMIT_AS, False),
    ),
    "pids": (
        (MECH_CGROUP_V2_PIDS, True),
        (MECH_CGROUP_V1_PIDS, True),
        # The kernel counts RLIMIT_NPROC per (user namespace, uid); a fresh user namespace
        # makes it a per-sandbox cap. Host uid 0 is exempt from the check entirely.
        (MECH_RLIMIT_NPROC_USERNS, True),
    ),
    "disk": ((MECH_TMPFS_SIZE, True),),
    "output": ((MECH_PIPE_ACCOUNTING, True),),
    # Nothing weaker: a rate cannot be enforced per process.
    "cpus": (
        (MECH_CGROUP_V2_CPU_MAX, True),
        (MECH_CGROUP_V1_CPU_CFS, True),
    ),
}


def mechanism_available(mechanism: str, host: HostLimitSupport) -> bool:
    """Whether ``host`` offers ``mechanism`` (Linux names; the unconditional ones are True)."""
    offered = {
        MECH_CGROUP_V2_CPU: host.cgroup_v2_group,
        MECH_CGROUP_V2_MEMORY: host.cgroup_v2_group and host.cgroup_v2_memory,
        MECH_CGROUP_V2_PIDS: host.cgroup_v2_group and host.cgroup_v2_pids,
        MECH_CGROUP_V2_CPU_MAX: host.cgroup_v2_group and host.cgroup_v2_cpu,
        MECH_CGROUP_V1_CPU_CFS: host.cgroup_v1_cpu,
        MECH_CGROUP_V1_CPUACCT: host.cgroup_v1_cpuacct,
        MECH_CGROUP_V1_MEMORY: host.cgroup_v1_memory,
        MECH_CGROUP_V1_PIDS: host.cgroup_v1_pids,
        MECH_RLIMIT_NPROC_USERNS: host.host_uid != 0,
    }
    return offered.get(mechanism, True)


def unavailable_reason(mechanism: str, host: HostLimitSupport) -> str:
    """Why ``host`` does not offer ``mechanism``: the probe's words, or a generic reason."""
    if mechanism == MECH_RLIMIT_NPROC_USERNS:
        return "host uid 0 is exempt from RLIMIT_NPROC"
    if mechanism in host.unavailable:
        return host.unavailable[mechanism]
    if mechanism.startswith("cgroup-v2-") and not host.cgroup_v2_group:
        return host.unavailable.get("cgroup-v2", "no writable, delegated cgroup v2 subtree")
    return "not offered to this launcher"


def _candidates(name: LimitName, host: HostLimitSupport) -> list[tuple[str, bool]]:
    """List (mechanism, full) pairs usable for a limit here, best first."""
    if host.platform == "macos":
        return list(MACOS_CANDIDATES[name])
    return [(m, full) for m, full in LINUX_LADDERS[name] if mechanism_available(m, host)]


def passed_over(name: LimitName, host: HostLimitSupport) -> list[tuple[str, str]]:
    """The better Linux mechanisms for ``name`` that ``host`` lacks, each with the reason."""
    if host.platform == "macos":
        return []
    skipped: list[tuple[str, str]] = []
    for mechanism, _full in LINUX_LADDERS[name]:
        if mechanism_available(mechanism, host):
            break
        skipped.append((mechanism, unavailable_reason(mechanism, host)))
    return skipped


def explain_limit(name: LimitName, host: HostLimitSupport) -> str:
    """One sentence for a person: which mechanism ``name`` gets here and why not a better one."""
    candidates = _candidates(name, host)
    skipped = ", ".join(f"{m} ({why})" for m, why in passed_over(name, host))
    if not candidates:
        return f"none; passed over {skipped}" if skipped else "none"
    chosen, full = candidates[0]
    kind = "whole sandbox" if full else "per process, only with --accept-weaker"
    return f"{chosen} ({kind})" + (f", passed over {skipped}" if skipped else "")


def plan_limits(
    limits: Limits, host: HostLimitSupport, accept_weaker: frozenset[str]
) -> dict[str, LimitPlan]:
    """Choose a mechanism for every requested limit, or refuse.

    ``accept_weaker`` holds limit names (or ``"all"``) for which a per-process mechanism is
    acceptable when no whole-tree one exists. The rate limit ``cpus`` has no weaker
    mechanism, so naming it there is an error.

    Raises:
        LimitRefused: a limit has no mechanism, or only a weaker one that was not accepted.
        SpecError: ``accept_weaker`` names an unknown limit, or ``cpus``.
    """
    if "cpus" in accept_weaker:
        raise SpecError(
            "--accept-weaker does not apply to cpus: a CPU rate has no per-process mechanism"
        )
    unknown = accept_weaker - {*LIMIT_NAMES, "all"}
    if unknown:
        raise SpecError(f"--accept-weaker names unknown limits: {sorted(unknown)}")
    plans: dict[str, LimitPlan] = {}
    for name in SANDBOX_LIMIT_NAMES:
        value = limits.get(name)
        if value is None:
            continue
        candidates = _candidates(name, host)
        skipped = "; ".join(f"{m}: {why}" for m, why in passed_over(name, host))
        if not candidates:
            raise LimitRefused(
                name,
                MACOS_NO_MECHANISM_FOR.get(name, MACOS_NO_MECHANISM)
                if host.platform == "macos"
                else f"no mechanism on this machine ({skipped})",
            )
        mechanism, full = candidates[0]
        if not full and name not in accept_weaker and "all" not in accept_weaker:
            where = "on macOS" if host.platform == "macos" else f"here ({skipped})"
            raise LimitRefused(
                name,
                f"no whole-sandbox mechanism {where}; "
                f"the only one is {mechanism}; pass --accept-weaker {name} to use it",
            )
        plans[name] = LimitPlan(name=name, value=value, mechanism=mechanism, full=full)
    return plans
