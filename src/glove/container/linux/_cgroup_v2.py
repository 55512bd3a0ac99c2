"""cgroup v2: where a launcher may make sandbox groups, claiming that place, and one group.

Where the groups go (the *site*)::

    root launcher                         <cgroup2 mount>/glove/sbx-<pid>-<random>
    delegated launcher (gloved under      <its cgroup C>/supervisor   the launcher, moved here
      Delegate=, or any process in a      <its cgroup C>/sbx-...      the sandboxes: inside C,
      cgroup chowned to its uid)                                      so the unit's KillMode
                                                                      reaches them

A delegated launcher must leave C before ``cpu``/``memory``/``pids`` can be enabled in
``C/cgroup.subtree_control`` (the no-internal-processes rule); it moves *only itself*, and
only when another process shares C it gives up on the controllers instead. Without
controllers (a hybrid host binds them to v1, or none were delegated) a group still offers
``cgroup.kill`` (teardown of the whole tree), ``cgroup.procs``, ``cgroup.events`` (whether
anything is left alive) and ``cpu.stat`` (the tree's CPU time), which is what the planner
uses it for. The probe reads only; :func:`claim_site` does the move and the enabling, once.

Delegation is recognized the kernel's way: the launcher's cgroup, its ``cgroup.procs`` and
``cgroup.subtree_control`` belong to the launcher's uid. systemd 252 (Debian 12) marks a
``Delegate=`` unit no differently from an undelegated unit of the same user manager (no
``user.delegate`` attribute), so run launchers under a unit with ``Delegate=`` (gloved's has
it): in an undelegated one Glove would still make its groups there, which systemd does not
expect.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from glove.container._cgroupfs import (
    MAX_CGROUP_FILE_BYTES,
    Cgroup2Mount,
    cgroup_dir,
    parse_cgroup2_mounts,
    parse_controllers,
    parse_keyed,
    parse_pid_list,
    parse_proc_cgroup,
    parse_proc_cgroups,
)
from glove.container._limits import (
    CPU_PERIOD_US,
    MECH_CGROUP_V2_CPU_MAX,
    MECH_CGROUP_V2_MEMORY,
    MECH_CGROUP_V2_PIDS,
    LimitPlan,
    cpu_quota_us,
)
from glove.container.errors import CgroupFormatError, SandboxSetupError

PROC_SELF_CGROUP: Final = Path("/proc/self/cgroup")
PROC_SELF_MOUNTINFO: Final = Path("/proc/self/mountinfo")
PROC_CGROUPS: Final = Path("/proc/cgroups")
#: The controllers a sandbox group's limits use: ``cpu`` for ``cpu.max`` (the rate limit),
#: ``memory``, ``pids``. CPU *time* needs none (``cpu.stat``'s usage is a core file).
WANTED_CONTROLLERS: Final = ("cpu", "memory", "pids")
#: The group a root launcher keeps its sandboxes in, at the top of the hierarchy.
ROOT_GROUP: Final = "glove"
#: The leaf a delegated launcher moves itself into before enabling controllers.
LAUNCHER_LEAF: Final = "supervisor"
#: How long teardown waits for ``cgroup.events`` to say ``populated 0`` after ``cgroup.kill``.
KILL_WAIT_S: Final = 2.0
#: How long teardown retries ``rmdir`` while the kernel releases a just-emptied group.
RMDIR_RETRY_S: Final = 1.0
RMDIR_RETRY_STEP_S: Final = 0.01


def rmdir_retrying(path: Path, deadline: float) -> None:
    """Remove the cgroup directory ``path``, retrying until ``deadline`` (monotonic) while
    the kernel finishes releasing a group whose last process just died; a group that is
    still busy then is left behind (it is empty and harmless)."""
    while True:
        try:
            path.rmdir()
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(RMDIR_RETRY_STEP_S)
        else:
            return


#: Microseconds per second (``cpu.stat`` counts microseconds).
USEC_PER_S: Final = 1_000_000


def read_file(path: Path) -> str:
    """Read a cgroup or /proc file whole (bounded).

    Raises:
        OSError: the file cannot be read.
        CgroupFormatError: it is larger than any interface file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, MAX_CGROUP_FILE_BYTES + 1)
        chunks = [data]
        while data:  # /proc files can arrive in pieces
            data = os.read(fd, MAX_CGROUP_FILE_BYTES + 1)
            chunks.append(data)
            if sum(map(len, chunks)) > MAX_CGROUP_FILE_BYTES:
                break
    finally:
        os.close(fd)
    text = b"".join(chunks)
    if len(text) > MAX_CGROUP_FILE_BYTES:
        raise CgroupFormatError(f"{path}: larger than {MAX_CGROUP_FILE_BYTES} bytes")
    return text.decode("utf-8", errors="surrogateescape")


