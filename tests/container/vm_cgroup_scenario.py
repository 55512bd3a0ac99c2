"""The guest side of test_cgroup_v2_vm.py: runs as root in a pure cgroup v2 guest.

Runs ``glove exec`` as root and as the unprivileged user in delegated cgroups, with each
limit hit on its cgroup v2 mechanism, and records what happened in ``results.json`` in the
directory given as the first argument. It asserts nothing: the host test does.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

OUT = Path(sys.argv[1])
CG = Path("/sys/fs/cgroup")
ROOT_PYTHON = sys.executable
UNPRIV_PYTHON = os.environ["GLOVE_UNPRIV_PYTHON"]
USER = pwd.getpwnam(os.environ["GLOVE_UNPRIV_USER"])
RUN_DEADLINE_S = 120
results: dict[str, Any] = {}

HOG = ("python3", "-c", "b = bytearray(512 * 1024 * 1024); print('allocated')")
FORKS = (
    "python3",
    "-c",
    (
        "import os, time\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(300); os._exit(0)\n"
        "except OSError:\n"
        "    time.sleep(30)\n"  # still running when the supervisor's poll sees the hit
    ),
)
SPIN = ("python3", "-c", "while True: pass")
#: The CPU-time budget of the spin cases. Under TCG the marker's bash, sleep and pgrep
#: alone cost the group 0.7 to 1.05 s of CPU time before the spin starts (measured), so a
#: budget of 1 s could be spent before the control line was printed.
CPU_TIME = "4"
#: Spins for 1.5 s of wall time and exits on its own (under a CPU rate, not a CPU-time cap).
SPIN_FOR = (
    "python3",
    "-c",
    "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass\n",
)


def with_marker(marker: str, cmd: tuple[str, ...]) -> tuple[str, ...]:
    """Start a long sleeper named ``marker`` in the background, print how many such run
    (the control: 1), then run ``cmd``."""
    quoted = " ".join("'" + part.replace("'", "'\\''") + "'" for part in cmd)
    script = f"(exec -a {marker} sleep 300 &) ; sleep 0.2; pgrep -c -f ^{marker}; exec {quoted}"
    return ("/bin/bash", "-c", script)


def left_alive(marker: str) -> int:
    """How many processes named ``marker`` are still alive."""
    found = subprocess.run(["pgrep", "-c", "-f", f"^{marker}"], capture_output=True, text=True)
    return int(found.stdout.strip() or 0)


def delegate(group: Path, *, subtree: str | None = None) -> Path:
    """Make ``group`` and hand it to the unprivileged user, as systemd's Delegate= does."""
    group.mkdir(exist_ok=True)
    if subtree is not None:
        (group.parent / "cgroup.subtree_control").write_text(subtree)
    for entry in (
        group,
        *(group / f for f in ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")),
    ):
        os.chown(entry, USER.pw_uid, USER.pw_gid)
    return group


def glove_exec(
    label: str,
    flags: tuple[str, ...],
    cmd: tuple[str, ...],
    *,
    unpriv: bool = False,
    cgroup: Path | None = None,
) -> None:
    """Run ``glove exec`` (as root, or as the user after the wrapper joined ``cgroup``)."""
    base = Path(tempfile.mkdtemp(prefix=f"{label}-", dir="/tmp"))
    workspace = base / "ws"
    workspace.mkdir()
    for path in (base, workspace):
        os.chown(path, USER.pw_uid if unpriv else 0, USER.pw_gid if unpriv else 0)
    status = base / "status.json"
    python = UNPRIV_PYTHON if unpriv else ROOT_PYTHON
    argv = [python, "-m", "glove", "exec", "--json-status", str(status),
            "--workspace", str(workspace), *flags, "--", *cmd]  # fmt: skip
    if unpriv:
        argv = ["setpriv", f"--reuid={USER.pw_uid}", f"--regid={USER.pw_gid}",
                "--clear-groups", "--", *argv]  # fmt: skip
    if cgroup is not None:
        # The wrapper moves itself (and so the launcher it becomes) into the cgroup.
        argv = ["/bin/sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh", *argv]
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=workspace, capture_output=True, text=True, timeout=RUN_DEADLINE_S,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"},
    )  # fmt: skip
    results[label] = {
        "rc": done.returncode,
        "stderr": done.stderr[-2000:],
        "stdout": done.stdout[-2000:],
        "status": _decode(status),
        "seconds": round(time.monotonic() - started, 2),
    }


