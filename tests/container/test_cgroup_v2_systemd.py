"""cgroup v2 under a real systemd delegation: a ``Delegate=yes`` unit of the test user.

A private ``systemd --user`` (``tests/host/user_manager.py``) starts a transient service with
``Delegate=yes``; the launcher inside finds its unit's cgroup delegated, keeps every sandbox
group inside it (so the unit's ``KillMode`` reaches them) and, on this hybrid host, gets
CPU time from the group's ``cpu.stat`` while the controllers stay refused. Needs root.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Unpriv
from tests.container.conftest import _workspace_for
from tests.host.user_manager import UserManager, user_manager

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="starts systemd --user (root only)")

#: Launches a sandbox through the library and reports where its v2 group is.
WHERE = """
import json, os, msgspec
from glove.container import build_spec, launch, load_profile
from glove.container._limits import Limits
spec = build_spec(load_profile(None), ["sleep", "30"], cwd="/tmp", host_env={})
spec = msgspec.structs.replace(spec, workspace=None, limits=Limits(cpu_time=60, pids=64))
null = os.open(os.devnull, os.O_RDWR)
process = launch(spec, stdio=(null, null, null))
own = open("/proc/self/cgroup").read().split("0::")[1].split()[0]
path = process.cgroups.v2.path
print(json.dumps({"own": own, "group": str(path), "plans": {
    name: plan.mechanism for name, plan in process.plans.items()}}))
process.close()
print(json.dumps({"removed": not path.exists()}))
"""


@pytest.fixture(scope="module")
def manager(unpriv: Unpriv) -> Iterator[UserManager]:
    """A running user manager for the test user."""
    with user_manager(unpriv) as started:
        yield started


def _in_unit(manager: UserManager, *argv: str) -> tuple[int, str, str]:
    done = manager.run(
        "systemd-run", "--user", "--wait", "--pipe", "--quiet", "-p", "Delegate=yes",
        "--", *argv,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_sandbox_groups_stay_inside_the_delegated_unit(
    manager: UserManager, unpriv: Unpriv
) -> None:
    """The sandbox's v2 group is a child of the unit's own cgroup, and is gone after close."""
    rc, out, err = _in_unit(manager, unpriv.python, "-c", WHERE)
    assert rc == 0, err
    first, second = (json.loads(line) for line in out.splitlines())
    unit = "/sys/fs/cgroup/unified" + first["own"]
    assert first["own"].endswith(".service")
    assert first["group"].startswith(unit + "/sbx-")
    assert first["plans"]["cpu_time"] == "cgroup-v2-cpu-watchdog"
    assert second == {"removed": True}


def test_cpu_time_hit_in_a_delegated_unit(manager: UserManager, unpriv: Unpriv) -> None:
    """``glove exec --cpu-time 1`` in the unit: cgroup-v2-cpu-watchdog, hit, tree killed;
    ``--memory`` is refused because the host binds the controller to v1."""
    for workspace in _workspace_for(unpriv.uid, unpriv.gid):
        status = workspace.parent / "status.json"
        marker = f"glove-sd-{os.getpid()}"
        rc, _, err = _in_unit(
            manager, unpriv.python, "-m", "glove", "exec", "--json-status", str(status),
            "--workspace", str(workspace), "--cpu-time", "1", "--", "/bin/bash", "-c",
            f"setsid bash -c 'exec -a {marker} sleep 300' & exec python3 -c 'while True: pass'",
        )  # fmt: skip
        assert rc == 137, err
        report = json.loads(status.read_text())
        assert report["limits"]["cpu_time"] == {
            "value": 1.0,
            "mechanism": "cgroup-v2-cpu-watchdog",
            "hit": True,
        }
        assert not [p for p in Path("/proc").glob("[0-9]*") if _named(p, marker)]
        status.unlink()
        rc, _, err = _in_unit(
            manager, unpriv.python, "-m", "glove", "exec", "--json-status", str(status),
            "--workspace", str(workspace), "--memory", "64M", "--", "true",
        )  # fmt: skip
        assert rc == 125, err
        error = json.loads(status.read_text())["error"]
        if Path("/sys/fs/cgroup/unified").is_dir():
            assert "bound to cgroup v1" in error


def _named(proc: Path, marker: str) -> bool:
    try:
        return (proc / "cmdline").read_bytes().startswith(marker.encode())
    except OSError:
        return False
