"""cgroup limits for one sandbox: the probe, v1 groups, and the set the launcher holds.

This host runs the hybrid layout: v1 controllers under ``/sys/fs/cgroup/<controller>`` and a
v2 tree at ``/sys/fs/cgroup/unified`` with no resource controllers delegated. A launcher may
use a v1 controller when it can create a group under ``<controller>/glove`` (root, or a
parent that an administrator chowned to the user). Each sandbox gets its own group per v1
controller, created before the child is released and removed after the tree is dead; v1
groups are siblings of whatever cgroup the launcher itself runs in, never children of it.

cgroup v2 (``_cgroup_v2``) is probed beside v1 and preferred per limit; a v2 group, when the
launcher has a place for one, is also the sandbox's teardown handle (``cgroup.kill``).
:class:`SandboxCgroups` is what the launcher and the supervisor hold: it routes each call to
the group the plan put that limit in.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path
from typing import Final

from glove.container._limits import (
    CGROUP_CPU_WATCHDOGS,
    CPU_PERIOD_US,
    MECH_CGROUP_V1_CPU_CFS,
    MECH_CGROUP_V1_CPUACCT,
    MECH_CGROUP_V1_MEMORY,
    MECH_CGROUP_V1_PIDS,
    MECH_CGROUP_V2_CPU,
    MECH_CGROUP_V2_CPU_MAX,
    MECH_CGROUP_V2_MEMORY,
    MECH_CGROUP_V2_PIDS,
    HostLimitSupport,
    LimitPlan,
    cpu_quota_us,
)
from glove.container.errors import SandboxSetupError
from glove.container.linux._cgroup_v2 import (
    RMDIR_RETRY_S,
    V2Group,
    V2Probe,
    claim_group,
    claim_site,
    probe_v2,
    rmdir_retrying,
)

CGROUP_V1_ROOT: Final = Path("/sys/fs/cgroup")
#: The directory under each controller that holds Glove's sandbox groups.
GLOVE_GROUP: Final = "glove"

_CONTROLLERS: Final = {
    MECH_CGROUP_V1_MEMORY: "memory",
    MECH_CGROUP_V1_PIDS: "pids",
    MECH_CGROUP_V1_CPUACCT: "cpuacct",
    MECH_CGROUP_V1_CPU_CFS: "cpu",
}
#: The v2 mechanisms and the controller each needs in the sandbox's group.
_V2_CONTROLLERS: Final = {
    MECH_CGROUP_V2_MEMORY: "memory",
    MECH_CGROUP_V2_PIDS: "pids",
    MECH_CGROUP_V2_CPU_MAX: "cpu",
}
#: The v1 ``cpu`` file that exists only with CFS bandwidth control (CONFIG_CFS_BANDWIDTH).
CFS_QUOTA_FILE: Final = "cpu.cfs_quota_us"
#: How a refused placement in a sandbox group starts its error.
PLACE_FAILED: Final = "cannot place the sandbox in cgroup"


def _controller_usable(controller: str) -> str | None:
    """None when this launcher can make v1 groups for ``controller``, else why not."""
    hierarchy = CGROUP_V1_ROOT / controller
    if not (hierarchy / "cgroup.procs").exists() or (hierarchy / "cgroup.controllers").exists():
        return f"no cgroup v1 {controller} hierarchy at {hierarchy}"
    base = hierarchy / GLOVE_GROUP
    if base.is_dir():
        if os.access(base, os.W_OK | os.X_OK):
            return None
        return f"{base} is not writable by uid {os.geteuid()}"
    if os.geteuid() != 0:
        return f"{base} does not exist and only root may create it"
    try:
        base.mkdir(mode=0o755, exist_ok=True)
    except OSError as exc:
        return f"cannot create {base}: {exc.strerror}"
    return None


def _support(v2: V2Probe) -> HostLimitSupport:
    why: dict[str, str] = {}
    v1: dict[str, bool] = {}
    for mechanism, controller in _CONTROLLERS.items():
        reason = _controller_usable(controller)
        hierarchy = CGROUP_V1_ROOT / controller
        if reason is None and controller == "cpu" and not (hierarchy / CFS_QUOTA_FILE).exists():
            reason = f"the cgroup v1 cpu controller at {hierarchy} has no CFS bandwidth control"
        v1[controller] = reason is None
        if reason is not None:
            why[mechanism] = reason
    site = v2.site
    if site is None:
        why["cgroup-v2"] = v2.why_not.get("cgroup-v2", "no cgroup v2 site")
    for mechanism, controller in _V2_CONTROLLERS.items():
        if controller in v2.why_not:
            why[mechanism] = v2.why_not[controller]
    return HostLimitSupport(
        cgroup_v1_memory=v1["memory"],
        cgroup_v1_pids=v1["pids"],
        cgroup_v1_cpuacct=v1["cpuacct"],
        cgroup_v1_cpu=v1["cpu"],
        host_uid=os.geteuid(),
        cgroup_v2_group=site is not None,
        cgroup_v2_memory=site is not None and "memory" in site.controllers,
        cgroup_v2_pids=site is not None and "pids" in site.controllers,
        cgroup_v2_cpu=site is not None and "cpu" in site.controllers,
        unavailable=why,
    )


def probe_host_limits(v2: V2Probe | None = None) -> HostLimitSupport:
    """Report which limit mechanisms this launcher can use, and why the others are not
    (from ``v2`` when the caller has just probed cgroup v2)."""
    return _support(v2 if v2 is not None else probe_v2())


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def group_name() -> str:
    """A fresh name for one sandbox's groups (the launcher's pid and 48 random bits)."""
    return f"sbx-{os.getpid()}-{os.urandom(6).hex()}"


#: The bases this process swept (or is sweeping), by path: its first claim of each sweeps.
_swept: dict[str, object] = {}


def sweep_stale_groups(base: Path) -> int:
    """Remove the empty sandbox groups under ``base`` whose launcher is gone; return how many.

    A launcher killed with SIGKILL cannot remove its groups; its sandbox died with it (the
    init watches the launcher), so what is left is empty. A group's name carries its
    launcher's pid (``sbx-<pid>-<random>``); a live pid (even a reused one) keeps its group,
    and ``rmdir`` refuses a group that still holds a process. Done once per base and process.

    No lock, safe against concurrent sweeps and claims (threads or processes): a group is
    claimed by the ``mkdir`` of a live process whose pid its name carries, so a group whose
    pid is dead when it is read here was never a live claim's (its maker died after making
    it); of two sweeps removing one group, one ``rmdir`` wins and the other's fails
    (ENOENT, not counted); a group that holds a process refuses ``rmdir`` (EBUSY). The
    once-per-base check is one ``dict.setdefault`` of a string (atomic under the GIL).
    """
    mine = object()
    if _swept.setdefault(str(base), mine) is not mine:
        return 0
    removed = 0
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            _, _, rest = entry.name.partition("sbx-")
            pid = rest.partition("-")[0]
            if not entry.name.startswith("sbx-") or not pid.isdigit():
                continue
            if Path(f"/proc/{pid}").exists():
                continue
            with contextlib.suppress(OSError):
                entry.rmdir()
                removed += 1
    return removed


def join_own_groups(tasks: tuple[int, ...]) -> None:
    """Move the calling thread into the v1 group of each ``tasks`` descriptor and close it.

    Writing ``0`` to a v1 ``tasks`` file moves the writer itself, one thread: the kernel
    skips the global threadgroup lock (and its RCU grace period, about 12 ms here) that a
    move by pid through ``cgroup.procs`` waits out. The sandbox's init (or the fork path's
    reaper) calls it first thing, while it has one thread; whatever it forks after is born
    in the groups.

    Raises:
        SandboxSetupError: the kernel refused a move (the remaining descriptors are closed).
    """
    try:
        for fd in tasks:
            os.write(fd, b"0")
    except OSError as exc:
        raise SandboxSetupError(f"{PLACE_FAILED}: {exc}") from exc
    finally:
        for fd in tasks:
            with contextlib.suppress(OSError):
                os.close(fd)


def _read_int_field(path: Path, field: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == field:
                return int(value)
    return 0


class CgroupSet:
    """One sandbox's v1 groups, one per v1 controller its limit plan names.

    Controllers mounted together (``cpu,cpuacct`` on many distributions, reached through
    both ``cpu`` and ``cpuacct``) share one group. The sandbox joins them itself through
    :meth:`open_tasks`; :meth:`destroy` after the whole tree is dead.
    """

    def __init__(self, plans: dict[str, LimitPlan], name: str | None = None) -> None:
        """Create the groups and write the limits.

        Raises:
            SandboxSetupError: a group or a limit file could not be written.
        """
        self.name = name or group_name()
        self.dirs: dict[str, Path] = {}
        made: dict[Path, Path] = {}  # the hierarchy's real path -> the group in it
        try:
            for plan in plans.values():
                controller = _CONTROLLERS.get(plan.mechanism)
                if controller is None:
                    continue
                hierarchy = (CGROUP_V1_ROOT / controller).resolve()
                path = made.get(hierarchy)
                if path is None:
                    path = CGROUP_V1_ROOT / controller / GLOVE_GROUP / self.name
                    if not claim_group(path):
                        raise FileExistsError(errno.EEXIST, "taken by another launch", str(path))
                    made[hierarchy] = path
                self.dirs[controller] = path
                if controller == "memory":
                    _write(path / "memory.limit_in_bytes", str(int(plan.value)))
                    with contextlib.suppress(OSError):
                        _write(path / "memory.memsw.limit_in_bytes", str(int(plan.value)))
                elif controller == "pids":
                    _write(path / "pids.max", str(int(plan.value)))
                elif controller == "cpu":
                    _write(path / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                    _write(path / CFS_QUOTA_FILE, str(cpu_quota_us(float(plan.value))))
        except OSError as exc:
            self.destroy()
            raise SandboxSetupError(f"cannot create cgroup {self.name}: {exc}") from exc

    @classmethod
    def adopt(cls, dirs: dict[str, str]) -> CgroupSet:
        """The groups another process (the launcher) created, by controller (no writes)."""
        groups = cls.__new__(cls)
        groups.dirs = {controller: Path(path) for controller, path in dirs.items()}
        groups.name = next(iter(groups.dirs.values())).name if groups.dirs else ""
        return groups

    def _groups(self) -> list[Path]:
        """Each group once (controllers mounted together share one)."""
        return list(dict.fromkeys(self.dirs.values()))

    def open_tasks(self) -> tuple[int, ...]:
        """A write descriptor of each group's ``tasks`` file, for the sandbox to join its
        groups itself (:func:`join_own_groups`): opened here, before the clone, so the
        kernel checks the launcher's permission at the open and the init inherits them.

        Raises:
            SandboxSetupError: a ``tasks`` file could not be opened (none is left open).
        """
        fds: list[int] = []
        try:
            for path in self._groups():
                # each kept as it is opened, so a failure closes the ones before it
                fds.append(os.open(path / "tasks", os.O_WRONLY | os.O_CLOEXEC))  # noqa: PERF401
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            raise SandboxSetupError(f"{PLACE_FAILED}: {exc}") from exc
        return tuple(fds)

    def cpu_seconds(self) -> float:
        """CPU time used by the whole group so far, in seconds (0 without cpuacct)."""
        path = self.dirs.get("cpuacct")
        if path is None:
            return 0.0
        try:
            return int((path / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return 0.0

    def memory_oom_killed(self) -> bool:
        """Whether the memory limit made the kernel kill a task of the group."""
        path = self.dirs.get("memory")
        return path is not None and _read_int_field(path / "memory.oom_control", "oom_kill") > 0

    def pids_hit(self) -> bool:
        """Whether a fork was refused because the pids limit was reached."""
        path = self.dirs.get("pids")
        return path is not None and _read_int_field(path / "pids.events", "max") > 0

    def cpu_throttled(self) -> bool:
        """Whether CFS bandwidth control held the group back in any period (``cpu.stat``
        ``nr_throttled``)."""
        path = self.dirs.get("cpu")
        return path is not None and _read_int_field(path / "cpu.stat", "nr_throttled") > 0

    def destroy(self) -> None:
        """Remove the groups (retrying briefly while the kernel releases them)."""
        deadline = time.monotonic() + RMDIR_RETRY_S  # one budget for all the groups
        for path in self._groups():
            rmdir_retrying(path, deadline)
        self.dirs = {}


class SandboxCgroups:
    """Every cgroup one sandbox is in: a v2 group (when the launcher has a v2 site) and the v1
    groups for limits the plan put on v1. The launcher and the supervisor call only this.

    The sandbox joins its v1 groups itself through :meth:`open_v1_tasks`; it is cloned into
    the v2 group, or :meth:`place` moves it there before it is released; :meth:`kill` ends the
    whole tree through ``cgroup.kill`` (a no-op without a v2 group: the pid-namespace kill
    does it); :meth:`destroy` after the tree is dead.
    """

    def __init__(self, plans: dict[str, LimitPlan], v2: V2Probe | None = None) -> None:
        """Create the groups the plans need (probing cgroup v2 again unless given).

        Raises:
            SandboxSetupError: a group, a controller or a limit could not be set up, or the
                v2 site the planner relied on is gone.
        """
        self.plans = plans
        #: CPU time the init spent building the sandbox in these groups (its ``ready``
        #: report): Glove's work, left out of the ``cpu_time`` budget.
        self.setup_cpu_s = 0.0
        self.setup_reported = False
        name = group_name()
        v2 = v2 if v2 is not None else probe_v2()
        need = frozenset(
            controller
            for mechanism, controller in _V2_CONTROLLERS.items()
            if any(p.mechanism == mechanism for p in plans.values())
        )
        uses_v2 = need or any(p.mechanism == MECH_CGROUP_V2_CPU for p in plans.values())
        site = v2.site
        if uses_v2 and (site is None or not need <= site.controllers):
            raise SandboxSetupError(
                "the cgroup v2 site the limits were planned on is gone: "
                + "; ".join(v2.why_not.values())
            )
        self.v2: V2Group | None = None
        self.v1: CgroupSet | None = None
        if site is not None:
            claim_site(site, need)
            sweep_stale_groups(site.base)
            self.v2 = V2Group(site, plans, name)
        if any(p.mechanism in _CONTROLLERS for p in plans.values()):
            for mechanism, controller in _CONTROLLERS.items():
                if any(p.mechanism == mechanism for p in plans.values()):
                    sweep_stale_groups(CGROUP_V1_ROOT / controller / GLOVE_GROUP)
            try:
                self.v1 = CgroupSet(plans, name)
            except SandboxSetupError:
                self.destroy()
                raise

    @classmethod
    def adopt(
        cls, plans: dict[str, LimitPlan], v2_path: str | None, v1_dirs: dict[str, str]
    ) -> SandboxCgroups:
        """Take over the groups the launcher process made for one sandbox (named by
        :meth:`where`): gloved reads their events, kills through them and removes them."""
        groups = cls.__new__(cls)
        groups.plans = plans
        groups.setup_cpu_s = 0.0
        groups.setup_reported = False
        groups.v2 = V2Group.adopt(Path(v2_path)) if v2_path is not None else None
        groups.v1 = CgroupSet.adopt(v1_dirs) if v1_dirs else None
        return groups

    def where(self) -> tuple[str | None, dict[str, str]]:
        """The v2 group's path and the v1 groups' paths by controller (for :meth:`adopt`)."""
        v2 = str(self.v2.path) if self.v2 is not None and self.v2.path is not None else None
        v1 = {c: str(p) for c, p in self.v1.dirs.items()} if self.v1 is not None else {}
        return v2, v1

    def open_v2(self) -> int:
        """A descriptor of the v2 group's directory, for ``clone3(CLONE_INTO_CGROUP)``;
        -1 without a v2 group (or when it cannot be opened: :meth:`place` moves it then)."""
        path = self.v2.path if self.v2 is not None else None
        if path is None:
            return -1
        try:
            return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return -1

    def open_v1_tasks(self) -> tuple[int, ...]:
        """Descriptors the sandbox joins its v1 groups through (:func:`join_own_groups`);
        empty without v1 groups.

        Raises:
            SandboxSetupError: a ``tasks`` file could not be opened.
        """
        return self.v1.open_tasks() if self.v1 is not None else ()

    def place(self, pid: int) -> None:
        """Move ``pid`` into the v2 group, for a launch that could not clone it there
        (the v1 groups the sandbox joins itself, :meth:`open_v1_tasks`).

        Raises:
            SandboxSetupError: the kernel refused the move.
        """
        if self.v2 is not None:
            self.v2.place(pid)

    def kill(self) -> None:
        """SIGKILL the whole tree at once through ``cgroup.kill`` (when there is a v2 group)."""
        if self.v2 is not None:
            self.v2.kill()

    def _mechanism(self, limit: str) -> str | None:
        plan = self.plans.get(limit)
        return plan.mechanism if plan is not None else None

    def cpu_seconds(self) -> float:
        """CPU time used by the whole tree so far, in seconds (0 without a cgroup for it)."""
        mechanism = self._mechanism("cpu_time")
        if mechanism == MECH_CGROUP_V2_CPU and self.v2 is not None:
            return self.v2.cpu_seconds()
        if mechanism == MECH_CGROUP_V1_CPUACCT and self.v1 is not None:
            return self.v1.cpu_seconds()
        return 0.0

    def memory_oom_killed(self) -> bool:
        """Whether the memory limit made the kernel kill a task of the sandbox."""
        mechanism = self._mechanism("memory")
        if mechanism == MECH_CGROUP_V2_MEMORY and self.v2 is not None:
            return self.v2.memory_oom_killed()
        return (
            mechanism == MECH_CGROUP_V1_MEMORY
            and self.v1 is not None
            and (self.v1.memory_oom_killed())
        )

    def pids_hit(self) -> bool:
        """Whether a fork was refused because the pids limit was reached."""
        mechanism = self._mechanism("pids")
        if mechanism == MECH_CGROUP_V2_PIDS and self.v2 is not None:
            return self.v2.pids_hit()
        return mechanism == MECH_CGROUP_V1_PIDS and self.v1 is not None and self.v1.pids_hit()

    def cpu_throttled(self) -> bool:
        """Whether the CPU-rate limit (``cpus``) throttled the tree in any period."""
        mechanism = self._mechanism("cpus")
        if mechanism == MECH_CGROUP_V2_CPU_MAX and self.v2 is not None:
            return self.v2.cpu_throttled()
        return (
            mechanism == MECH_CGROUP_V1_CPU_CFS and self.v1 is not None and self.v1.cpu_throttled()
        )

    def command_cpu_seconds(self) -> float:
        """CPU time the tree used apart from the init's own setup (what ``cpu_time`` caps)."""
        return max(0.0, self.cpu_seconds() - self.setup_cpu_s)

    def reached(self) -> str | None:
        """The first limit whose cgroup says it was reached (the supervisor then kills the
        tree): ``memory`` after an OOM kill, ``pids`` after a refused fork, ``cpu_time`` once
        the tree's CPU time (less the init's setup, :attr:`setup_cpu_s`) is at the limit,
        counted from the init's ``ready`` on; None while none is. The CPU rate (``cpus``)
        is never reached: it throttles the tree, which goes on."""
        if self.memory_oom_killed():
            return "memory"
        if self.pids_hit():
            return "pids"
        cpu = self.plans.get("cpu_time")
        cpu_watched = cpu is not None and cpu.mechanism in CGROUP_CPU_WATCHDOGS
        # Before the init's ``ready`` there is no command: what the tree spent is Glove's
        # setup (left out of the budget once reported), never the command's, so a setup
        # slower than the budget is not a cpu_time kill.
        if (
            cpu_watched
            and cpu is not None
            and self.setup_reported
            and self.command_cpu_seconds() >= cpu.value
        ):
            return "cpu_time"
        return None

    def destroy(self) -> None:
        """Kill what is left, wait until the v2 group is empty, remove every group."""
        if self.v2 is not None:
            self.v2.destroy()
        if self.v1 is not None:
            self.v1.destroy()


