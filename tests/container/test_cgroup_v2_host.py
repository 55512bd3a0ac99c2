"""cgroup v2 on this host, for real: what v2 offers without controllers, and the refusals.

On a hybrid host (controllers bound to v1, an empty v2 tree at ``/sys/fs/cgroup/unified``)
a v2 group still has ``cgroup.kill``, ``cgroup.procs``, ``cgroup.events`` and ``cpu.stat``;
these tests use them on real processes. The controller paths are exercised in a guest
(``test_cgroup_v2_vm.py``); here, where the controllers cannot be had, the tests show the
probe saying why and the planner and the group set refusing, never pretending.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.container import LimitPlan
from glove.container._cgroupfs import parse_proc_cgroups
from glove.container.errors import SandboxSetupError
from glove.container.linux._cgroup_v2 import V2Group, V2Site, probe_v2
from glove.container.linux._cgroups import SandboxCgroups, probe_host_limits
from tests.conftest import Unpriv
from tests.container.cgroup_helpers import delegated_group, rmdir_when_empty
from tests.container.conftest import _workspace_for

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="makes cgroups (root only)")

V1_BOUND = parse_proc_cgroups(Path("/proc/cgroups").read_text())
HYBRID = V1_BOUND.get("memory", 0) != 0
#: A process that waits for a byte on stdin, then starts a setsid'd, a double-forked and a
#: plain sleeper, prints "ready" and sleeps: placed in a group before it makes its tree.
TREE = (
    "import os, subprocess, sys, time\n"
    "sys.stdin.buffer.read(1)\n"
    "subprocess.Popen(['setsid', 'sleep', '300'])\n"
    "subprocess.Popen(['sh', '-c', '(sleep 300 &)'])\n"
    "subprocess.Popen(['sleep', '300'])\n"
    "time.sleep(0.3); print('ready', flush=True); time.sleep(300)\n"
)


def _site() -> V2Site:
    probe = probe_v2()
    assert probe.site is not None, probe.why_not
    return probe.site


@pytest.fixture
def group() -> Iterator[V2Group]:
    """A real, empty v2 group at this launcher's site, destroyed afterwards."""
    made = V2Group(_site(), {}, f"test-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        yield made
    finally:
        made.destroy()


def test_probe_says_why_each_controller_is_missing() -> None:
    """The root probe finds a v2 site; each controller is usable or has its reason, which on
    this host is that it is bound to cgroup v1 (read from /proc/cgroups, not assumed)."""
    probe = probe_v2()
    assert probe.site is not None
    assert (probe.site.base / "cgroup.kill").exists()
    for controller in ("memory", "pids"):
        if V1_BOUND.get(controller, 0):
            assert controller not in probe.site.controllers
            assert "bound to cgroup v1" in probe.why_not[controller]
        else:
            assert controller in probe.site.controllers


def test_cgroup_kill_ends_a_whole_tree(group: V2Group) -> None:
    """A tree placed in the group (setsid'd and double-forked members too) dies at one write
    to cgroup.kill, and cgroup.events reports the group empty."""
    with subprocess.Popen(
        [sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as proc:
        _kill_tree_through(group, proc)


def _kill_tree_through(group: V2Group, proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        group.place(proc.pid)
        proc.stdin.write(b"x")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"ready\n"
        assert group.path is not None
        members = (group.path / "cgroup.procs").read_text().split()
        assert len(members) == 4, "control: the whole tree is in the group"
        assert group.populated()
        group.kill()
        assert group.wait_unpopulated(5.0)
        assert (group.path / "cgroup.procs").read_text() == ""
        assert proc.wait(timeout=5) == -signal.SIGKILL
        for pid in map(int, members):
            assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid)
    finally:
        proc.kill()
        proc.wait()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


def test_cpu_stat_counts_the_whole_tree(group: V2Group) -> None:
    """cpu.stat's usage covers a process and its child: at least what they report."""
    spin = (
        "import os, resource, sys, time\n"
        "sys.stdin.buffer.read(1)\n"
        "def spin():\n"
        "    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end: pass\n"
        "if os.fork() == 0:\n"
        "    spin(); os._exit(0)\n"
        "spin(); os.wait()\n"
        "me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,"
        " resource.RUSAGE_CHILDREN))\n"
        "print(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    group.place(proc.pid)
    before = group.cpu_seconds()
    out, _ = proc.communicate(b"x", timeout=60)
    reported = float(out)
    assert reported >= 0.6
    assert group.cpu_seconds() - before >= reported * 0.95


def test_destroy_waits_and_removes(group: V2Group) -> None:
    """destroy() kills a live member, waits for the group to empty, and removes it."""
    proc = subprocess.Popen(["sleep", "300"])
    group.place(proc.pid)
    path = group.path
    assert path is not None
    group.destroy()
    assert not path.exists()
    assert proc.wait(timeout=5) == -signal.SIGKILL
    group.destroy()  # idempotent


@pytest.mark.skipif(not HYBRID, reason="the memory controller is on v2 here: see the guest tests")
def test_a_v2_memory_plan_is_refused_where_the_controller_is_on_v1() -> None:
    """A plan naming cgroup-v2-memory on this host (which the planner never makes) is
    refused by the group set with the probe's reason, before any group exists."""
    plans = {"memory": LimitPlan("memory", 64 * 2**20, "cgroup-v2-memory", full=True)}
    before = sorted(_site().base.iterdir())
    with pytest.raises(SandboxSetupError, match="bound to cgroup v1"):
        SandboxCgroups(plans)
    assert sorted(_site().base.iterdir()) == before


@pytest.mark.skipif(not HYBRID, reason="describes the hybrid layout")
def test_planner_chooses_per_limit_on_the_hybrid_host() -> None:
    """Root here: CPU time on v2 (cpu.stat needs no controller), memory and pids on v1, and
    the reasons v2 was passed over are kept for doctor and refusals."""
    from glove.container._limits import explain_limit

    host = probe_host_limits()
    assert host.cgroup_v2_group
    assert not host.cgroup_v2_memory
    assert host.cgroup_v1_memory
    assert explain_limit("cpu_time", host) == "cgroup-v2-cpu-watchdog (whole sandbox)"
    memory = explain_limit("memory", host)
    assert memory.startswith("cgroup-v1-memory (whole sandbox), passed over cgroup-v2-memory")
    assert "bound to cgroup v1" in memory


@pytest.fixture
def delegated(unpriv: Unpriv) -> Iterator[Path]:
    """A v2 cgroup handed to the test user, removed afterwards."""
    with delegated_group(unpriv, _site().base.parent, "glove-test-deleg") as cg:
        yield cg


def _exec_in(cg: Path, unpriv: Unpriv, workspace: Path, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    """``glove exec ARGS`` as the test user, from a launcher that joined ``cg`` first."""
    status = workspace.parent / "status.json"
    status.unlink(missing_ok=True)
    argv = [
        "/bin/sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh",
        "setpriv", f"--reuid={unpriv.uid}", f"--regid={unpriv.gid}", "--clear-groups", "--",
        unpriv.python, "-m", "glove", "exec", "--json-status", str(status), *args,
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, timeout=60)
    return done.returncode, json.loads(status.read_text()) if status.exists() else {}


@pytest.mark.skipif(not HYBRID, reason="describes the hybrid layout")
def test_delegated_unprivileged_launcher_gets_v2_cpu_and_v1_refusals(
    delegated: Path, unpriv: Unpriv
) -> None:
    """An unprivileged launcher in a delegated v2 cgroup of this hybrid host: CPU time is
    whole-tree on cgroup-v2-cpu-watchdog, hit and killed with a setsid'd sleeper; memory
    is refused with the v1-binding reason; no sandbox group is left behind."""
    for workspace in _workspace_for(unpriv.uid, unpriv.gid):
        marker = f"glove-v2cpu-{os.getpid()}"
        rc, status = _exec_in(
            delegated, unpriv, workspace, "--cpu-time", "1", "--", "/bin/bash", "-c",
            f"setsid bash -c 'exec -a {marker} sleep 300' & exec python3 -c 'while True: pass'",
        )  # fmt: skip
        assert rc == 137, status
        assert status["outcome"] == "limit"
        assert status["limits"]["cpu_time"] == {
            "value": 1.0,
            "mechanism": "cgroup-v2-cpu-watchdog",
            "hit": True,
        }
        left = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, check=False)
        assert left.stdout == b""
        rc, status = _exec_in(delegated, unpriv, workspace, "--memory", "64M", "--", "true")
        assert rc == 125
        assert "cgroup-v2-memory: the memory controller is bound to cgroup v1" in status["error"]
        assert "--accept-weaker memory" in status["error"]
        assert [p.name for p in delegated.iterdir() if p.is_dir()] == []


def test_doctor_explains_each_limit_choice() -> None:
    """``glove doctor --json``'s limits check names every limit's mechanism, why a better
    one was passed over (here: controllers bound to v1), and the cgroup.kill teardown."""
    done = subprocess.run(
        [sys.executable, "-m", "glove", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    detail = checks["limits"]["detail"]
    for limit in ("wall_time", "cpu_time", "memory", "pids", "disk", "output"):
        assert f"{limit}: " in detail
    assert "cgroup.kill" in detail
    if HYBRID:
        assert (
            "memory: cgroup-v1-memory (whole sandbox), passed over cgroup-v2-memory (the "
            "memory controller is bound to cgroup v1" in detail
        )
        assert "cpu_time: cgroup-v2-cpu-watchdog (whole sandbox)" in detail


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_groups_of_a_killed_launcher_are_swept() -> None:
    """Empty groups named after a dead launcher pid are removed; a live launcher's group and
    a group that still holds a process are kept."""
    from glove.container.linux import _cgroups

    base = _site().base
    dead = _dead_pid()
    stale = base / f"sbx-{dead}-{secrets.token_hex(6)}"
    live = base / f"sbx-{os.getpid()}-{secrets.token_hex(6)}"
    busy = base / f"sbx-{dead}-{secrets.token_hex(6)}"
    for path in (stale, live, busy):
        path.mkdir()
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        (busy / "cgroup.procs").write_text(str(sleeper.pid))
        _cgroups._swept.pop(str(base), None)
        assert _cgroups.sweep_stale_groups(base) >= 1
        assert not stale.exists()
        assert live.exists()
        assert busy.exists()
        assert _cgroups.sweep_stale_groups(base) == 0  # once per process and base
    finally:
        sleeper.kill()
        sleeper.wait()
        for path in (live, busy):
            (path / "cgroup.kill").write_text("1")
            rmdir_when_empty(path)
