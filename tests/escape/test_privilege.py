"""Escape attempts against the privilege perimeter: capabilities, setuid, seccomp."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.escape._harness import Sandbox, User, make_sandbox

ZERO_CAPS = "0000000000000000"
# What a denial looks like from inside: an errno the filter returns, or a SIGSYS kill.
DENIED_ERRNOS = {"EPERM", "EACCES", "ENOSYS"}

# Calls the issue requires the filter to deny. Their arguments are chosen in probe.py so
# that, were the filter missing, the kernel would answer success, EFAULT, EBADF or EINVAL.
DENIED_SYSCALLS = (
    "ptrace_traceme",
    "process_vm_readv",
    "process_vm_writev",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "unshare_newuser",
    "unshare_newns",
    "unshare_newnet",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ioctl_TIOCSTI",
    "ioctl_TIOCLINUX",
    "socket_packet_raw",
    "socket_packet_dgram",
    "socket_inet_raw",
    "socket_inet6_raw",
    "socket_inet_packet",
    "socket_netlink_uevent",
    "socket_netlink_sock_diag",
    "socket_netlink_audit",
    "socket_netlink_generic",
    "socketpair_netlink",
    "x32_ptrace",
    "socket_vsock",
    "syslog_read_all",
)
# Calls that must keep working: proof that the filter is not a blanket denial.
ALLOWED_SYSCALLS = {
    "getpid": "ok",
    "socket_inet_stream": "ok",
    "socket_unix_stream": "ok",
    "ioctl_TIOCGWINSZ": "EBADF",
    # NETLINK_ROUTE is allowed: it reads the sandbox's own network namespace only (see
    # test_rtnetlink_sees_only_lo_and_changes_nothing).
    "socket_netlink_route": "ok",
    "socket_netlink_dgram": "ok",
}

_reports: dict[tuple[str, str], dict[str, Any]] = {}


def _cached(user: User, rawsys: Path, what: str) -> dict[str, Any]:
    """Run one probe per user and reuse its report across the parametrized checks."""
    key = (user.label, what)
    if key not in _reports:
        box = make_sandbox(user, rawsys)
        try:
            if what == "seccomp":
                _reports[key] = box.probe("seccomp")
            else:
                _reports[key] = box.raw(what)
        finally:
            shutil.rmtree(box.base, ignore_errors=True)
    return _reports[key]


def _is_denied(result: dict[str, Any]) -> bool:
    """The attempt was refused by the filter (errno) or killed it (SIGSYS)."""
    return result.get("errno") in DENIED_ERRNOS or result.get("signal") == signal.SIGSYS


def test_rtnetlink_sees_only_lo_and_changes_nothing(sb: Sandbox) -> None:
    """The allowed NETLINK_ROUTE socket lists only ``lo`` and cannot take it down (EPERM)."""
    report = sb.probe("rtnetlink")
    assert report["links"] == ["lo"]
    assert report["lo_down"] == "EPERM"


def test_capabilities_are_all_dropped(sb: Sandbox) -> None:
    """CapInh, CapPrm, CapEff, CapBnd and CapAmb are all zero after exec."""
    report = sb.probe("privs")
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert report[cap] == ZERO_CAPS, f"{cap} = {report[cap]}"


def test_no_new_privs_and_seccomp_are_set(sb: Sandbox) -> None:
    """NoNewPrivs is 1 and a seccomp filter is installed (mode 2)."""
    report = sb.probe("privs")
    assert report["NoNewPrivs"] == "1"
    assert report["Seccomp"] == "2"


def test_setuid_binary_gains_nothing(sb: Sandbox) -> None:
    """A setuid-root binary in the workspace runs without euid 0 or any capability."""
    suid = sb.ws / "suid-rawsys"
    shutil.copy(sb.rawsys, suid)
    os.chown(suid, 0, 0)
    suid.chmod(0o4755)
    if not sb.user.is_root:
        control = sb.host([str(suid), "ids"])
        assert b'"euid": 0' in control.stdout, f"control: setuid works on the host {control}"
    res = sb.run(["/workspace/suid-rawsys", "ids"])
    assert res.returncode == 0, res.describe()
    ids = res.probe()
    assert ids["euid"] == ids["ruid"], ids
    assert ids["suid"] == ids["ruid"], ids
    assert ids["CapEff"] == ZERO_CAPS, ids
    assert ids["CapPrm"] == ZERO_CAPS, ids
    assert ids["NoNewPrivs"] == "1", ids


def test_strace_cannot_attach(sb: Sandbox) -> None:
    """strace (ptrace) fails inside the sandbox while it works on the host."""
    control = sb.host(["strace", "-o", "/dev/null", "/bin/true"])
    assert control.returncode == 0, f"control: strace works on the host: {control.stderr!r}"
    res = sb.run(["/usr/bin/strace", "-o", "/dev/null", "/bin/true"])
    assert res.returncode != 0, res.describe()


def test_system_setuid_tools_do_not_escalate(sb: Sandbox) -> None:
    """The host's own setuid tools (su, newuidmap, mount) cannot raise privileges inside."""
    report = sb.probe(
        "run",
        {
            "argvs": {
                "su": ["/bin/su", "-c", "/usr/bin/id -u", "root"],
                "newuidmap": ["/usr/bin/newuidmap", "1", "0", "0", "1"],
                "mount": ["/bin/mount", "-t", "tmpfs", "none", "/tmp"],
            }
        },
    )
    su = report["su"]
    assert not (su.get("rc") == 0 and su.get("stdout", "").strip() == "0"), su
    assert report["newuidmap"].get("rc") != 0, report["newuidmap"]
    assert report["mount"].get("rc") != 0, report["mount"]


