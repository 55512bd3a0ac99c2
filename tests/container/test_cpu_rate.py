"""The CPU rate limit ``cpus`` on this host, for real: the v1 CFS path throttles real busy
loops to their rate, measured from the group's own usage; where no mechanism exists (the
unprivileged user here) ``--cpus`` is refused with each rung's reason.

This host binds the cpu controller to cgroup v1 (hierarchy 1), so root gets
``cgroup-v1-cpu-cfs`` and the v2 ``cpu.max`` path runs in the guest
(``test_cgroup_v2_vm.py``). The bands are generous: the machine is shared, and a
throttled loop can only get less than its quota, never more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.container import LimitPlan, SandboxResult
from glove.container._cgroupfs import parse_proc_cgroups
from glove.container.errors import SandboxSetupError
from glove.container.linux._cgroups import CGROUP_V1_ROOT, GLOVE_GROUP, SandboxCgroups
from tests.conftest import Unpriv
from tests.container.conftest import GloveExec, _workspace_for

V1_BOUND = parse_proc_cgroups(Path("/proc/cgroups").read_text())
#: The cpu controller is on v1 here and its hierarchy has CFS bandwidth control.
V1_CFS = V1_BOUND.get("cpu", 0) != 0 and (CGROUP_V1_ROOT / "cpu" / "cpu.cfs_quota_us").exists()
#: Wall time each busy loop runs for.
SPIN_S = 2.0
#: The rate asked for, and the most the measured rate may be (above means the quota did not
#: hold). No lower bound: a shared, loaded machine pushes it anywhere below the quota, and
#: the group's own throttle count, not a rate, says the spinners reached the quota.
RATE = 0.25
MAX_RATE = 0.40
#: Spins for SPIN_S of wall time (once a byte arrives on stdin when asked), in N processes.
SPIN = (
    "import os, sys, time\n"
    "if len(sys.argv) > 2: sys.stdin.buffer.read(1)\n"
    f"end = time.monotonic() + {SPIN_S}\n"
    "kids = []\n"
    "for _ in range(int(sys.argv[1]) - 1):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        kids = None; break\n"
    "    kids.append(pid)\n"
    "while time.monotonic() < end: pass\n"
    "if kids is None: os._exit(0)\n"
    "for kid in kids: os.waitpid(kid, 0)\n"
    f"print(time.monotonic() - end + {SPIN_S})\n"
)
#: Joins the v1 groups whose ``tasks`` descriptors $TASKS names, as the sandbox's init does
#: (``join_own_groups``: a thread's own move), before SPIN forks its spinners.
JOIN = (
    "import os\nfor fd in map(int, os.environ['TASKS'].split()): os.write(fd, b'0'); os.close(fd)\n"
)

needs_v1_cfs = pytest.mark.skipif(not V1_CFS, reason="no v1 cpu controller with CFS here")
root_only = pytest.mark.skipif(os.getuid() != 0, reason="makes cgroups (root only)")


@root_only
@needs_v1_cfs
def test_cfs_group_holds_a_whole_tree_to_its_rate() -> None:
    """Two busy processes in one sandbox's groups get a quarter of a CPU between them,
    measured from the v2 group's cpu.stat usage; the v1 group carries the quota and says
    it throttled; destroy removes both groups."""
    plans = {"cpus": LimitPlan("cpus", RATE, "cgroup-v1-cpu-cfs", full=True)}
    cgroups = SandboxCgroups(plans)
    try:
        assert cgroups.v1 is not None
        assert cgroups.v2 is not None, "control: this host gives root a v2 group for usage"
        group = cgroups.v1.dirs["cpu"]
        assert group.parent == CGROUP_V1_ROOT / "cpu" / GLOVE_GROUP
        assert (group / "cpu.cfs_quota_us").read_text().strip() == "25000"
        assert (group / "cpu.cfs_period_us").read_text().strip() == "100000"
        assert not cgroups.cpu_throttled(), "control: a fresh group was never throttled"
        tasks = cgroups.open_v1_tasks()
        proc = subprocess.Popen(
            [sys.executable, "-c", JOIN + SPIN, "2", "wait"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=tasks,
            env={**os.environ, "TASKS": " ".join(map(str, tasks))},
        )
        for fd in tasks:
            os.close(fd)
        try:
            cgroups.place(proc.pid)
            before = cgroups.v2.cpu_seconds()
            started = time.monotonic()
            out, _ = proc.communicate(b"x", timeout=60)
            wall = time.monotonic() - started
        finally:
            proc.kill()
            proc.wait()
        assert float(out) >= SPIN_S
        rate = (cgroups.v2.cpu_seconds() - before) / wall
        assert rate <= MAX_RATE, f"two spinners got {rate:.3f} CPUs under {RATE}"
        assert cgroups.cpu_throttled()
        assert cgroups.reached() is None, "a rate never ends the sandbox"
    finally:
        cgroups.destroy()
    assert not group.exists()


@root_only
@pytest.mark.skipif(V1_BOUND.get("cpu", 0) == 0, reason="the cpu controller is on v2 here")
def test_a_cpu_max_plan_is_refused_where_the_controller_is_on_v1() -> None:
    """A plan naming cgroup-v2-cpu-max on this host (the planner never makes one here) is
    refused by the group set with the probe's reason, before any group exists."""
    plans = {"cpus": LimitPlan("cpus", RATE, "cgroup-v2-cpu-max", full=True)}
    base = Path("/sys/fs/cgroup/unified") / GLOVE_GROUP
    before = sorted(base.iterdir()) if base.is_dir() else []
    with pytest.raises(SandboxSetupError, match="cpu controller is bound to cgroup v1"):
        SandboxCgroups(plans)
    assert (sorted(base.iterdir()) if base.is_dir() else []) == before


