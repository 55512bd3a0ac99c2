"""The six limits and the choice of the mechanism that enforces each (sans-IO).

The Sage six-limit contract names wall time, CPU time, memory, PIDs, writable disk and
output bytes. Each requested limit is matched against what the host offers
(:class:`HostLimitSupport`, probed elsewhere) and gets one mechanism. A mechanism is either
*full* (it bounds the whole sandbox tree) or *weaker* (it bounds each process, or less); a
weaker one is used only when the operator accepted it for that limit, otherwise the limit is
refused with the reason. Nothing here touches the system.
"""

from __future__ import annotations

import math
import re
from typing import Final, Literal

import msgspec

from glove.container.errors import LimitRefused, SpecError

LimitName = Literal["wall_time", "cpu_time", "memory", "pids", "disk", "output"]

#: The six limit names, in the order reports list them.
LIMIT_NAMES: Final[tuple[LimitName, ...]] = (
    "wall_time",
    "cpu_time",
    "memory",
    "pids",
    "disk",
    "output",
)

#: Mechanisms, as reported in results.
MECH_WATCHDOG: Final = "watchdog"
MECH_PIPE_ACCOUNTING: Final = "pipe-accounting"
MECH_TMPFS_SIZE: Final = "tmpfs-size"
MECH_CGROUP_V1_MEMORY: Final = "cgroup-v1-memory"
MECH_CGROUP_V1_PIDS: Final = "cgroup-v1-pids"
MECH_CGROUP_V1_CPUACCT: Final = "cgroup-v1-cpuacct-watchdog"
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
}
MACOS_NO_MECHANISM: Final = (
    "no mechanism on macOS: XNU does not enforce RLIMIT_AS or RLIMIT_DATA and there is no "
    "per-sandbox memory controller"
)

#: The smallest sizes that make sense; smaller requests are a caller mistake.
MIN_MEMORY_BYTES: Final = 4 * 1024 * 1024
MIN_DISK_BYTES: Final = 64 * 1024
MIN_PIDS: Final = 2

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


class Limits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Requested limits; ``None`` means unlimited.

    Attributes:
        wall_time: wall-clock seconds before the whole tree is killed.
        cpu_time: CPU seconds, summed over the tree where the mechanism allows.
        memory: bytes of memory.
        pids: tasks alive at once, the sandbox's init included.
        disk: bytes of writable scratch (the tmpfs behind ``/``, ``/tmp`` and ``/dev/shm``).
        output: bytes of stdout plus stderr (or PTY output) passed on before truncation.
    """

    wall_time: float | None = None
    cpu_time: float | None = None
    memory: int | None = None
    pids: int | None = None
    disk: int | None = None
    output: int | None = None

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

    def get(self, name: LimitName) -> float | int | None:
        """Return the value of one limit by name."""
        value: float | int | None = getattr(self, name)
        return value


class HostLimitSupport(msgspec.Struct, frozen=True):
    """What this host can use to enforce limits (probed by ``linux._cgroups``).

    Attributes:
        cgroup_v1_memory: a writable cgroup v1 memory hierarchy.
        cgroup_v1_pids: a writable cgroup v1 pids hierarchy.
        cgroup_v1_cpuacct: a writable cgroup v1 cpuacct hierarchy.
        host_uid: the launcher's uid; RLIMIT_NPROC is per user namespace only when non-zero.
        platform: ``linux``, or ``macos`` for the Seatbelt backend's mechanisms.
    """

    cgroup_v1_memory: bool = False
    cgroup_v1_pids: bool = False
    cgroup_v1_cpuacct: bool = False
    host_uid: int = 0
    platform: Literal["linux", "macos"] = "linux"


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


def _candidates(name: LimitName, host: HostLimitSupport) -> list[tuple[str, bool]]:
    """List (mechanism, full) pairs usable for a limit here, best first."""
    if host.platform == "macos":
        return list(MACOS_CANDIDATES[name])
    if name == "wall_time":
        return [(MECH_WATCHDOG, True)]
    if name == "output":
        return [(MECH_PIPE_ACCOUNTING, True)]
    if name == "disk":
        return [(MECH_TMPFS_SIZE, True)]
    found: list[tuple[str, bool]] = []
    if name == "memory":
        if host.cgroup_v1_memory:
            found.append((MECH_CGROUP_V1_MEMORY, True))
        found.append((MECH_RLIMIT_AS, False))
    elif name == "pids":
        if host.cgroup_v1_pids:
            found.append((MECH_CGROUP_V1_PIDS, True))
        if host.host_uid != 0:
            # The kernel counts RLIMIT_NPROC per (user namespace, uid); a fresh user namespace
            # makes it a per-sandbox cap. Host uid 0 is exempt from the check entirely.
            found.append((MECH_RLIMIT_NPROC_USERNS, True))
    elif name == "cpu_time":
        if host.cgroup_v1_cpuacct:
            found.append((MECH_CGROUP_V1_CPUACCT, True))
        found.append((MECH_RLIMIT_CPU, False))
    return found


def plan_limits(
    limits: Limits, host: HostLimitSupport, accept_weaker: frozenset[str]
) -> dict[str, LimitPlan]:
    """Choose a mechanism for every requested limit, or refuse.

    ``accept_weaker`` holds limit names (or ``"all"``) for which a per-process mechanism is
    acceptable when no whole-tree one exists.

    Raises:
        LimitRefused: a limit has no mechanism, or only a weaker one that was not accepted.
        SpecError: ``accept_weaker`` names an unknown limit.
    """
    unknown = accept_weaker - {*LIMIT_NAMES, "all"}
    if unknown:
        raise SpecError(f"--accept-weaker names unknown limits: {sorted(unknown)}")
    plans: dict[str, LimitPlan] = {}
    for name in LIMIT_NAMES:
        value = limits.get(name)
        if value is None:
            continue
        candidates = _candidates(name, host)
        if not candidates:
            raise LimitRefused(
                name,
                MACOS_NO_MECHANISM
                if host.platform == "macos"
                else "no mechanism on this machine: no writable cgroup controller, and the "
                "per-user-namespace RLIMIT_NPROC does not apply to host uid 0",
            )
        mechanism, full = candidates[0]
        if not full and name not in accept_weaker and "all" not in accept_weaker:
            where = (
                "on macOS"
                if host.platform == "macos"
                else "here (no writable cgroup v1/v2 controller)"
            )
            raise LimitRefused(
                name,
                f"no whole-sandbox mechanism {where}; "
                f"the only one is {mechanism}; pass --accept-weaker {name} to use it",
            )
        plans[name] = LimitPlan(name=name, value=value, mechanism=mechanism, full=full)
    return plans
