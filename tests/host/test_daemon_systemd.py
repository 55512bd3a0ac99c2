"""glove daemon against a real systemd user manager: READY, the watchdog, KillMode, and
install/uninstall exactly, all as the unprivileged test user.

PID 1 here is not systemd, so each run starts a private ``systemd --user`` for the test
user (``user_manager.py``: its own mount namespace and cgroup, nothing else touched). That
needs root; as another user the module is skipped, and the notify protocol is still
covered against a datagram listener in ``tests/control/test_notify.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Unpriv
from tests.host.user_manager import UserManager, user_manager

pytestmark = pytest.mark.skipif(
    os.getuid() != 0, reason="hosting a private systemd --user needs root"
)

UNIT = "gloved.service"
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 40.0


@pytest.fixture(scope="module")
def um(unpriv: Unpriv) -> Iterator[UserManager]:
    """One private systemd --user for the test user, for this module."""
    with user_manager(unpriv) as manager:
        yield manager


@pytest.fixture(autouse=True)
def clean(um: UserManager) -> Iterator[None]:
    """Each test starts with nothing installed and leaves nothing behind."""
    yield
    um.glove("daemon", "uninstall", "--force")
    shutil.rmtree(um.home / ".config" / "systemd" / "user" / f"{UNIT}.d", ignore_errors=True)
    um.systemctl("daemon-reload")
    um.systemctl("reset-failed")


def _json(out: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert out.returncode == 0, (out.stdout, out.stderr)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _install(um: UserManager) -> dict[str, object]:
    return _json(um.glove("daemon", "install", "--json"))


def _main_pid(um: UserManager) -> int:
    return int(um.show(UNIT, "MainPID")["MainPID"])


def _wait(predicate: object, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _health(um: UserManager) -> dict[str, object]:
    probe = (
        "import json, os, pathlib; from glove.control import call; "
        "sock = pathlib.Path(os.environ['XDG_RUNTIME_DIR'], 'glove', 'gloved.sock'); "
        "print(json.dumps(call(sock, 'health')))"
    )
    return _json(um.run(um.unpriv.python, "-c", probe))


def _tree(root: Path) -> dict[str, str]:
    """Every path under ``root``: its kind, and a link's target."""
    entries = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            entries[rel] = "link:" + os.readlink(path)
        else:
            entries[rel] = "dir" if path.is_dir() else "file"
    return entries


def test_install_starts_gloved_ready_in_its_own_namespaces(um: UserManager) -> None:
    """install makes systemd start gloved as Type=notify: it is active only once gloved's
    READY=1 arrived, shows gloved's STATUS=, and runs gloved in a user namespace mapping only
    this user, a private mount namespace, with no privileges."""
    report = _install(um)
    state = report["state"]
    assert isinstance(state, dict)
    assert (state["state"], state["sub_state"], state["enabled"]) == (
        "active",
        "running",
        "enabled",
    )
    assert state["status_text"] == "0 sessions running"
    assert state["watchdog_s"] == 30.0
    assert state["fragment_path"] == report["path"]
    props = um.show(UNIT, "MainPID", "Type", "NotifyAccess", "ExecMainStartTimestampMonotonic",
                    "ActiveEnterTimestampMonotonic")  # fmt: skip
    pid = int(props["MainPID"])
    assert (props["Type"], props["NotifyAccess"]) == ("notify", "main")
    assert int(props["ActiveEnterTimestampMonotonic"]) > int(
        props["ExecMainStartTimestampMonotonic"]
    )
    assert _health(um)["pid"] == pid
    assert Path(f"/proc/{pid}/uid_map").read_text().split() == [str(um.unpriv.uid)] * 2 + ["1"]
    assert os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user")
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink(f"/proc/{um.pid}/ns/mnt")
    status = Path(f"/proc/{pid}/status").read_text()
    assert "NoNewPrivs:\t1" in status
    assert "CapEff:\t0000000000000000" in status
    tree = _json(um.glove("diag", "tree", "--json"))["root"]
    assert isinstance(tree, dict)
    assert [c["name"] for c in tree["children"]] == [
        "launcher",
        "loop-lag",
        "sessions",
        "control",
        "notify",
    ]