def _spin(glove_exec: GloveExec, cpus: str, processes: int = 1) -> tuple[float, dict]:  # type: ignore[type-arg]
    done = glove_exec("python3", "-c", SPIN, str(processes), flags=("--cpus", cpus))
    assert done.rc == 0, done.stderr
    usage = done.status["usage"]
    rate = (usage["cpu_user_s"] + usage["cpu_system_s"]) / done.status["durations"]["total_s"]
    return rate, done.status | {"stderr": done.stderr}


def test_glove_exec_cpus(glove_exec: GloveExec) -> None:
    """Root: a busy loop under --cpus 0.25 gets at most about a quarter of a CPU over 2 s, exits on
    its own, and the result says cgroup-v1-cpu-cfs, hit (throttled); --cpus 2 on one loop
    is never throttled. Unprivileged here (no writable cgroup): refused, even with
    --accept-weaker all, naming both rungs."""
    if glove_exec.who != "root":
        for flags in (("--cpus", "0.25"), ("--cpus", "0.25", "--accept-weaker", "all")):
            refused = glove_exec("true", flags=flags)
            assert refused.rc == 125
            assert refused.status["outcome"] == "setup_error"
            error = refused.status["error"]
            assert "'cpus' refused" in error
            assert "cgroup-v2-cpu-max: " in error
            assert "cgroup-v1-cpu-cfs: " in error
        weaker = glove_exec("true", flags=("--cpus", "0.25", "--accept-weaker", "cpus"))
        assert weaker.rc == 125
        assert "--accept-weaker does not apply to cpus" in weaker.stderr
        return
    if not V1_CFS:
        pytest.skip("the rate is on v2 here: see the guest tests")
    rate, status = _spin(glove_exec, str(RATE))
    assert status["outcome"] == "exited"
    assert status["limits"]["cpus"] == {
        "value": RATE,
        "mechanism": "cgroup-v1-cpu-cfs",
        "hit": True,
    }
    assert rate <= MAX_RATE, f"the loop got {rate:.3f} CPUs under {RATE}"
    assert "cpus 0.25 throttled the tree (cgroup-v1-cpu-cfs)" in status["stderr"]
    _, free = _spin(glove_exec, "2")
    assert free["limits"]["cpus"]["hit"] is False, "one loop cannot use two CPUs' quota"


def test_dry_run_shows_the_rate_or_refuses(glove_exec: GloveExec) -> None:
    """--dry-run --json lists limits.cpus with its mechanism as root; unprivileged here it
    refuses, as the launch would."""
    argv = [
        *glove_exec.wrap, glove_exec.python, "-m", "glove", "exec", "--dry-run", "--json",
        "--cpus", "1.5", "--", "true",
    ]  # fmt: skip
    out = subprocess.run(
        argv, cwd=glove_exec.workspace, capture_output=True, text=True, timeout=60, check=False
    )
    if glove_exec.who == "root" and V1_CFS:
        assert out.returncode == 0, out.stderr
        limits = json.loads(out.stdout)["limits"]
        assert limits["cpus"] == {"value": 1.5, "mechanism": "cgroup-v1-cpu-cfs", "full": True}
    elif glove_exec.who != "root":
        assert out.returncode == 125
        assert "limit 'cpus' refused: no mechanism on this machine" in out.stderr


