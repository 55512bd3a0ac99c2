"""glove doctor tells the truth about this machine, as root and as the test user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Unpriv


def _doctor(argv: list[str]) -> tuple[int, dict[str, dict[str, object]]]:
    out = subprocess.run(
        [*argv, "-m", "glove", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    report = json.loads(out.stdout)
    return out.returncode, {c["name"]: c for c in report["checks"]}


def _independent_userns(prefix: list[str]) -> bool:
    """Ask util-linux's unshare, not our code, whether a user namespace can be made."""
    return subprocess.run([*prefix, "unshare", "-Ur", "true"], timeout=30).returncode == 0


@pytest.mark.parametrize("who", ["root", "unpriv"])
def test_doctor_agrees_with_independent_probes(who: str, unpriv: Unpriv) -> None:
    """Each verdict matches what the kernel and util-linux say, for both users."""
    prefix = unpriv.command() if who == "unpriv" else []
    python = unpriv.python if who == "unpriv" else sys.executable
    code, checks = _doctor([*prefix, python])
    assert set(checks) == {
        "user_namespaces", "seccomp", "landlock", "unix_socket_gate", "cgroups",
        "legacy_tiocsti", "fuse",
        "pidfd_clone3", "limits", "sandbox_self_test", "macos_seatbelt",
        "evaluator_scanner", "interpreter_links", "runtime_dir", "lingering", "delegation",
        "daemon_unit",
    }  # fmt: skip
    userns = _independent_userns(prefix)
    assert (checks["user_namespaces"]["status"] == "ok") is userns
    tiocsti = Path("/proc/sys/dev/tty/legacy_tiocsti").read_text().strip()
    assert (checks["legacy_tiocsti"]["status"] == "warn") is (tiocsti == "1")
    seccomp_line = [
        ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("Seccomp")
    ]
    assert (checks["seccomp"]["status"] == "ok") is bool(seccomp_line)
    # The end-to-end launch works on this machine for both users, and the limit report
    # names a mechanism for each of the six limits.
    assert checks["sandbox_self_test"]["status"] == "ok"
    for limit in ("wall_time", "cpu_time", "memory", "pids", "disk", "output"):
        assert f"{limit}: " in str(checks["limits"]["detail"])
    # The Unix socket gate is found for both users here; the Landlock ABI is named.
    gate = checks["unix_socket_gate"]
    assert (gate["status"], gate["required"]) == ("ok", False)
    assert "seccomp-notify-connect" in str(gate["summary"])
    assert "LANDLOCK_ACCESS_FS_RESOLVE_UNIX needs ABI 9" in str(gate["detail"])
    # The macOS Seatbelt backend is reported, and on Linux it says it is not used here.
    assert checks["macos_seatbelt"]["status"] == "ok"
    assert not checks["macos_seatbelt"]["required"]
    assert "macOS-only" in str(checks["macos_seatbelt"]["summary"])
    # Both installs (root's editable one, the test user's pip install . copy) built the
    # evaluator's C scanner, and say so.
    scanner = checks["evaluator_scanner"]
    assert (scanner["status"], scanner["required"]) == ("ok", False)
    assert "glove.evaluate._cscan" in str(scanner["summary"])
    required_ok = all(c["status"] != "fail" for c in checks.values() if c["required"])
    assert (code == 0) is required_ok