def test_watchdog_pings_reach_systemd_and_a_wedged_loop_is_restarted(um: UserManager) -> None:
    """systemd sees gloved's WATCHDOG=1 pings; when gloved's event loop blocks past
    WatchdogSec=, systemd aborts it (faulthandler prints where it was stuck) and starts a new
    one."""
    _install(um)
    stall_script = um.base / "stalling_gloved.py"
    shutil.copy(REPO / "tests" / "control" / "stalling_gloved.py", stall_script)
    stall_script.chmod(0o644)
    log = um.home / "gloved.log"
    dropin = um.home / ".config" / "systemd" / "user" / f"{UNIT}.d"
    dropin.mkdir()
    (dropin / "test.conf").write_text(
        "[Service]\nWatchdogSec=2s\nTimeoutStopSec=5s\nRestartSec=1s\n"
        "Environment=GLOVE_TEST_STALL_S=8\n"
        f"ExecStart=\nExecStart={um.unpriv.python} {stall_script} --runtime-dir=%t/glove\n"
        f"StandardError=append:{log}\n"
    )
    assert um.systemctl("daemon-reload").returncode == 0
    assert um.systemctl("restart", UNIT).returncode == 0
    first = _main_pid(um)
    stamp = int(um.show(UNIT, "WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"])
    time.sleep(2.5)
    later = int(um.show(UNIT, "WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"])
    assert later > stamp  # pings arrived, about every second
    assert um.show(UNIT, "WatchdogUSec")["WatchdogUSec"] == "2s"
    os.kill(first, signal.SIGUSR2)  # the loop blocks for 8 s: 4x the watchdog interval
    _wait(lambda: _main_pid(um) not in (0, first), "a new gloved")
    _wait(lambda: um.show(UNIT, "ActiveState")["ActiveState"] == "active", "active again")
    assert int(um.show(UNIT, "NRestarts")["NRestarts"]) >= 1
    text = log.read_text()
    assert "Fatal Python error: Aborted" in text  # SIGABRT, the watchdog's signal


@pytest.mark.parametrize("how", ["crash", "restart"])
def test_sandboxes_do_not_survive_a_gloved_restart(um: UserManager, how: str) -> None:
    """With KillMode=mixed a real sandbox in gloved's cgroup is killed when gloved dies
    (kill -9) or is restarted, and systemd starts the new gloved only after it is gone."""
    _install(um)
    first = _main_pid(um)
    control_group = um.show(UNIT, "ControlGroup")["ControlGroup"]
    u = um.unpriv
    sandbox = subprocess.Popen(
        ["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--clear-groups", "--",
         u.python, "-m", "glove", "exec", "--", "/bin/sleep", "300"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(um.home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=um.home,  # the sandbox's workspace
    )  # fmt: skip
    try:
        pids = _sandbox_tree(sandbox.pid)
        for directory in um.unit_cgroups(control_group):
            for pid in pids:  # as if gloved had launched it: inside the unit's cgroup
                (directory / "cgroup.procs").write_text(str(pid))
        inside = (um.unit_cgroups(control_group)[0] / "cgroup.procs").read_text().split()
        assert set(map(str, pids)) <= set(inside)
        if how == "crash":
            os.kill(first, signal.SIGKILL)
        else:
            assert um.systemctl("restart", UNIT).returncode == 0
        _wait(lambda: _main_pid(um) not in (0, first), "a new gloved")
        survivors = [pid for pid in pids if _alive(pid)]
        assert survivors == [], "the new gloved started while a sandbox process still ran"
    finally:
        if sandbox.poll() is None:
            sandbox.kill()
        sandbox.wait(timeout=10)


def _sandbox_tree(launcher: int) -> list[int]:
    """The launcher and every descendant, once the contained ``sleep`` runs."""
    found: list[int] = []

    def scan() -> bool:
        found[:] = _descendants(launcher)
        return any(Path(f"/proc/{p}/comm").read_text().strip() == "sleep" for p in found[1:])

    _wait(scan, "the sandboxed sleep")
    return found


def _descendants(pid: int) -> list[int]:
    out = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in children:
            out += _descendants(int(child))
    return out


def test_install_twice_is_a_no_op(um: UserManager) -> None:
    """A second install writes nothing, runs no state-changing command and leaves the
    running gloved alone."""
    first = _install(um)
    unit, manifest = Path(str(first["path"])), um.home / ".local/state/glove/daemon-install.json"
    before = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in (unit, manifest)]
    pid = _main_pid(um)
    second = _install(um)
    assert second["changed"] is False
    assert second["commands"] == []
    assert second["files"] == [{"path": str(unit), "action": "unchanged"}]
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in (unit, manifest)] == before
    assert _main_pid(um) == pid