def open_sandbox_cgroups(
    plans: dict[str, LimitPlan], v2: V2Probe | None = None
) -> SandboxCgroups | None:
    """The groups for a sandbox whose plans use a cgroup mechanism, or None when none does
    (``v2``: the probe the plans were made from, so one launch probes once).

    Raises:
        SandboxSetupError: a group could not be set up.
    """
    if not any(p.mechanism.startswith("cgroup-") for p in plans.values()):
        return None
    return SandboxCgroups(plans, v2)


def claim_cgroup_v2(also: tuple[int, ...] = ()) -> str:
    """Claim this launcher's cgroup v2 site now, for a daemon at start-up (``gloved``):
    move into the site's ``supervisor/`` leaf when it has one (with the processes ``also``
    names: gloved's launcher, which must leave the unit's group too) and enable every
    controller the site offers, so later launches only make groups. Launches claim lazily
    otherwise.

    Returns a line for the log saying what was claimed, or why there is no v2 site.

    Raises:
        SandboxSetupError: the kernel refused the move or a controller.
    """
    probe = probe_v2()
    site = probe.site
    if site is None:
        return "cgroup v2: no site (" + "; ".join(probe.why_not.values()) + ")"
    claim_site(site, site.controllers, also)
    # One short line at every start: the controllers missing by name; why each is
    # (often a paragraph per controller) is `glove doctor`'s to say.
    missing = " ".join(sorted(probe.why_not))
    enabled = " ".join(sorted(site.controllers)) or "none"
    moved = f", launcher moved into {site.leaf}" if site.leaf and site.controllers else ""
    return f"cgroup v2: sandbox groups under {site.base}, controllers {enabled}{moved}" + (
        f" (missing {missing}: `glove doctor` says why)" if missing else ""
    )