@pytest.fixture
def v1_cpu_for(unpriv: Unpriv) -> Iterator[Path]:
    """The v1 cpu controller's ``glove`` group handed to the test user (an administrator's
    chown), handed back afterwards."""
    base = CGROUP_V1_ROOT / "cpu" / GLOVE_GROUP
    base.mkdir(exist_ok=True)
    owner = base.stat()
    os.chown(base, unpriv.uid, unpriv.gid)
    try:
        yield base
    finally:
        os.chown(base, owner.st_uid, owner.st_gid)


@root_only
@needs_v1_cfs
def test_an_unprivileged_launcher_with_a_chowned_cpu_group_is_throttled(
    v1_cpu_for: Path, unpriv: Unpriv
) -> None:
    """Given a v1 cpu group it owns, the unprivileged launcher gets cgroup-v1-cpu-cfs: a
    busy loop is held to its rate and throttled; its group is removed afterwards."""
    for workspace in _workspace_for(unpriv.uid, unpriv.gid):
        user = GloveExec("unpriv", unpriv.python, unpriv.command(), workspace)
        rate, status = _spin(user, str(RATE))
        assert status["limits"]["cpus"] == {
            "value": RATE,
            "mechanism": "cgroup-v1-cpu-cfs",
            "hit": True,
        }
        assert rate <= MAX_RATE, f"the loop got {rate:.3f} CPUs under {RATE}"
    left = [p for p in v1_cpu_for.iterdir() if p.is_dir() and p.stat().st_uid == unpriv.uid]
    assert left == []


def _doctor(wrap: list[str], python: str) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(
        [*wrap, python, "-m", "glove", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    checks: dict = {c["name"]: c for c in json.loads(done.stdout)["checks"]}  # type: ignore[type-arg]
    return checks["limits"]  # type: ignore[no-any-return]


def test_doctor_explains_the_rate(unpriv: Unpriv) -> None:
    """doctor names the rate's mechanism and why cpu.max was passed over (root here), or
    says --cpus is refused and why (the unprivileged user here)."""
    if os.getuid() == 0 and V1_CFS:
        limits = _doctor([], sys.executable)
        assert (
            "cpus: cgroup-v1-cpu-cfs (whole sandbox), passed over cgroup-v2-cpu-max (the cpu "
            "controller is bound to cgroup v1" in limits["detail"]
        )
    user = _doctor(unpriv.command(), unpriv.python)
    if os.getuid() == 0:
        assert "cpus: no CPU-rate mechanism (--cpus is refused)" in user["summary"]
        assert "cpus: none; passed over cgroup-v2-cpu-max (" in user["detail"]


@root_only
@needs_v1_cfs
def test_the_asyncio_supervisor_reports_throttling() -> None:
    """gloved's and glove run's supervisor (AsyncSandbox) sees the same throttling as glove
    exec's: a busy loop under cpus 0.25 exits on its own with cpus hit on v1 CFS."""
    import asyncio

    import msgspec

    from glove.container import AsyncSandbox, Limits, build_spec, decode_profile

    profile = decode_profile(b'extends = "default"\n[workspace]\nenabled = false\n', "<t>")
    spec = build_spec(profile, ["python3", "-c", SPIN, "1"], cwd="/", host_env={})
    spec = msgspec.structs.replace(spec, limits=Limits(wall_time=60.0, cpus=RATE))

    async def run() -> tuple[SandboxResult, bytes]:
        out = bytearray()
        box = AsyncSandbox(spec, on_output=lambda stream, data: out.extend(data))
        await box.start()
        return await box.wait(), bytes(out)

    result, out = asyncio.run(run())
    assert float(out) >= SPIN_S
    assert result.outcome == "exited"
    report = result.limits["cpus"]
    assert (report.mechanism, report.hit) == ("cgroup-v1-cpu-cfs", True)
