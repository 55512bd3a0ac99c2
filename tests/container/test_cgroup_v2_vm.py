"""cgroup v2 controllers for real: ``glove exec`` in a guest whose hierarchy has them.

This host's controllers are bound to cgroup v1, so ``memory.max``, ``pids.max``,
``memory.events`` and ``pids.events`` exist in no v2 group here. The guest (see
``cgroup_vm.py``) boots with cgroup v2 alone and runs ``vm_cgroup_scenario.py`` once; each
test below checks one part of what it recorded. Needs root (QEMU's 9p export of ``/``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Unpriv
from tests.container import cgroup_vm

pytestmark = [
    pytest.mark.skipif(os.getuid() != 0, reason="boots a VM sharing / (root only)"),
    # The first test pays for the boot (about 50 s here, emulated; more on a loaded machine).
    pytest.mark.timeout(cgroup_vm.GUEST_DEADLINE_S + 60),
]

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def guest(unpriv: Unpriv) -> Iterator[dict[str, Any]]:
    """Boot the guest once, run the scenario, and return its results."""
    missing = cgroup_vm.missing_tools()
    if missing:
        pytest.fail("missing (scripts/setup installs them): " + ", ".join(missing))
    out = cgroup_vm.run_in_guest(
        (HERE / "vm_cgroup_scenario.py").read_text(),
        python=sys.executable,
        unpriv_python=unpriv.python,
        unpriv_user=unpriv.user,
    )
    try:
        rc = (out / "rc").read_text().strip()
        stderr = (out / "stderr").read_text()
        assert rc == "0", f"the scenario failed in the guest: {stderr[-3000:]}"
        results: dict[str, Any] = json.loads((out / "results.json").read_text())
        assert results["errors"] == [], "\n".join(results["errors"])
        yield results
    finally:
        cgroup_vm.remove(out)


def _limit(result: dict[str, Any], name: str) -> dict[str, Any]:
    status = result["status"]
    assert status is not None, result["stderr"]
    report: dict[str, Any] = status["limits"][name]
    return report


def test_root_probe_offers_the_v2_controllers(guest: dict[str, Any]) -> None:
    """As root on a pure v2 host the planner puts memory, pids, CPU time and the CPU rate on
    cgroup v2."""
    probe = guest["root_probe"]
    assert probe["cgroup_v2_group"]
    assert probe["cgroup_v2_memory"]
    assert probe["cgroup_v2_pids"]
    assert probe["cgroup_v2_cpu"]
    assert not probe["cgroup_v1_cpu"]
    assert not probe["cgroup_v1_memory"]
    assert "no cgroup v1 memory hierarchy" in probe["unavailable"]["cgroup-v1-memory"]
    explain = guest["root_explain"]
    assert explain["memory"].startswith("cgroup-v2-memory (whole sandbox)")
    assert explain["pids"].startswith("cgroup-v2-pids (whole sandbox)")
    assert explain["cpu_time"].startswith("cgroup-v2-cpu-watchdog (whole sandbox)")
    assert explain["cpus"] == "cgroup-v2-cpu-max (whole sandbox)"


def test_a_sandbox_group_carries_its_limits(guest: dict[str, Any]) -> None:
    """The live group has memory.max, swap 0, a group OOM kill, pids.max and cpu.max (the
    rate as quota and period); it holds the init and is removed after close."""
    files = guest["root_group_files"]
    assert files["memory.max"] == str(64 * 2**20)
    assert files["memory.swap.max"] in ("0", "error: No such file or directory")
    assert files["memory.oom.group"] == "1"
    assert files["pids.max"] == "32"
    assert files["cpu.max"] == "50000 100000"
    assert files["init_pid"] in files["cgroup.procs"].split()
    assert "populated 1" in files["cgroup.events"]
    assert files["path"].startswith("/sys/fs/cgroup/glove/sbx-")
    assert {"cpu", "memory", "pids"} <= set(files["subtree_control"].split())
    assert files["removed"] == "True"


@pytest.mark.parametrize("who", ["root", "user"])
def test_memory_hit_kills_the_tree(guest: dict[str, Any], who: str) -> None:
    """A 512 MiB allocation under --memory 64M: the group's OOM kill ends everything, and
    the result says cgroup-v2-memory, hit."""
    result = guest[f"{who}_memory"]
    assert _limit(result, "memory") == {
        "value": 64 * 2**20,
        "mechanism": "cgroup-v2-memory",
        "hit": True,
    }
    assert result["status"]["outcome"] == "limit"
    assert result["rc"] == 137
    assert result["stdout"] == "1\n"  # the control: the marker ran; nothing was allocated
    assert guest[f"{who}_memory_left"] == 0


@pytest.mark.parametrize("who", ["root", "user"])
def test_pids_hit_kills_the_tree(guest: dict[str, Any], who: str) -> None:
    """A fork loop under --pids 16 is refused by pids.max, seen in pids.events, and killed."""
    result = guest[f"{who}_pids"]
    assert _limit(result, "pids") == {"value": 16, "mechanism": "cgroup-v2-pids", "hit": True}
    assert result["status"]["outcome"] == "limit"
    assert result["status"]["error"] == "pids limit reached"
    assert result["rc"] == 137
    assert result["stdout"].startswith("1\n")
    assert guest[f"{who}_pids_left"] == 0


@pytest.mark.parametrize("who", ["root", "user"])
def test_cpu_time_hit_kills_the_tree(guest: dict[str, Any], who: str) -> None:
    """A busy loop under --cpu-time 4 is ended from cpu.stat's usage of the whole group, after
    the control line it printed (the marker's sleeper was alive inside) has arrived."""
    result = guest[f"{who}_cpu"]
    assert _limit(result, "cpu_time") == {
        "value": 4.0,
        "mechanism": "cgroup-v2-cpu-watchdog",
        "hit": True,
    }
    assert result["status"]["outcome"] == "limit"
    assert result["rc"] == 137
    assert result["stdout"] == "1\n"
    assert guest[f"{who}_cpu_left"] == 0


@pytest.mark.parametrize("who", ["root", "user"])
def test_cpu_rate_throttles_on_cpu_max(guest: dict[str, Any], who: str) -> None:
    """A busy loop under --cpus 0.5 in the one-CPU guest exits on its own, held to about
    half the CPU by cpu.max, and the result says cgroup-v2-cpu-max, hit (throttled)."""
    result = guest[f"{who}_cpus"]
    assert result["rc"] == 0, result["stderr"]
    status = result["status"]
    assert status["outcome"] == "exited"
    assert _limit(result, "cpus") == {"value": 0.5, "mechanism": "cgroup-v2-cpu-max", "hit": True}
    used = status["usage"]["cpu_user_s"] + status["usage"]["cpu_system_s"]
    rate = used / status["durations"]["total_s"]
    assert 0.15 <= rate <= 0.65, f"the loop got {rate:.3f} of the guest's CPU under 0.5"
    if who == "user":
        assert set(guest["user_cpus_subtree"].split()) == {"cpu", "memory", "pids"}


def test_delegated_launcher_moves_itself_into_a_leaf(guest: dict[str, Any]) -> None:
    """An unprivileged launcher alone in its delegated cgroup moves into supervisor/, enables
    memory and pids below, and leaves no sandbox group behind."""
    claim = guest["user_claim"]
    assert claim["leaf"] is True
    assert set(claim["subtree_control"].split()) == {"memory", "pids"}
    assert claim["unit_procs"] == []
    assert guest["user_leftover_groups"] == ["supervisor"]
    assert guest["root_leftover_groups"] == []


def test_a_shared_delegated_cgroup_refuses_the_memory_controller(guest: dict[str, Any]) -> None:
    """With another process in its delegated cgroup the launcher cannot enable controllers:
    memory is refused (exit 125) with that reason, not silently weakened."""
    result = guest["shared_memory"]
    assert result["rc"] == 125
    error = result["status"]["error"]
    assert "share the delegated cgroup" in error
    assert "--accept-weaker memory" in error


def test_an_undelegated_controller_is_refused_and_the_other_used(guest: dict[str, Any]) -> None:
    """A subtree given pids but not memory: memory is refused naming the missing delegation,
    pids still gets cgroup-v2-pids and its hit kills the tree."""
    refused = guest["pids_only_memory"]
    assert refused["rc"] == 125
    assert "does not offer memory (not delegated to this launcher)" in (refused["status"]["error"])
    pids = guest["pids_only_pids"]
    assert _limit(pids, "pids") == {"value": 16, "mechanism": "cgroup-v2-pids", "hit": True}
    assert pids["rc"] == 137


def test_a_daemon_claims_its_delegated_cgroup_at_start(guest: dict[str, Any]) -> None:
    """claim_cgroup_v2 (for gloved at start-up) moves the process into supervisor/ and
    enables cpu, memory and pids for the sandboxes to come, and says so."""
    claim = guest["daemon_claim"]
    assert claim["line"] == (
        "cgroup v2: sandbox groups under /sys/fs/cgroup/glove-vm-daemon, controllers cpu "
        "memory pids, launcher moved into /sys/fs/cgroup/glove-vm-daemon/supervisor"
    ), claim["stderr"]
    assert claim["cgroup"] == "0::/glove-vm-daemon/supervisor"
    assert set(claim["subtree_control"].split()) == {"cpu", "memory", "pids"}