def _decode(status: Path) -> dict[str, Any] | None:
    try:
        decoded: dict[str, Any] = json.loads(status.read_text())
    except (OSError, ValueError):
        return None
    return decoded


def probe_as_root() -> None:
    """What the planner sees as root in the guest, and the group files of a live sandbox."""
    import msgspec

    from glove.container import build_spec, launch, load_profile, probe_host_limits
    from glove.container._limits import SANDBOX_LIMIT_NAMES, Limits, explain_limit

    host = probe_host_limits()
    results["root_probe"] = msgspec.to_builtins(host)
    results["root_explain"] = {name: explain_limit(name, host) for name in SANDBOX_LIMIT_NAMES}
    spec = build_spec(load_profile(None), ["sleep", "30"], cwd="/tmp", host_env={})
    spec = msgspec.structs.replace(
        spec, workspace=None, limits=Limits(memory=64 * 2**20, pids=32, cpu_time=60, cpus=0.5)
    )
    devnull = os.open(os.devnull, os.O_RDWR)
    process = launch(spec, stdio=(devnull, devnull, devnull))
    assert process.cgroups is not None
    assert process.cgroups.v2 is not None
    path = process.cgroups.v2.path
    assert path is not None
    files = {}
    for name in ("memory.max", "memory.swap.max", "memory.oom.group", "pids.max",
                 "cpu.max", "cgroup.procs", "cgroup.events"):  # fmt: skip
        try:
            files[name] = (path / name).read_text().strip()
        except OSError as exc:
            files[name] = f"error: {exc.strerror}"
    files["init_pid"] = str(process.pid)
    files["subtree_control"] = (path.parent / "cgroup.subtree_control").read_text().strip()
    files["path"] = str(path)
    process.kill()
    process.close()
    files["removed"] = str(not path.exists())
    results["root_group_files"] = files
    os.close(devnull)