def test_doctor_warns_when_the_evaluator_runs_in_pure_python() -> None:
    """Without the C scanner (its import fails), doctor's check is a warning with the fix."""
    code = (
        "import sys, msgspec; sys.modules['glove.evaluate._cscan'] = None\n"
        "from glove.host._doctor import check_evaluator_scanner\n"
        "print(msgspec.json.encode(check_evaluator_scanner()).decode())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    check = json.loads(out.stdout)
    assert (check["name"], check["status"], check["required"]) == (
        "evaluator_scanner",
        "warn",
        False,
    )
    assert "pure-Python" in check["summary"]
    assert "python3-dev" in check["fix"]


def test_doctor_reports_cgroup_v2_controllers_not_delegated_here() -> None:
    """On a hybrid v1 host without v2 cpu/memory/pids, doctor says they are not delegated."""
    unified = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    v2_controllers = set(unified.read_text().split()) if unified.exists() else set()
    _, checks = _doctor([sys.executable])
    if {"cpu", "memory", "pids"} <= v2_controllers:
        assert checks["cgroups"]["status"] == "ok"
    else:
        assert checks["cgroups"]["status"] == "warn"
        assert "not delegated" in str(checks["cgroups"]["summary"]) + str(
            checks["cgroups"]["detail"]
        )


def test_human_output_explains_and_exits_zero_when_required_pass() -> None:
    """The text report marks each check and ends with a verdict."""
    out = subprocess.run(
        [sys.executable, "-m", "glove", "doctor"], capture_output=True, text=True, timeout=60
    )
    assert "user_namespaces (required)" in out.stdout
    assert out.stdout.rstrip().endswith(
        "all required checks passed" if out.returncode == 0 else "a required check FAILED"
    )


def test_doctor_names_the_weaker_memory_mechanism_for_the_test_user(unpriv: Unpriv) -> None:
    """Where no memory controller belongs to the test user, its memory limit is weaker."""
    _, checks = _doctor([*unpriv.command(), unpriv.python])
    v1_memory = Path("/sys/fs/cgroup/memory")
    unified = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    v2_memory = unified.exists() and "memory" in unified.read_text().split()
    if not v2_memory and (not v1_memory.exists() or v1_memory.stat().st_uid != unpriv.uid):
        assert checks["limits"]["status"] == "warn"
        assert "memory" in str(checks["limits"]["summary"])
    else:
        assert "memory: cgroup" in str(checks["limits"]["detail"])


def test_doctor_lingering_and_delegation_agree_with_logind_and_the_cgroup_tree() -> None:
    """lingering says what loginctl says (or that logind cannot be asked); delegation lists
    the controllers the user manager's cgroup really has; nothing installed is reported."""
    _, checks = _doctor([sys.executable])
    asked = subprocess.run(
        ["loginctl", "show-user", str(os.getuid()), "--property=Linger", "--value"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    lingering = checks["lingering"]
    if asked.returncode != 0:
        assert lingering["status"] == "warn"
        assert "cannot ask systemd-logind" in str(lingering["summary"])
    else:
        assert (lingering["status"] == "ok") is (asked.stdout.strip() == "yes")
    uid = os.getuid()
    v2 = (
        Path("/sys/fs/cgroup")
        if Path("/sys/fs/cgroup/cgroup.controllers").exists()
        else (Path("/sys/fs/cgroup/unified"))
    )
    manager_cg = v2 / "user.slice" / f"user-{uid}.slice" / f"user@{uid}.service"
    delegation = checks["delegation"]
    if not manager_cg.exists():
        assert delegation["status"] == "warn"
        assert "cannot read" in str(delegation["summary"])
    else:
        have = set((manager_cg / "cgroup.controllers").read_text().split())
        assert (delegation["status"] == "ok") is ({"cpu", "memory", "pids"} <= have)
    assert checks["daemon_unit"]["fix"] == "glove daemon install"


def test_doctor_names_perfs_build_id_cache_as_the_second_name_of_an_interpreter(
    tmp_path: Path,
) -> None:
    """An interpreter with a second name (perf's build-id cache links every binary it
    profiled) makes glove run refuse its upstreams: doctor warns and names the link."""
    from glove.host._doctor import check_interpreter_links

    interpreter = tmp_path / "bin" / "python3.11"
    interpreter.parent.mkdir()
    interpreter.write_bytes(Path(sys.executable).resolve().read_bytes()[:4096])
    assert check_interpreter_links([interpreter], caches=(str(tmp_path / ".debug"),)).status == "ok"

    cached = tmp_path / ".debug" / "usr" / "bin" / "python3.11" / "0f3c" / "elf"
    cached.parent.mkdir(parents=True)
    os.link(interpreter, cached)
    check = check_interpreter_links([interpreter], caches=(str(tmp_path / ".debug"),))
    assert (check.name, check.status, check.required) == ("interpreter_links", "warn", False)
    assert f"{interpreter} has 2 hard links" in check.detail
    assert str(cached) in check.detail
    assert "buildid-cache" in check.fix

    cached.unlink()
    os.link(interpreter, tmp_path / "elsewhere")
    check = check_interpreter_links([interpreter], caches=(str(tmp_path / ".debug"),))
    assert check.status == "warn"
    assert "-samefile" in check.fix


def test_doctor_finds_this_machines_interpreters_with_one_name_each() -> None:
    """On this (clean) machine the real check runs over the real interpreters and is ok."""
    _, checks = _doctor([sys.executable])
    assert checks["interpreter_links"]["status"] == "ok", checks["interpreter_links"]
