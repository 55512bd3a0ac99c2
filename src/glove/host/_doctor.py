"""``glove doctor``: what this machine offers the sandbox, in words an operator can act on.

Each check probes the real kernel (a forked child tries the operation) rather than trusting
version numbers, and says what to do when the answer is no. Required checks gate the exit
status; the others report a weaker mechanism the sandbox will fall back to, or a risk it
mitigates.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import platform
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

import msgspec

Status = Literal["ok", "warn", "fail"]

CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWNS: Final = 0x00020000
SYS_PIDFD_OPEN: Final = 434
SYS_CLONE3: Final = 435
SYS_LANDLOCK_CREATE_RULESET: Final = 444
LANDLOCK_CREATE_RULESET_VERSION: Final = 1
PR_GET_SECCOMP: Final = 21
CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
V2_CONTROLLERS_WANTED: Final = ("cpu", "memory", "pids")


class Check(msgspec.Struct, frozen=True):
    """One doctor finding."""

    name: str
    status: Status
    required: bool
    summary: str
    detail: str = ""
    fix: str = ""


class Report(msgspec.Struct, frozen=True):
    """Everything doctor found; ``ok`` is true when every required check passed."""

    ok: bool
    kernel: str
    uid: int
    checks: list[Check]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _in_child(probe: Callable[[], int]) -> int:
    """Run ``probe`` in a forked child and return its result (0 success, else an errno).

    The probe may change the child's namespaces; the doctor's own process is untouched.
    """
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 255
        try:
            code = probe()
        finally:
            os._exit(code & 0xFF)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _unshare(flags: int) -> int:
    libc = _libc()
    if libc.unshare(flags) != 0:
        return ctypes.get_errno()
    return 0


def _probe_userns_mount() -> int:
    err = _unshare(CLONE_NEWUSER | CLONE_NEWNS)
    if err:
        return err
    libc = _libc()
    if libc.mount(b"none", b"/", None, 0x40000 | 0x4000, None) != 0:  # MS_PRIVATE|MS_REC
        return ctypes.get_errno()
    if libc.mount(b"glove-probe", b"/tmp", b"tmpfs", 0, b"size=64k") != 0:
        return ctypes.get_errno()
    return 0


def check_user_namespaces() -> Check:
    """Can this user create a user namespace (and mount a tmpfs inside one)?"""
    blockers: list[str] = []
    max_ns = _read("/proc/sys/user/max_user_namespaces")
    if max_ns == "0":
        blockers.append("sysctl user.max_user_namespaces = 0")
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        blockers.append("sysctl kernel.unprivileged_userns_clone = 0 (Debian/Ubuntu switch)")
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        blockers.append(
            "AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns = 1)"
        )
    err = _in_child(_probe_userns_mount)
    if err == 0:
        return Check(
            "user_namespaces",
            "ok",
            required=True,
            summary="user namespaces available; tmpfs mounts work inside one",
            detail=f"user.max_user_namespaces = {max_ns}",
        )
    return Check(
        "user_namespaces",
        "fail",
        required=True,
        summary=f"cannot create a user+mount namespace: {os.strerror(err)}",
        detail="; ".join(blockers) or "no known sysctl explains it (seccomp or LSM policy?)",
        fix="set user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1, and on "
        "Ubuntu kernel.apparmor_restrict_unprivileged_userns = 0 (or an AppArmor profile "
        "granting userns to glove)",
    )


def check_seccomp() -> Check:
    """Kernel seccomp filter mode, the system libseccomp and its Python binding."""
    status = _read("/proc/self/status") or ""
    kernel_ok = any(line.startswith("Seccomp:") for line in status.splitlines())
    try:
        _libc_mode = _libc().prctl(PR_GET_SECCOMP, 0, 0, 0, 0)
    except OSError:  # pragma: no cover - prctl always exists on Linux
        _libc_mode = -1
    lib = ctypes.util.find_library("seccomp")
    version = ""
    if lib:
        seccomp = ctypes.CDLL(lib)
        seccomp.seccomp_version.restype = ctypes.POINTER(ctypes.c_uint * 3)
        v = seccomp.seccomp_version().contents
        version = f"{v[0]}.{v[1]}.{v[2]}"
    try:
        import pyseccomp  # noqa: F401 - presence check only
    except (ImportError, OSError) as exc:
        binding = f"missing ({exc})"
    else:
        binding = "importable"
    if kernel_ok and lib and binding == "importable":
        return Check(
            "seccomp",
            "ok",
            required=True,
            summary=f"seccomp filters supported; libseccomp {version}; pyseccomp {binding}",
        )
    return Check(
        "seccomp",
        "fail",
        required=True,
        summary="seccomp filtering is not usable",
        detail=f"kernel seccomp: {kernel_ok}; libseccomp: {lib or 'not found'} {version}; "
        f"pyseccomp: {binding}",
        fix="install libseccomp2 (apt-get install libseccomp2) and the pyseccomp package; "
        "use a kernel built with CONFIG_SECCOMP_FILTER",
    )


def check_landlock() -> Check:
    """The Landlock ABI version, if the kernel has Landlock enabled."""
    libc = _libc()
    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    if abi > 0:
        return Check("landlock", "ok", required=False, summary=f"Landlock ABI {abi}")
    err = ctypes.get_errno()
    lsm = _read("/sys/kernel/security/lsm") or "unknown"
    return Check(
        "landlock",
        "warn",
        required=False,
        summary=f"Landlock unavailable: {os.strerror(err)}",
        detail=f"active LSMs: {lsm}. Glove's perimeter rests on mount namespaces and does not "
        "need Landlock; it would be a second layer.",
        fix="boot with lsm=...,landlock to add it",
    )


def check_unix_socket_gate() -> Check:
    """What keeps a sandbox from a host Unix socket in a directory it sees (decision 0034)."""
    from glove.container import LANDLOCK_RESOLVE_UNIX_ABI, probe_unix_gate

    support = probe_unix_gate()
    abi = support.landlock_abi
    if abi >= LANDLOCK_RESOLVE_UNIX_ABI:
        landlock = (
            f"Landlock ABI {abi} has LANDLOCK_ACCESS_FS_RESOLVE_UNIX; Glove does not use it "
            "yet (the gate below is what applies)"
        )
    else:
        landlock = (
            f"Landlock ABI {abi or 'none'}: no right for connecting to a pathname socket "
            f"(LANDLOCK_ACCESS_FS_RESOLVE_UNIX needs ABI {LANDLOCK_RESOLVE_UNIX_ABI}, Linux 7.1)"
        )
    fifo = (
        "No kernel mechanism covers a FIFO: gloved refuses an exposure holding one, at "
        "glove init and at every launch; a FIFO a host process makes later stays reachable."
    )
    if support.mechanism is not None:
        return Check(
            "unix_socket_gate",
            "ok",
            required=False,
            summary=f"connect() gated ({support.mechanism}): a sandbox reaches only sockets "
            "on its own /tmp and /dev/shm, abstract names and socket pairs",
            detail=f"{support.reason}. Datagram Unix sockets are refused. {landlock}. {fifo}",
        )
    return Check(
        "unix_socket_gate",
        "warn",
        required=False,
        summary="no Unix socket gate: a host socket inside a bind would be reachable",
        detail=f"{support.reason}. gloved refuses an exposure holding a socket or a FIFO, at "
        f"glove init and at every launch; glove exec --bind does not check. {landlock}.",
        fix="a kernel with seccomp user notification (5.0) and pidfd_getfd (5.6), and "
        "process_vm_readv allowed to the launcher",
    )


def _own_cgroup_v2_path() -> str | None:
    text = _read("/proc/self/cgroup") or ""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def check_cgroups() -> Check:
    """cgroup v2 vs v1, and which controllers this user may use for limits."""
    uid = os.getuid()
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        v2_root, layout = CGROUP_ROOT, "cgroup v2 (unified)"
    elif (CGROUP_ROOT / "unified" / "cgroup.controllers").exists():
        v2_root, layout = CGROUP_ROOT / "unified", "hybrid: cgroup v1 with a v2 tree at unified/"
    else:
        v2_root, layout = None, "cgroup v1 only"
    delegated: list[str] = []
    v2_detail = "no v2 hierarchy"
    if v2_root is not None:
        own = _own_cgroup_v2_path() or "/"
        cg = v2_root / own.lstrip("/")
        available = (_read(str(cg / "cgroup.controllers")) or "").split()
        writable = cg.is_dir() and cg.stat().st_uid == uid and os.access(cg, os.W_OK)
        delegated = [c for c in available if c in V2_CONTROLLERS_WANTED] if writable else []
        v2_detail = (
            f"own v2 cgroup {own}: controllers available [{' '.join(available) or 'none'}], "
            f"{'owned and writable' if writable else 'not delegated to uid ' + str(uid)}"
        )
    v1_writable = [
        c
        for c in ("memory", "pids", "cpu")
        if (CGROUP_ROOT / c).is_dir() and not (CGROUP_ROOT / c / "cgroup.controllers").exists()
        if os.access(CGROUP_ROOT / c, os.W_OK)
    ]
    detail = f"{layout}; {v2_detail}; v1 controllers writable: {' '.join(v1_writable) or 'none'}"
    if all(c in delegated for c in V2_CONTROLLERS_WANTED):
        return Check("cgroups", "ok", False, "cgroup v2 cpu, memory, pids delegated", detail=detail)
    if v1_writable:
        return Check(
            "cgroups",
            "warn",
            required=False,
            summary=f"cgroup v2 controllers not delegated; cgroup v1 writable "
            f"({' '.join(v1_writable)}) and used for limits",
            detail=detail,
            fix="for v2: run under systemd with Delegate=cpu memory pids, "
            "or `systemd-run --user -p Delegate=yes`",
        )
    return Check(
        "cgroups",
        "warn",
        required=False,
        summary="no cgroup controllers usable: memory, CPU and PID limits fall back to rlimits",
        detail=detail,
        fix="delegate cpu, memory and pids to this user (systemd Delegate=yes); until then "
        "pass --accept-weaker to use rlimits",
    )


def check_tiocsti() -> Check:
    """Whether the kernel still allows TIOCSTI terminal injection."""
    value = _read("/proc/sys/dev/tty/legacy_tiocsti")
    if value == "0":
        return Check("legacy_tiocsti", "ok", False, "legacy TIOCSTI disabled by the kernel")
    return Check(
        "legacy_tiocsti",
        "warn",
        required=False,
        summary="legacy TIOCSTI enabled: a process on a terminal can inject keystrokes"
        if value == "1"
        else "kernel predates dev.tty.legacy_tiocsti: TIOCSTI injection possible",
        detail="glove denies TIOCSTI and TIOCLINUX with seccomp and gives each sandbox its own "
        "session and pty, so contained processes cannot use it; other processes can",
        fix="sysctl -w dev.tty.legacy_tiocsti=0 (and persist it in /etc/sysctl.d/)",
    )


def check_fuse() -> Check:
    """Whether /dev/fuse exists (for future FUSE-backed projections)."""
    try:
        st = Path("/dev/fuse").stat()
    except OSError as exc:
        return Check(
            "fuse",
            "warn",
            False,
            f"/dev/fuse unavailable: {exc.strerror}",
            detail="not needed by the current sandbox",
            fix="modprobe fuse",
        )
    if not stat.S_ISCHR(st.st_mode):
        return Check("fuse", "warn", False, "/dev/fuse is not a character device")
    return Check("fuse", "ok", False, "/dev/fuse present")


def check_pidfd_clone3() -> Check:
    """pidfd_open and clone3, used to launch and reap sandboxes without pid races."""
    libc = _libc()
    fd = libc.syscall(SYS_PIDFD_OPEN, os.getpid(), 0)
    pidfd_ok = fd >= 0
    if pidfd_ok:
        os.close(fd)
    # clone3 with a zero size is always EINVAL where the syscall exists, ENOSYS where not.
    libc.syscall(SYS_CLONE3, None, 0)
    clone3_ok = ctypes.get_errno() == errno.EINVAL
    if pidfd_ok and clone3_ok:
        return Check("pidfd_clone3", "ok", False, "pidfd_open and clone3 available")
    return Check(
        "pidfd_clone3",
        "warn",
        required=False,
        summary=f"pidfd_open {'ok' if pidfd_ok else 'missing'}, "
        f"clone3 {'ok' if clone3_ok else 'missing'}",
        detail="glove falls back to fork + unshare + fork and pid-based waiting",
        fix="a kernel >= 5.3 provides both",
    )


def check_limits() -> Check:
    """Which mechanism enforces each of the six limits and the CPU rate (``cpus``) here, why
    not a better one, or why the limit is refused; and what a cgroup v2 group gives every
    sandbox."""
    from glove.container import explain_limit, limit_support, probe_host_limits

    host = probe_host_limits()
    support = limit_support(host)
    parts = [f"{name}: {explain_limit(name, host)}" for name in support]  # type: ignore[arg-type]
    weaker = [name for name, s in support.items() if not s.full and name != "cpus"]
    no_rate = "cpus" in support and support["cpus"].mechanism is None
    if host.cgroup_v2_group:
        parts.append(
            "teardown: a sandbox with a cgroup limit (the default profile has several) is "
            "also in its own cgroup v2 group, ended with cgroup.kill"
        )
    else:
        parts.append(
            "teardown: pid-namespace kill only (no cgroup v2 group: "
            + host.unavailable.get("cgroup-v2", "no v2 site")
            + ")"
        )
    if not weaker and not no_rate:
        return Check(
            "limits",
            "ok",
            False,
            "all six limits and the CPU rate (cpus) enforceable",
            detail="; ".join(parts),
        )
    summary = []
    if weaker:
        summary.append(f"{', '.join(weaker)}: only a weaker per-process mechanism, or none")
    if no_rate:
        summary.append("cpus: no CPU-rate mechanism (--cpus is refused)")
    return Check(
        "limits",
        "warn",
        required=False,
        summary="; ".join(summary),
        detail="; ".join(parts),
        fix="delegate cgroup controllers to this user (see the cgroups check; cpu for "
        "--cpus), or pass --accept-weaker LIMIT to accept the per-process mechanism",
    )


def check_sandbox_self_test() -> Check:
    """Launch /bin/true in a default-profile sandbox: the whole perimeter, end to end."""
    from glove.container import self_test

    worked, detail = self_test()
    if worked:
        return Check("sandbox_self_test", "ok", True, detail)
    return Check(
        "sandbox_self_test",
        "fail",
        required=True,
        summary="a default-profile sandbox could not run /bin/true",
        detail=detail,
        fix="see the failed checks above; the detail names the step that failed",
    )


def check_macos_seatbelt() -> Check:
    """The macOS backend: a working sandbox-exec on macOS; elsewhere, what it is for."""
    import subprocess

    from glove.container.macos import SANDBOX_EXEC, on_macos

    if not on_macos():
        return Check(
            "macos_seatbelt",
            "ok",
            required=False,
            summary=f"not used on {platform.system()}: the Seatbelt backend is macOS-only",
            detail="its deny-default SBPL profile renders anywhere for review (render_sbpl); "
            "applying it here is refused with UnsupportedPlatform",
        )
    try:
        probe = subprocess.run(
            [SANDBOX_EXEC, "-p", "(version 1)(allow default)", "/usr/bin/true"],
            check=False,
            capture_output=True,
            timeout=30,
        )
        worked, why = probe.returncode == 0, probe.stderr.decode(errors="replace").strip()
    except OSError as exc:
        worked, why = False, str(exc)
    if worked:
        return Check("macos_seatbelt", "ok", True, f"{SANDBOX_EXEC} applies a profile")
    return Check(
        "macos_seatbelt",
        "fail",
        required=True,
        summary=f"{SANDBOX_EXEC} cannot apply a profile",
        detail=why,
        fix="Seatbelt ships with macOS; check that /usr/bin/sandbox-exec exists and runs",
    )


def check_evaluator_scanner() -> Check:
    """Which scanner evaluates PTY output (refinement-eval-v1): the C one, or pure Python?"""
    from glove.evaluate import NATIVE_SCANNER, NORMALIZER_VERSION

    if NATIVE_SCANNER:
        return Check(
            "evaluator_scanner",
            "ok",
            required=False,
            summary="the C scanner (glove.evaluate._cscan) evaluates PTY output",
            detail=f"{NORMALIZER_VERSION} text, strict UTF-8 and Aho-Corasick in one pass",
        )
    return Check(
        "evaluator_scanner",
        "warn",
        required=False,
        summary="the pure-Python scanner evaluates PTY output: the same evidence, slower",
        detail="glove.evaluate._cscan was not built when glove was installed (no C compiler "
        "or Python headers), or is of another version; the pure scanner runs at some "
        "5-50 MiB/s and back-pressures the agent's output to that (docs/evaluation.md)",
        fix="install a C compiler and the Python headers (Debian: gcc python3-dev), then "
        "reinstall glove from its source (pip install --force-reinstall --no-deps .)",
    )


#: Where perf keeps its build-id cache: it hard-links every binary it profiled into it.
PERF_BUILDID_CACHES: Final = ("~/.debug",)


def _interpreters() -> list[Path]:
    """The Python interpreters glove's mediator and its upstreams may run on."""
    found: list[Path] = []
    for candidate in (sys.executable, "/usr/bin/python3"):
        if candidate and Path(candidate).exists():
            real = Path(candidate).resolve()
            if real not in found:
                found.append(real)
    return found