@pytest.mark.parametrize("name", DENIED_SYSCALLS)
def test_seccomp_denies(as_user: User, rawsys_bin: Path, name: str) -> None:
    """Each dangerous syscall is refused (EPERM/ENOSYS or SIGSYS) before reaching the kernel."""
    report = _cached(as_user, rawsys_bin, "seccomp")
    assert _is_denied(report[name]), f"{name} reached the kernel: {report[name]}"


def test_seccomp_allows_ordinary_calls(as_user: User, rawsys_bin: Path) -> None:
    """getpid, inet and unix sockets and other ioctls still work (the filter is targeted)."""
    report = _cached(as_user, rawsys_bin, "seccomp")
    for name, want in ALLOWED_SYSCALLS.items():
        got = "ok" if "ok" in report[name] else report[name].get("errno")
        assert got == want, f"{name}: {report[name]}"


def test_clone3_is_enosys(as_user: User, rawsys_bin: Path) -> None:
    """clone3 answers ENOSYS so libc falls back to clone, whose flags the filter can see."""
    report = _cached(as_user, rawsys_bin, "seccomp")
    assert report["clone3"] == {"errno": "ENOSYS"}, report["clone3"]


@pytest.mark.parametrize(
    "flag",
    [
        "CLONE_NEWUSER",
        "CLONE_NEWNS",
        "CLONE_NEWPID",
        "CLONE_NEWNET",
        "CLONE_NEWIPC",
        "CLONE_NEWUTS",
        "CLONE_NEWCGROUP",
    ],
)
def test_clone_with_namespace_flags_is_denied(as_user: User, rawsys_bin: Path, flag: str) -> None:
    """clone() with a namespace flag fails while plain fork works."""
    report = _cached(as_user, rawsys_bin, "clone-ns")
    assert "ret" in report["plain_fork"], f"control: fork failed {report['plain_fork']}"
    assert "ret" not in report[flag], f"clone({flag}) succeeded"


@pytest.mark.parametrize(
    "cmd",
    [
        "TIOCSTI",
        "TIOCSTI_hi1",
        "TIOCSTI_hiall",
        "TIOCLINUX",
        "TIOCLINUX_hi1",
        "TIOCLINUX_hiall",
    ],
)
def test_ioctl_high_bits_trick_is_denied(as_user: User, rawsys_bin: Path, cmd: str) -> None:
    """TIOCSTI/TIOCLINUX are refused even with garbage in the upper 32 bits (masked compare)."""
    report = _cached(as_user, rawsys_bin, "ioctl-hi")
    assert report["TIOCGWINSZ"] == {"errno": "EBADF"}, "control: other ioctls reach the kernel"
    assert _is_denied(report[cmd]), f"ioctl {cmd} reached the kernel: {report[cmd]}"


@pytest.mark.parametrize(
    "call",
    [
        "i386_ptrace_traceme",
        "i386_keyctl",
        "i386_unshare_newuser",
        "i386_socket_netlink",
        "i386_socketcall_netlink",
        "i386_socketcall_packet",
    ],
)
def test_32bit_syscall_entry_is_denied(as_user: User, rawsys_bin: Path, call: str) -> None:
    """int 0x80 cannot smuggle a denied call past an x86_64-only filter."""
    report = _cached(as_user, rawsys_bin, "int80")
    result = report[call]
    assert "ret" not in result, f"{call} succeeded through int 0x80: {result}"
    assert result.get("signal") == signal.SIGSYS or result.get("errno") in DENIED_ERRNOS, result


def test_no_privileged_executable_can_be_planted(sb: Sandbox) -> None:
    """No route leaves a setuid/setgid-root or file-capability executable in the workspace."""
    report = sb.probe("suid", {"dir": "/workspace"})
    planted = sorted(p for p in sb.ws.iterdir() if p.name.startswith("s-"))
    assert planted, f"control: the sandbox could write files: {report}"
    bad = []
    for p in planted:
        st = p.lstat()
        if st.st_uid == 0 and st.st_mode & 0o6000:
            bad.append(f"{p.name}: setuid/setgid root {oct(st.st_mode)}")
        try:
            if os.getxattr(p, "security.capability", follow_symlinks=False):
                bad.append(f"{p.name}: file capabilities")
        except OSError:
            pass
    assert bad == [], f"privileged executables planted on the host: {bad}; probe: {report}"