def test_a_hand_edited_unit_is_reported_not_overwritten_unless_forced(um: UserManager) -> None:
    """An edited unit makes install and uninstall refuse (naming the file, no traceback) and
    status report it; install --force puts back exactly what install writes."""
    report = _install(um)
    unit = Path(str(report["path"]))
    edited = unit.read_text() + "# a local tweak\n"
    unit.write_text(edited)
    refused = um.glove("daemon", "install")
    assert refused.returncode == 1
    assert str(unit) in refused.stderr
    assert "--force" in refused.stderr
    assert "edited since install" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert unit.read_text() == edited
    status = um.glove("daemon", "status", "--json")
    assert status.returncode == 0  # still running
    assert json.loads(status.stdout)["modified"] is True
    assert um.glove("daemon", "uninstall").returncode == 1
    assert unit.read_text() == edited
    forced = _json(um.glove("daemon", "install", "--force", "--json"))
    assert forced["files"] == [{"path": str(unit), "action": "replaced"}]
    plan = _json(um.glove("daemon", "install", "--dry-run", "--json"))
    files = plan["files"]
    assert isinstance(files, list)
    assert unit.read_text() == files[0]["content"]
    assert json.loads(um.glove("daemon", "status", "--json").stdout)["modified"] is False


@pytest.mark.parametrize("home", ["fresh", "with other units"])
def test_uninstall_removes_exactly_what_install_wrote(um: UserManager, home: str) -> None:
    """After install then uninstall the user's config and state trees are as they were
    (the unit, enable's link, the manifest and only the directories install created are
    gone), and systemd no longer knows the unit."""
    other = um.home / ".config" / "systemd" / "user" / "other.service"
    if home == "with other units":
        other.parent.mkdir(parents=True)
        other.write_text("[Service]\nExecStart=/bin/true\n")
        for p in (other.parent.parent.parent, other.parent.parent, other.parent, other):
            os.chown(p, um.unpriv.uid, um.unpriv.gid)
    before = _tree(um.home)
    _install(um)
    pid = _main_pid(um)
    wants = um.home / ".config/systemd/user/default.target.wants" / UNIT
    assert wants.is_symlink()
    report = _json(um.glove("daemon", "uninstall", "--json"))
    assert report["changed"] is True
    assert _tree(um.home) == before
    assert um.show(UNIT, "LoadState")["LoadState"] == "not-found"
    _wait(lambda: not _alive(pid), "the old gloved to exit")
    again = _json(um.glove("daemon", "uninstall", "--json"))
    assert again["changed"] is False
    if other.parent.exists():
        shutil.rmtree(um.home / ".config")


def test_install_refuses_when_systemd_reads_units_elsewhere(um: UserManager) -> None:
    """If the user manager does not load the unit from where install wrote it (another
    XDG_CONFIG_HOME), install says so and fails; uninstall --force then cleans up."""
    before = _tree(um.home)
    elsewhere = str(um.home / "elsewhere")
    out = um.glove("daemon", "install", XDG_CONFIG_HOME=elsewhere)
    assert out.returncode == 1
    assert "loads gloved.service from nowhere" in out.stderr
    assert "Traceback" not in out.stderr
    cleaned = um.glove("daemon", "uninstall", "--force", XDG_CONFIG_HOME=elsewhere)
    assert cleaned.returncode == 0, cleaned.stderr
    assert _tree(um.home) == before


CGROUP_PROBE = r"""
import os, subprocess, sys, time
own = [l[3:] for l in open("/proc/self/cgroup").read().splitlines() if l.startswith("0::")][0]
base = sys.argv[1] + own
os.mkdir(base + "/sandbox-1")
child = subprocess.Popen(["/bin/sleep", "60"])
with open(base + "/sandbox-1/cgroup.procs", "w") as f:
    f.write(str(child.pid))
print("moved", open(f"/proc/{child.pid}/cgroup").read().split("0::")[1].strip())
with open(base + "/sandbox-1/cgroup.kill", "w") as f:
    f.write("1")
print("killed by", -child.wait(timeout=10))
"""


def _unit_properties(um: UserManager, wanted: tuple[str, ...]) -> list[str]:
    plan = _json(um.glove("daemon", "install", "--dry-run", "--json"))
    files = plan["files"]
    assert isinstance(files, list)
    props = [
        line for line in str(files[0]["content"]).splitlines() if line.split("=", 1)[0] in wanted
    ]
    assert len(props) == len(wanted)
    return props