def write_file(path: Path, value: str) -> None:
    """Write one value to a cgroup interface file (one ``write`` call, as the kernel wants).

    Raises:
        OSError: the kernel refused it.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _controllers(path: Path) -> frozenset[str]:
    try:
        return parse_controllers(read_file(path), str(path))
    except (OSError, CgroupFormatError):
        return frozenset()


def _procs(group: Path) -> list[int]:
    try:
        return parse_pid_list(read_file(group / "cgroup.procs"), str(group / "cgroup.procs"))
    except (OSError, CgroupFormatError):
        return []


@dataclass(frozen=True)
class V2Site:
    """Where this launcher makes sandbox groups, and what they can have.

    Attributes:
        base: the directory the sandbox groups are made in.
        controllers: of :data:`WANTED_CONTROLLERS`, those sandbox groups can have once the
            site is claimed.
        enable_at: groups whose ``cgroup.subtree_control`` must get ``controllers``, top first.
        leaf: where the launcher must move itself before enabling them (None: nowhere).
        delegated: the site is a subtree delegated to a non-root launcher.
    """

    base: Path
    controllers: frozenset[str]
    enable_at: tuple[Path, ...] = ()
    leaf: Path | None = None
    delegated: bool = False


@dataclass(frozen=True)
class V2Probe:
    """The probe's answer: a site, or why there is none; why each controller is missing."""

    site: V2Site | None
    why_not: dict[str, str] = field(default_factory=dict)


def _why_controller_missing(name: str, where: Path, v1_bound: dict[str, int]) -> str:
    if v1_bound.get(name, 0) != 0:
        return (
            f"the {name} controller is bound to cgroup v1 (hierarchy {v1_bound[name]}) on this "
            "host, and the kernel gives a controller to one version only"
        )
    return f"{where}/cgroup.controllers does not offer {name} (not delegated to this launcher)"


def _find_mount() -> tuple[Cgroup2Mount, str] | None:
    """The cgroup2 mount that reaches this process's own cgroup, and that cgroup's directory."""
    own = parse_proc_cgroup(read_file(PROC_SELF_CGROUP))
    if own is None:
        return None
    for mount in parse_cgroup2_mounts(read_file(PROC_SELF_MOUNTINFO)):
        directory = cgroup_dir(mount, own)
        if directory is not None and Path(directory).is_dir():
            return mount, directory
    return None


def _probe_root(mount: Cgroup2Mount, v1_bound: dict[str, int]) -> V2Probe:
    top = Path(mount.mount_point)
    base = top / ROOT_GROUP
    try:
        base.mkdir(mode=0o755, exist_ok=True)
    except OSError as exc:
        return V2Probe(None, {"cgroup-v2": f"cannot create {base}: {exc.strerror}"})
    if not (base / "cgroup.kill").exists():
        return V2Probe(None, {"cgroup-v2": "this kernel has no cgroup.kill (Linux < 5.14)"})
    available = _controllers(top / "cgroup.controllers")
    top_enabled = _controllers(top / "cgroup.subtree_control")
    why: dict[str, str] = {}
    usable: set[str] = set()
    for name in WANTED_CONTROLLERS:
        if name not in available:
            why[name] = _why_controller_missing(name, top, v1_bound)
        elif name not in top_enabled and (top / "cgroup.kill").exists() and _procs(top):
            # A namespace root (not the real root) with processes cannot enable controllers.
            why[name] = f"{top} holds processes, so {name} cannot be enabled below it"
        else:
            usable.add(name)
    return V2Probe(V2Site(base=base, controllers=frozenset(usable), enable_at=(top, base)), why)


def _probe_delegated(own_dir: Path, uid: int, v1_bound: dict[str, int]) -> V2Probe:
    group = own_dir
    if group.name == LAUNCHER_LEAF and _owned(group.parent, uid):
        group = group.parent  # already claimed by this launcher or its parent
    if not _owned(group, uid):
        return V2Probe(
            None, {"cgroup-v2": f"the launcher's cgroup {group} is not delegated to uid {uid}"}
        )
    if not (group / "cgroup.kill").exists():
        return V2Probe(None, {"cgroup-v2": "this kernel has no cgroup.kill (Linux < 5.14)"})
    available = _controllers(group / "cgroup.controllers")
    enabled = _controllers(group / "cgroup.subtree_control")
    others = [pid for pid in _procs(group) if pid != os.getpid()]
    why: dict[str, str] = {}
    usable: set[str] = set()
    for name in WANTED_CONTROLLERS:
        if name not in available:
            why[name] = _why_controller_missing(name, group, v1_bound)
        elif name in enabled:
            usable.add(name)
        elif others:
            why[name] = (
                f"{len(others)} other process(es) share the delegated cgroup {group}, so {name} "
                "cannot be enabled below it (no internal processes); run the launcher alone "
                "in its delegated cgroup"
            )
        elif not os.access(group / "cgroup.subtree_control", os.W_OK):
            why[name] = f"{group}/cgroup.subtree_control is not writable by uid {uid}"
        else:
            usable.add(name)
    leaf = group / LAUNCHER_LEAF if own_dir == group and usable - enabled else None
    site = V2Site(
        base=group,
        controllers=frozenset(usable),
        enable_at=(group,),
        leaf=leaf,
        delegated=True,
    )
    return V2Probe(site, why)