def _links_in(cache: Path, identity: tuple[int, int], limit: int = 100_000) -> list[Path]:
    """The names under ``cache`` of the file ``identity`` (device, inode); bounded walk."""
    names: list[Path] = []
    seen = 0
    for root, _dirs, files in os.walk(cache):
        for name in files:
            seen += 1
            if seen > limit:
                return names
            path = Path(root, name)
            with contextlib.suppress(OSError):
                st = path.lstat()
                if (st.st_dev, st.st_ino) == identity:
                    names.append(path)
    return names


def check_interpreter_links(
    interpreters: list[Path] | None = None, caches: tuple[str, ...] = PERF_BUILDID_CACHES
) -> Check:
    """Does an interpreter have extra hard links (``glove run`` then refuses its upstreams)?

    The mediator protects the files it runs from the sandbox; a protected file with a second
    name on a filesystem the sandbox sees cannot be hidden, so ``glove run`` refuses it. The
    usual cause is perf's build-id cache, which hard-links every binary it profiled.
    """
    linked: list[str] = []
    causes: list[str] = []
    for path in interpreters if interpreters is not None else _interpreters():
        try:
            st = path.stat()
        except OSError:
            continue
        if st.st_nlink < 2:
            continue
        linked.append(f"{path} has {st.st_nlink} hard links")
        for cache in caches:
            root = Path(cache).expanduser()
            causes += [str(name) for name in _links_in(root, (st.st_dev, st.st_ino))]
    if not linked:
        return Check(
            "interpreter_links",
            "ok",
            required=False,
            summary="the Python interpreters have one name each",
        )
    detail = "; ".join(linked) + (
        "; the other names are in perf's build-id cache: " + ", ".join(causes) if causes else ""
    )
    fix = (
        "remove perf's build-id cache (rm -r ~/.debug, or perf buildid-cache --purge-all)"
        if causes
        else "find the other names (find / -xdev -samefile PATH) and remove them"
    )
    return Check(
        "interpreter_links",
        "warn",
        required=False,
        summary="an interpreter has extra hard links: glove run refuses upstreams it runs "
        "when a bind shares its filesystem",
        detail=detail,
        fix=fix,
    )