def test_a_sandbox_runs_under_the_units_namespaces(um: UserManager) -> None:
    """Under the unit's own PrivateUsers=, PrivateMounts=, NoNewPrivileges= and Delegate=
    settings, gloved's environment can still create a full sandbox (nested user and mount
    namespaces)."""
    wanted = ("PrivateUsers", "PrivateMounts", "NoNewPrivileges", "Delegate", "UMask", "LimitCORE")
    props = _unit_properties(um, wanted)
    inner = "readlink /proc/self/ns/user; echo contained"
    script = (
        "cat /proc/self/uid_map; readlink /proc/self/ns/user; "
        f"{um.unpriv.python} -m glove exec -- /bin/sh -c '{inner}'"
    )
    out = um.run(
        "systemd-run", "--user", "--wait", "--pipe", "--quiet", "--collect",
        *[f"--property={p}" for p in props], "/bin/sh", "-c", script,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[:3] == [str(um.unpriv.uid), str(um.unpriv.uid), "1"]  # the unit's userns
    unit_userns, sandbox_userns = lines[3], lines[4]
    assert unit_userns != os.readlink("/proc/self/ns/user")
    assert sandbox_userns != unit_userns  # the sandbox nests its own
    assert lines[-1] == "contained"


def test_gloved_can_make_and_kill_child_cgroups_under_the_units_settings(
    um: UserManager,
) -> None:
    """PrivateUsers= does not take Delegate= away: under the unit's settings a process can
    create a child of its own v2 cgroup, move a process into it and end it with cgroup.kill
    (what per-sandbox cgroups need)."""
    props = _unit_properties(um, ("PrivateUsers", "PrivateMounts", "NoNewPrivileges", "Delegate"))
    v2 = next(h for h in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
          if (h / "cgroup.controllers").exists())  # fmt: skip
    out = um.run(
        "systemd-run", "--user", "--wait", "--pipe", "--quiet", "--collect",
        *[f"--property={p}" for p in props], "/usr/bin/python3", "-c", CGROUP_PROBE, str(v2),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    moved, killed = out.stdout.splitlines()
    assert moved.startswith("moved /")
    assert moved.endswith("/sandbox-1")
    assert killed == f"killed by {int(signal.SIGKILL)}"


def test_start_stop_restart_status_and_logs(um: UserManager) -> None:
    """The control verbs drive systemd and status reports each state with its exit code."""
    _install(um)
    assert um.glove("daemon", "stop").returncode == 0
    stopped = um.glove("daemon", "status", "--json")
    assert stopped.returncode == 3
    body = json.loads(stopped.stdout)
    assert body["manager"]["state"] == "inactive"
    assert body["reachable"] is False
    assert um.glove("daemon", "start").returncode == 0
    first = _main_pid(um)
    running = um.glove("daemon", "status")
    assert running.returncode == 0
    assert "(answers)" in running.stdout
    assert um.glove("daemon", "restart").returncode == 0
    assert _main_pid(um) not in (0, first)
    logs = um.glove("daemon", "logs", "-n", "5")
    assert "Traceback" not in logs.stderr
    assert um.glove("daemon", "uninstall").returncode == 0
    gone = um.glove("daemon", "status")
    assert gone.returncode == 4
    assert "not installed" in gone.stdout
    assert um.glove("daemon", "start").returncode == 1


def test_doctor_reports_the_unit_and_what_is_delegated_to_it(um: UserManager) -> None:
    """With gloved installed and running, doctor says so, and its delegation verdict is read
    from the unit's own cgroup; a stopped unit is reported as not running."""
    _install(um)
    control_group = um.show(UNIT, "ControlGroup")["ControlGroup"]
    out = um.glove("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert checks["daemon_unit"]["status"] == "ok"
    assert f"pid {_main_pid(um)}" in checks["daemon_unit"]["detail"]
    unit_cg = um.unit_cgroups(control_group)[0]
    assert str(unit_cg) in checks["delegation"]["detail"]
    have = set((unit_cg / "cgroup.controllers").read_text().split())
    assert (checks["delegation"]["status"] == "ok") is ({"cpu", "memory", "pids"} <= have)
    assert um.glove("daemon", "stop").returncode == 0
    stopped = {c["name"]: c for c in json.loads(um.glove("doctor", "--json").stdout)["checks"]}
    assert stopped["daemon_unit"]["status"] == "warn"
    assert "not running" in stopped["daemon_unit"]["summary"]


def test_an_install_cut_short_before_its_manifest_is_completed_by_the_next(
    um: UserManager,
) -> None:
    """A unit file exactly as install writes it but with no manifest (a crash between the
    write and the manifest) is adopted, not refused: the next install records it, and
    starts gloved (systemd loads a unit file that appeared since it last looked)."""
    plan = _json(um.glove("daemon", "install", "--dry-run", "--json"))
    files = plan["files"]
    assert isinstance(files, list)
    unit = Path(files[0]["path"])
    assert um.show(UNIT, "LoadState")["LoadState"] == "not-found"
    made = um.run("/bin/sh", "-c", f'mkdir -p "{unit.parent}" && cat > "{unit}"')
    assert made.returncode == 0, made.stderr
    unit.write_text(files[0]["content"])
    report = _install(um)
    assert report["files"] == [{"path": str(unit), "action": "unchanged"}]
    assert report["changed"] is True  # the manifest was written, the unit enabled
    assert um.show(UNIT, "ActiveState")["ActiveState"] == "active"
    manifest = json.loads((um.home / ".local/state/glove/daemon-install.json").read_text())
    assert manifest["files"][0]["path"] == str(unit)