def _owned(group: Path, uid: int) -> bool:
    try:
        st = group.stat()
    except OSError:
        return False
    return (
        st.st_uid == uid
        and os.access(group, os.W_OK | os.X_OK)
        and os.access(group / "cgroup.procs", os.W_OK)
    )


def probe_v2() -> V2Probe:
    """Find where this launcher may make cgroup v2 sandbox groups (reads only, except that a
    root launcher creates its top-level ``glove`` group, as the v1 probe does)."""
    try:
        found = _find_mount()
        v1_bound = parse_proc_cgroups(read_file(PROC_CGROUPS))
    except (OSError, CgroupFormatError) as exc:
        return V2Probe(None, {"cgroup-v2": f"cannot read the cgroup tables: {exc}"})
    if found is None:
        return V2Probe(None, {"cgroup-v2": "no cgroup2 filesystem reaches this process's cgroup"})
    mount, own_dir = found
    uid = os.geteuid()
    if uid == 0:
        return _probe_root(mount, v1_bound)
    return _probe_delegated(Path(own_dir), uid, v1_bound)


def claim_group(path: Path) -> bool:
    """Claim the group ``path`` by making it: True when this call made it, False when it
    exists already (another thread or process has it).

    No lock: the kernel's ``mkdir`` is atomic, exactly one of any number of concurrent
    claims of one name (threads or processes) makes it, every other sees EEXIST.

    Raises:
        OSError: the group could not be made (not EEXIST).
    """
    try:
        path.mkdir(mode=0o755)
    except FileExistsError:
        return False
    return True


def claim_site(site: V2Site, controllers: frozenset[str], also: tuple[int, ...] = ()) -> None:
    """Make ``controllers`` usable in sandbox groups at ``site``: move this process (and the
    processes ``also`` names: gloved's launcher) into the site's leaf when it has one, then
    enable them top-down.

    No lock: every step is idempotent (the leaf made unless it exists, a move into the
    group a process is in, ``+controller`` of an enabled one), so concurrent claims from
    threads or processes end in the same state as one.

    Raises:
        SandboxSetupError: the kernel refused the move or a controller.
    """
    if not controllers:
        return
    try:
        if site.leaf is not None:
            claim_group(site.leaf)  # made here or by another claim: the same leaf
            for pid in (os.getpid(), *also):
                write_file(site.leaf / "cgroup.procs", str(pid))
    except OSError as exc:
        raise SandboxSetupError(
            f"cannot move the launcher into {site.leaf}: {exc.strerror}"
        ) from exc
    failed: list[tuple[str, OSError]] = []
    for group in site.enable_at:
        enabled = _controllers(group / "cgroup.subtree_control")
        # One controller per write: one the kernel refuses (cpu, while a real-time task
        # is in the subtree) does not keep the others from being enabled.
        for name in sorted(controllers - enabled):
            if any(name == bad for bad, _ in failed):
                continue
            try:
                write_file(group / "cgroup.subtree_control", f"+{name}")
            except OSError as exc:
                failed.append((name, exc))
    if failed:
        first = failed[0][1]
        hint = " (another process is in that cgroup)" if first.errno == errno.EBUSY else ""
        refused = " ".join(f"+{n}" for n, _ in failed)
        raise SandboxSetupError(
            f"cannot enable cgroup v2 {refused} at {site.base}: {first.strerror}{hint}"
        ) from first


