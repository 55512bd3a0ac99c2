"""The sandbox's command runs in its groups, in every hierarchy, root and unprivileged.

The init joins its v1 groups itself (it writes ``0`` to each group's ``tasks`` file through
a descriptor the launcher opened before the clone) and is cloned into its v2 group
(``CLONE_INTO_CGROUP``), or, on the fork path, its reaper joins them and the parent moves it
into the v2 group. These tests read the command's ``/proc/PID/cgroup`` from the host (the
sandbox's own view is relative to its cgroup namespace) and compare every line with the
groups the launch made: the default profile's v1 ``memory`` and ``pids`` groups and the v2
group, as root and as the unprivileged user (from a delegated v2 cgroup, with a v1 base
handed to it). A failed
self-placement ends the launch as a ``setup_error`` before the command runs.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.container._cgroupfs import parse_proc_cgroups
from glove.container.linux._cgroup_v2 import probe_v2
from glove.container.linux._cgroups import CGROUP_V1_ROOT
from tests.conftest import Unpriv, readable_copy
from tests.container.cgroup_helpers import delegated_group, rmdir_when_empty
from tests.container.conftest import _workspace_for

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="makes cgroups (root only)")

PROBE = Path(__file__).with_name("placement_probe.py")
V1_BOUND = parse_proc_cgroups(Path("/proc/cgroups").read_text())
#: The v1 controllers the default profile's limits (memory, pids) use on this host; the
#: unprivileged user gets them in a base handed to it.
V1_CONTROLLERS = [c for c in ("memory", "pids") if V1_BOUND.get(c, 0) != 0]
UNPRIV_V1 = V1_CONTROLLERS
MODES = ["clone3", "fork"]


def _probe(argv: list[str], mode: str, cwd: Path) -> dict:  # type: ignore[type-arg]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    if mode == "fork":
        env["GLOVE_SANDBOX_LAUNCH"] = "fork"
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict = json.loads(done.stdout)  # type: ignore[type-arg]
    return result


def _lines_by_controller(lines: list[str]) -> dict[str, str]:
    """``{controller: path}`` from /proc/PID/cgroup (``""`` for the v2 line)."""
    found: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _assert_in_groups(seen: dict, v1: list[str], v2: bool) -> None:  # type: ignore[type-arg]
    where = _lines_by_controller(seen["cgroup"])
    assert sorted(seen["v1"]) == sorted(v1), seen
    for controller, group in seen["v1"].items():
        hierarchy = CGROUP_V1_ROOT / controller
        relative = "/" + str(Path(group).relative_to(hierarchy.resolve()))
        assert where[controller] == relative, (controller, seen)
    if v2:
        assert seen["v2"] is not None, seen
        mount = Path(probe_v2().site.base).parents  # type: ignore[union-attr]
        root = next(p for p in mount if (p / "cgroup.controllers").exists() and p.is_mount())
        assert where[""] == "/" + str(Path(seen["v2"]).relative_to(root)), seen


@pytest.mark.parametrize("mode", MODES)
def test_root_command_is_in_every_group(mode: str, tmp_path: Path) -> None:
    """As root: the command is in its v1 group of each controller and in its v2 group."""
    seen = _probe([sys.executable, str(PROBE), str(tmp_path)], mode, tmp_path)
    _assert_in_groups(seen, V1_CONTROLLERS, v2=probe_v2().site is not None)


@pytest.fixture
def v1_base(unpriv: Unpriv) -> Iterator[str]:
    """A v1 base under each of :data:`UNPRIV_V1`, handed to the unprivileged user (as an
    administrator would chown ``<controller>/glove``), removed afterwards."""
    name = f"glove-test-{os.getpid()}-{secrets.token_hex(3)}"
    made = []
    for controller in UNPRIV_V1:
        base = CGROUP_V1_ROOT / controller / name
        base.mkdir()
        made.append(base)
        for entry in (base, base / "tasks", base / "cgroup.procs"):
            os.chown(entry, unpriv.uid, unpriv.gid)
    try:
        yield name
    finally:
        for base in made:
            for child in (p for p in base.iterdir() if p.is_dir()):
                rmdir_when_empty(child)
            rmdir_when_empty(base)


@pytest.fixture
def delegated(unpriv: Unpriv) -> Iterator[Path]:
    """A v2 cgroup handed to the unprivileged user (as systemd's Delegate= does)."""
    site = probe_v2().site
    assert site is not None
    with delegated_group(unpriv, site.base.parent, "glove-test-place") as cg:
        yield cg


@pytest.mark.skipif(not UNPRIV_V1, reason="no v1 memory or pids hierarchy here")
@pytest.mark.parametrize("mode", MODES)
def test_unprivileged_command_is_in_every_group(
    mode: str, unpriv: Unpriv, v1_base: str, delegated: Path
) -> None:
    """As the unprivileged user, launching from a delegated v2 cgroup with v1 groups of its
    own: the command is in each v1 group and in the v2 group."""
    probe = readable_copy(PROBE)
    for workspace in _workspace_for(unpriv.uid, unpriv.gid):
        argv = [
            "/bin/sh", "-c", f'echo $$ > {delegated}/cgroup.procs && exec "$@"', "sh",
            "setpriv", f"--reuid={unpriv.uid}", f"--regid={unpriv.gid}", "--clear-groups",
            "--", unpriv.python, str(probe), str(workspace), v1_base,
        ]  # fmt: skip
        seen = _probe(argv, mode, workspace)
        _assert_in_groups(seen, UNPRIV_V1, v2=True)


@pytest.mark.skipif(not V1_CONTROLLERS, reason="no v1 hierarchy here")
def test_a_refused_self_placement_is_a_setup_error(tmp_path: Path) -> None:
    """Fault injection: the init gets a read-only descriptor for its ``tasks`` files, its
    self-placement fails, and the launch ends as a setup error naming the placement (the
    command, /bin/true, never ran)."""
    seen = _probe([sys.executable, str(PROBE), str(tmp_path), "--broken-join"], "clone3", tmp_path)
    assert seen["outcome"] == "setup_error", seen
    assert "cannot place the sandbox in cgroup: [Errno 9] Bad file descriptor" in seen["error"]