def check_runtime_dir() -> Check:
    """Which runtime directory holds gloved.sock, and why? (``_doctor_service``)"""
    from glove.host._doctor_service import check_runtime_dir as check

    return check()


def check_lingering() -> Check:
    """Does this user's service manager outlive their logins? (``_doctor_service``)"""
    from glove.host._doctor_service import check_lingering as check

    return check()


def check_delegation() -> Check:
    """Which cgroup controllers reach gloved? (``_doctor_service``)"""
    from glove.host._doctor_service import check_delegation as check

    return check()


def check_daemon_unit() -> Check:
    """Is gloved installed as this user's service, and running? (``_doctor_service``)"""
    from glove.host._doctor_service import check_daemon_unit as check

    return check()


CHECKS: Final[tuple[Callable[[], Check], ...]] = (
    check_user_namespaces,
    check_seccomp,
    check_landlock,
    check_unix_socket_gate,
    check_cgroups,
    check_tiocsti,
    check_fuse,
    check_pidfd_clone3,
    check_limits,
    check_sandbox_self_test,
    check_macos_seatbelt,
    check_evaluator_scanner,
    check_interpreter_links,
    check_runtime_dir,
    check_lingering,
    check_delegation,
    check_daemon_unit,
)


def run_checks() -> Report:
    """Run every check and return the report."""
    checks = [check() for check in CHECKS]
    ok = all(c.status != "fail" for c in checks if c.required)
    return Report(ok=ok, kernel=platform.release(), uid=os.getuid(), checks=checks)