class V2Group:
    """One sandbox's cgroup v2 group: limits, placement, events, CPU time and teardown.

    Create it before the child is released, :meth:`place` the init in it, :meth:`kill` to
    end the whole tree at once, :meth:`destroy` after (kills, waits for ``populated 0``,
    removes the directory).
    """

    def __init__(self, site: V2Site, plans: dict[str, LimitPlan], name: str) -> None:
        """Create the group and write the limits the plans put on cgroup v2.

        Raises:
            SandboxSetupError: the group or a limit file could not be written.
        """
        self.path: Path | None = site.base / name
        try:
            if not claim_group(self.path):
                raise FileExistsError(errno.EEXIST, "taken by another launch", str(self.path))
        except OSError as exc:
            self.path = None  # never another's group to remove
            raise SandboxSetupError(f"cannot create cgroup {site.base / name}: {exc}") from exc
        try:
            for plan in plans.values():
                if plan.mechanism == MECH_CGROUP_V2_MEMORY:
                    write_file(self.path / "memory.max", str(int(plan.value)))
                    with contextlib.suppress(FileNotFoundError):  # no swap accounting
                        write_file(self.path / "memory.swap.max", "0")
                    # An OOM kill takes the whole group, not one process of it.
                    write_file(self.path / "memory.oom.group", "1")
                elif plan.mechanism == MECH_CGROUP_V2_PIDS:
                    write_file(self.path / "pids.max", str(int(plan.value)))
                elif plan.mechanism == MECH_CGROUP_V2_CPU_MAX:
                    quota = cpu_quota_us(float(plan.value))
                    write_file(self.path / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        except OSError as exc:
            failed = self.path
            self.destroy()
            raise SandboxSetupError(f"cannot set the limits of cgroup {failed}: {exc}") from exc

    @classmethod
    def adopt(cls, path: Path) -> V2Group:
        """The group another process (the launcher) created at ``path`` (no writes)."""
        group = cls.__new__(cls)
        group.path = path
        return group

    def place(self, pid: int) -> None:
        """Move ``pid`` (the sandbox init) into the group.

        Raises:
            SandboxSetupError: the kernel refused the move.
        """
        if self.path is None:
            raise SandboxSetupError("the sandbox's cgroup is already removed")
        try:
            write_file(self.path / "cgroup.procs", str(pid))
        except OSError as exc:
            raise SandboxSetupError(f"cannot place the sandbox in {self.path}: {exc}") from exc

    def kill(self) -> None:
        """SIGKILL every process in the group at once (``cgroup.kill``)."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                write_file(self.path / "cgroup.kill", "1")

    def _keyed(self, name: str) -> dict[str, int]:
        if self.path is None:
            return {}
        try:
            return parse_keyed(read_file(self.path / name), name)
        except (OSError, CgroupFormatError):
            return {}

    def populated(self) -> bool:
        """Whether any process is left in the group (``cgroup.events``)."""
        return self._keyed("cgroup.events").get("populated", 0) != 0

    def cpu_seconds(self) -> float:
        """CPU time used by the whole group so far, in seconds (``cpu.stat`` usage)."""
        return self._keyed("cpu.stat").get("usage_usec", 0) / USEC_PER_S

    def memory_oom_killed(self) -> bool:
        """Whether the memory limit made the kernel kill the group (``memory.events``)."""
        events = self._keyed("memory.events")
        return events.get("oom_kill", 0) > 0 or events.get("oom_group_kill", 0) > 0

    def pids_hit(self) -> bool:
        """Whether a fork was refused because ``pids.max`` was reached (``pids.events``)."""
        return self._keyed("pids.events").get("max", 0) > 0

    def cpu_throttled(self) -> bool:
        """Whether ``cpu.max`` held the group back in any period (``cpu.stat``
        ``nr_throttled``, present once the ``cpu`` controller is enabled)."""
        return self._keyed("cpu.stat").get("nr_throttled", 0) > 0

    def wait_unpopulated(self, timeout_s: float) -> bool:
        """Wait until ``cgroup.events`` says ``populated 0``; return whether it did in time.

        The kernel signals a change of the file with POLLPRI, so this sleeps on the event
        rather than polling the directory.
        """
        if self.path is None:
            return True
        deadline = time.monotonic() + timeout_s
        try:
            fd = os.open(self.path / "cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return not self.path.exists()
        try:
            poller = select.poll()
            poller.register(fd, select.POLLPRI | select.POLLERR)
            while True:
                try:
                    events = parse_keyed(os.pread(fd, 4096, 0).decode(), "cgroup.events")
                except (OSError, CgroupFormatError):
                    return False
                if events.get("populated", 0) == 0:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                poller.poll(max(1, int(left * 1000)))
        finally:
            os.close(fd)

    def destroy(self) -> None:
        """Kill what is left, wait until the group is empty, remove it (idempotent)."""
        path = self.path
        if path is None:
            return
        self.kill()
        self.wait_unpopulated(KILL_WAIT_S)
        rmdir_retrying(path, time.monotonic() + RMDIR_RETRY_S)
        self.path = None