def main() -> None:
    """Run every case; record a traceback instead of stopping at a failure."""
    cases = [
        probe_as_root,
        lambda: glove_exec("root_memory", ("--memory", "64M"), with_marker("gvm-rm", HOG)),
        lambda: results.update(root_memory_left=left_alive("gvm-rm")),
        lambda: glove_exec("root_pids", ("--pids", "16"), with_marker("gvm-rp", FORKS)),
        lambda: results.update(root_pids_left=left_alive("gvm-rp")),
        lambda: glove_exec("root_cpu", ("--cpu-time", CPU_TIME), with_marker("gvm-rc", SPIN)),
        lambda: results.update(root_cpu_left=left_alive("gvm-rc")),
        lambda: glove_exec("root_cpus", ("--cpus", "0.5"), SPIN_FOR),
    ]
    unit = CG / "glove-vm-unit"
    cases += [
        lambda: delegate(unit),
        lambda: glove_exec(
            "user_memory",
            ("--memory", "64M"),
            with_marker("gvm-um", HOG),
            unpriv=True,
            cgroup=unit,
        ),
        lambda: results.update(
            user_memory_left=left_alive("gvm-um"),
            user_claim={
                "leaf": (unit / "supervisor").is_dir(),
                "subtree_control": (unit / "cgroup.subtree_control").read_text().strip(),
                "unit_procs": (unit / "cgroup.procs").read_text().split(),
            },
        ),
        # Later launchers join the leaf: the unit itself now has controllers enabled.
        lambda: glove_exec(
            "user_pids",
            ("--pids", "16"),
            with_marker("gvm-up", FORKS),
            unpriv=True,
            cgroup=unit / "supervisor",
        ),
        lambda: results.update(user_pids_left=left_alive("gvm-up")),
        lambda: glove_exec(
            "user_cpu",
            ("--cpu-time", CPU_TIME),
            with_marker("gvm-uc", SPIN),
            unpriv=True,
            cgroup=unit / "supervisor",
        ),
        lambda: results.update(user_cpu_left=left_alive("gvm-uc")),
        # The first launch with a rate enables cpu in the unit's subtree, lazily.
        lambda: glove_exec(
            "user_cpus", ("--cpus", "0.5"), SPIN_FOR, unpriv=True, cgroup=unit / "supervisor"
        ),
        lambda: results.update(
            user_cpus_subtree=(unit / "cgroup.subtree_control").read_text().strip(),
            user_leftover_groups=sorted(p.name for p in unit.iterdir() if p.is_dir()),
        ),
    ]
    shared = CG / "glove-vm-shared"
    cases += [
        lambda: delegate(shared),
        lambda: results.update(sharer=_start_sharer(shared)),
        lambda: glove_exec(
            "shared_memory", ("--memory", "64M"), ("true",), unpriv=True, cgroup=shared
        ),
    ]
    pids_only = CG / "glove-vm-slice" / "unit"
    cases += [
        lambda: (CG / "glove-vm-slice").mkdir(exist_ok=True),
        lambda: delegate(pids_only, subtree="+pids"),
        lambda: glove_exec(
            "pids_only_memory", ("--memory", "64M"), ("true",), unpriv=True, cgroup=pids_only
        ),
        lambda: glove_exec(
            "pids_only_pids", ("--pids", "16"), with_marker("gvm-po", FORKS),
            unpriv=True, cgroup=pids_only,
        ),
        lambda: results.update(root_leftover_groups=sorted(
            p.name for p in (CG / "glove").iterdir() if p.is_dir()
        )),
    ]  # fmt: skip
    daemon = CG / "glove-vm-daemon"
    cases += [lambda: delegate(daemon), lambda: results.update(daemon_claim=_claim_in(daemon))]
    errors = []
    for case in cases:
        try:
            case()
        except Exception:  # recorded for the host test to show
            errors.append(traceback.format_exc())
    results["errors"] = errors
    (OUT / "results.json").write_text(json.dumps(results, indent=1))


def _claim_in(group: Path) -> dict[str, str]:
    """As the user in ``group``, claim the site the way gloved does at start-up."""
    code = (
        "from glove.container.linux._cgroups import claim_cgroup_v2\n"
        "print(claim_cgroup_v2())\n"
        "print(open('/proc/self/cgroup').read().strip())\n"
    )
    done = subprocess.run(
        ["/bin/sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh",
         "setpriv", f"--reuid={USER.pw_uid}", f"--regid={USER.pw_gid}", "--clear-groups",
         "--", UNPRIV_PYTHON, "-c", code],
        capture_output=True, text=True, timeout=RUN_DEADLINE_S,
    )  # fmt: skip
    line, _, cgroup = done.stdout.partition("\n")
    return {
        "line": line,
        "cgroup": cgroup.strip(),
        "stderr": done.stderr[-1000:],
        "subtree_control": (group / "cgroup.subtree_control").read_text().strip(),
    }


def _start_sharer(group: Path) -> int:
    """Put a long sleeper of the user in ``group`` (root moves it), so the launcher that
    joins the group later is not alone there."""
    proc = subprocess.Popen(["sleep", "300"], user=USER.pw_uid, group=USER.pw_gid, extra_groups=[])
    (group / "cgroup.procs").write_text(str(proc.pid))
    return proc.pid


if __name__ == "__main__":
    main()
