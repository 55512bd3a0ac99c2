"""cgroup v1 limits (memory, pids, cpuacct) and the probe that says what is usable.

This host runs the hybrid layout: v1 controllers under ``/sys/fs/cgroup/<controller>`` and a
v2 tree at ``/sys/fs/cgroup/unified`` with no resource controllers delegated. A launcher may
use a controller when it can create a group under ``<controller>/glove`` (root, or a parent
that an administrator chowned to the user). Each sandbox gets its own group per controller,
created before the child is released and removed after the tree is dead. Groups are siblings
of whatever cgroup the launcher itself runs in, never children of it.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Final

from glove.container._limits import (
    MECH_CGROUP_V1_CPUACCT,
    MECH_CGROUP_V1_MEMORY,
    MECH_CGROUP_V1_PIDS,
    HostLimitSupport,
    LimitPlan,
)
from glove.container.errors import SandboxSetupError

CGROUP_V1_ROOT: Final = Path("/sys/fs/cgroup")
#: The directory under each controller that holds Glove's sandbox groups.
GLOVE_GROUP: Final = "glove"
#: How long teardown retries ``rmdir`` while the kernel finishes releasing a dead group.
RMDIR_RETRY_S: Final = 1.0
RMDIR_RETRY_STEP_S: Final = 0.01

_CONTROLLERS: Final = {
    MECH_CGROUP_V1_MEMORY: "memory",
    MECH_CGROUP_V1_PIDS: "pids",
    MECH_CGROUP_V1_CPUACCT: "cpuacct",
}


def _controller_usable(controller: str) -> bool:
    hierarchy = CGROUP_V1_ROOT / controller
    if not (hierarchy / "cgroup.procs").exists():
        return False
    base = hierarchy / GLOVE_GROUP
    if base.is_dir():
        return os.access(base, os.W_OK | os.X_OK)
    if os.geteuid() != 0:
        return False
    try:
        base.mkdir(mode=0o755, exist_ok=True)
    except OSError:
        return False
    return True


def probe_host_limits() -> HostLimitSupport:
    """Report which limit mechanisms this launcher can use."""
    return HostLimitSupport(
        cgroup_v1_memory=_controller_usable("memory"),
        cgroup_v1_pids=_controller_usable("pids"),
        cgroup_v1_cpuacct=_controller_usable("cpuacct"),
        host_uid=os.geteuid(),
    )


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read_int_field(path: Path, field: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == field:
                return int(value)
    return 0


class CgroupSet:
    """One sandbox's v1 groups, one per controller its limit plan needs.

    Call :meth:`place` with the sandbox init's pid before releasing it, :meth:`destroy`
    after the whole tree is dead.
    """

    def __init__(self, plans: dict[str, LimitPlan]) -> None:
        """Create the groups and write the limits.

        Raises:
            SandboxSetupError: a group or a limit file could not be written.
        """
        self.name = f"sbx-{os.getpid()}-{os.urandom(6).hex()}"
        self.dirs: dict[str, Path] = {}
        try:
            for plan in plans.values():
                controller = _CONTROLLERS.get(plan.mechanism)
                if controller is None:
                    continue
                path = CGROUP_V1_ROOT / controller / GLOVE_GROUP / self.name
                path.mkdir(mode=0o755)
                self.dirs[controller] = path
                if controller == "memory":
                    _write(path / "memory.limit_in_bytes", str(int(plan.value)))
                    with contextlib.suppress(OSError):
                        _write(path / "memory.memsw.limit_in_bytes", str(int(plan.value)))
                elif controller == "pids":
                    _write(path / "pids.max", str(int(plan.value)))
        except OSError as exc:
            self.destroy()
            raise SandboxSetupError(f"cannot create cgroup {self.name}: {exc}") from exc

    def place(self, pid: int) -> None:
        """Move ``pid`` into every group.

        Raises:
            SandboxSetupError: the kernel refused the move.
        """
        try:
            for path in self.dirs.values():
                _write(path / "cgroup.procs", str(pid))
        except OSError as exc:
            raise SandboxSetupError(f"cannot place the sandbox in cgroup: {exc}") from exc

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

    def destroy(self) -> None:
        """Remove the groups (retrying briefly while the kernel releases them)."""
        deadline = time.monotonic() + RMDIR_RETRY_S
        for path in self.dirs.values():
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(RMDIR_RETRY_STEP_S)
        self.dirs = {}
