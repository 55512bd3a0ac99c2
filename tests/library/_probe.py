"""Run projection scenarios in a mount namespace and print one JSON object for the test.

Started by ``tests/library/test_projection.py`` as root under ``unshare --mount``, or as
root or the unprivileged test user under ``unshare --user --map-root-user --mount`` (the
sandbox's case), or with no namespace for the launcher shape (the probe forks a child that
makes its own). Only stdlib, ``pyseccomp`` and ``glove.library`` are imported: the test
user's interpreter has no ``tests`` package.

Usage: ``_probe.py SCENARIO JSON`` with SCENARIO one of ``project``, ``attacks``,
``race``, ``nested`` (what a process in a nested user namespace can do to a mounted
projection), ``launcher`` (the host opens, and as root freezes; a forked child in a new user
and mount namespace attaches).
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from glove.library import (
    FrozenProjection,
    Library,
    LibraryError,
    OpenedBundle,
    bundle_name,
    freeze,
)
from glove.library import _syscalls as sc
from glove.library._resolve import open_beneath

NEW_MOUNT_API = ("fsopen", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr")
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
_CAPSET = {"x86_64": 126, "aarch64": 91}
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
#: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and NO_CAP_AMBIENT_RAISE, each with its lock bit.
SECUREBITS_LOCKED_DOWN = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_libc = ctypes.CDLL(None, use_errno=True)


def filter_syscalls(names: tuple[str, ...], error: int, tmpfile_only: bool = False) -> None:
    """Make ``names`` fail with ``error`` from now on (a kernel without them, or a runtime's
    seccomp profile); with ``tmpfile_only``, only ``openat`` calls that ask for O_TMPFILE."""
    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in names:
        if tmpfile_only:
            rules.add_rule(
                seccomp.ERRNO(error),
                name,
                seccomp.Arg(2, seccomp.MASKED_EQ, os.O_TMPFILE, os.O_TMPFILE),
            )
        else:
            rules.add_rule(seccomp.ERRNO(error), name)
    rules.load()


def fds() -> dict[int, str]:
    """This process's descriptors and what they point at."""
    found: dict[int, str] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the listing's own descriptor, closed meanwhile
    return found


def mount_lines() -> list[str]:
    """This mount namespace's mountinfo lines."""
    return Path("/proc/self/mountinfo").read_text().splitlines()


def line_for(target: str) -> str:
    """The mountinfo line of the top mount at ``target`` (``""`` when none)."""
    found = ""
    for line in mount_lines():
        if line.split()[4] == target:
            found = line
    return found


def sha256_of(path: str) -> str:
    """SHA-256 hex of the file at ``path``."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def drop_capabilities() -> None:
    """Drop every capability for good, as the sandbox's init does before exec: securebits
    locked (uid 0 regains nothing on exec), the bounding set emptied, no_new_privs, then
    capset to nothing."""
    if _libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_SECUREBITS")
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    number = _CAPSET[platform.machine()]
    if _libc.syscall(number, ctypes.byref(header), ctypes.byref(data)) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def try_errno(call: Any) -> int:
    """Run ``call``; return 0 if it succeeded, else its errno."""
    try:
        call()
    except OSError as exc:
        return exc.errno or -1
    return 0


def attacks_on_mount(target: str) -> dict[str, Any]:
    """Everything an attacker would try against a mounted projection, by errno (0: it
    worked). Run in the namespace (or capability set) being judged."""

    def clear(bits: int) -> None:
        fd = os.open(target, os.O_PATH | os.O_CLOEXEC)
        try:
            sc.mount_clear_attr(fd, bits)
        finally:
            os.close(fd)

    def write() -> None:
        os.close(os.open(target, os.O_WRONLY | os.O_CLOEXEC))

    result = {
        "write": try_errno(write),
        "remount_rw": try_errno(lambda: sc.mount(None, target, None, sc.MS_REMOUNT | sc.MS_BIND)),
        "remount_sb_rw": try_errno(lambda: sc.mount(None, target, None, sc.MS_REMOUNT)),
        "clear_rdonly": try_errno(lambda: clear(sc.MOUNT_ATTR_RDONLY)),
        "clear_noexec": try_errno(lambda: clear(sc.MOUNT_ATTR_NOEXEC)),
        "umount": try_errno(lambda: sc.umount2(target, 0)),
        "umount_detach": try_errno(lambda: sc.umount2(target, sc.MNT_DETACH)),
        "mountinfo": line_for(target),
    }
    for name, argv in (
        ("mount_cmd", ["mount", "-o", "remount,rw", target]),
        ("umount_cmd", ["umount", target]),
    ):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        result[name] = done.returncode
    result["mountinfo_after"] = line_for(target)
    result["still_readable"] = try_errno(lambda: Path(target).read_bytes()) == 0
    return result


def _child_fds_after_exec(ours: dict[int, str]) -> list[str]:
    """What an exec'd child inherits of ``ours`` (close-on-exec must leave nothing)."""
    code = (
        "import os\n"
        "for n in os.listdir('/proc/self/fd'):\n"
        "    try: print(n, os.readlink('/proc/self/fd/' + n))\n"
        "    except OSError: pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, close_fds=False
    )
    inherited = []
    for line in done.stdout.splitlines():
        number, _, link = line.partition(" ")
        if int(number) in ours and ours[int(number)] == link and int(number) > 2:
            inherited.append(line)
    return inherited


def _project_steps(spec: dict[str, Any]) -> dict[str, Any]:
    """Open, freeze and attach; report the descriptors held meanwhile and left after."""
    if spec.get("filter"):
        filter_syscalls(NEW_MOUNT_API, getattr(errno, spec["filter"]))
    before_fds = fds()
    library = Library.open(spec["root"])
    result: dict[str, Any] = {}
    try:
        with library.open_bundle(spec["digest"], spec["size"]) as bundle:
            try:
                frozen = freeze(bundle, fallback_dir=spec.get("fallback_dir"))
            except LibraryError as refused:
                return {"refused": refused.code}
            with frozen:
                if spec.get("park"):
                    frozen.park(spec["park"])
                attached = frozen.attach(spec["target"])
                # Held now: the root, the bundle, the frozen tmpfs. Each must be close-on-exec.
                held = {fd: link for fd, link in fds().items() if fd not in before_fds}
                result["held"] = len(held)
                result["held_cloexec"] = all(not os.get_inheritable(fd) for fd in held)
                result["inherited_by_exec"] = _child_fds_after_exec(held)
        result["attached"] = {
            "target": attached.target,
            "digest": attached.digest,
            "size": attached.size,
            "freeze_method": attached.freeze_method,
            "mount_flags": list(attached.mount_flags),
        }
    finally:
        library.close()
    result["leftover_fds"] = sorted(
        f"{fd} {link}" for fd, link in fds().items() if fd not in before_fds
    )
    return result


def _in_child(steps: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``steps(spec)`` in a forked child of this mount namespace (so a seccomp filter it
    loads binds only it, not the attacker checks that follow) and return its report."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        report: dict[str, Any] = {}
        try:
            os.close(read)
            report = steps(spec)
        except BaseException as exc:
            report = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            os.write(write, json.dumps(report).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        data = handle.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    return result


def project(spec: dict[str, Any]) -> dict[str, Any]:
    """Open, freeze and attach one bundle (in a child when a seccomp filter is asked for);
    report what is mounted, what an attacker can do to it, and every descriptor left."""
    if spec.get("private_root"):
        sc.mount(None, "/", None, MS_REC | sc.MS_PRIVATE)
    before_mounts = len(mount_lines())
    if spec.get("park"):
        os.makedirs(spec["park"], exist_ok=True)
    result = _in_child(_project_steps, spec) if spec.get("filter") else _project_steps(spec)
    result["mounts_added"] = len(mount_lines()) - before_mounts
    if "attached" not in result:
        return result
    result["mountinfo"] = line_for(spec["target"])
    result["sha256"] = sha256_of(spec["target"])
    if spec.get("fallback_dir"):
        result["fallback_dir_left"] = sorted(os.listdir(spec["fallback_dir"]))
    result["write_here"] = try_errno(lambda: os.close(os.open(spec["target"], os.O_WRONLY)))
    if spec.get("nested"):
        result["nested"] = run_nested(spec["target"])
    if spec.get("dropped"):
        result["dropped"] = run_dropped(spec["target"])
    return result


def run_nested(target: str) -> dict[str, Any]:
    """The attacks from a nested user and mount namespace (as its uid 0, all capabilities
    there): the projection's mount was copied into a less privileged namespace, so it is
    locked."""
    done = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            sys.executable,
            __file__,
            "nested",
            json.dumps({"target": target}),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr}
    nested: dict[str, Any] = json.loads(done.stdout)
    return nested


def run_dropped(target: str) -> dict[str, Any]:
    """The attacks from a child of this namespace's uid 0 that dropped every capability:
    the agent of a real sandbox (the init drops all capabilities and forbids new user
    namespaces before exec)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.close(read)
            drop_capabilities()
            payload = json.dumps(attacks_on_mount(target)).encode()
            os.write(write, payload)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        data = handle.read()
    os.waitpid(pid, 0)
    dropped: dict[str, Any] = json.loads(data)
    return dropped


def attacks(spec: dict[str, Any]) -> dict[str, Any]:
    """Each case: the code it is refused with, and that nothing was mounted or left open.

    A case may ask for an action between the open (first ``fstat``) and the freeze:
    ``swap`` renames another file over the bundle's name; ``rewrite`` changes it in place;
    ``bind`` mounts a file over a bundle name first (a mount point in the store).
    """
    if spec.get("filter_openat2"):
        filter_syscalls(("openat2",), errno.ENOSYS)
    results: dict[str, Any] = {}
    library = Library.open(spec["root"])
    try:
        for case in spec["cases"]:
            if case.get("bind"):
                sc.mount(case["bind"], f"{spec['root']}/{case['bind_at']}", None, sc.MS_BIND)
            before_fds = set(fds())
            before_mounts = mount_lines()
            code = "none"
            try:
                with library.open_bundle(case["ref"], case["size"]) as bundle:
                    _between(case, spec["root"], bundle)
                    with freeze(bundle) as frozen:
                        frozen.attach(case["target"])
            except LibraryError as refused:
                code = refused.code
            results[case["label"]] = {
                "code": code,
                "mounts_changed": mount_lines() != before_mounts,
                "target_exists": os.path.lexists(case["target"]),
                "fds_left": sorted(set(fds()) - before_fds),
            }
        if spec.get("beneath"):
            results["beneath"] = {
                name: try_errno(lambda name=name: os.close(open_beneath(library.root_fd, name)))
                for name in spec["beneath"]
            }
    finally:
        library.close()
    return results


def _between(case: dict[str, Any], root: str, bundle: OpenedBundle) -> None:
    """The attacker's move after the first ``fstat``, before the bytes are read."""
    if case.get("swap"):
        os.rename(f"{root}/{case['swap']}", f"{root}/{bundle.name}")
    if case.get("rewrite"):
        fd = os.open(f"{root}/{bundle.name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.pwrite(fd, case["rewrite"].encode(), 0)
        finally:
            os.close(fd)


WRITER = """
import os, sys
path, count = sys.argv[1], int(sys.argv[4])
good, bad = open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
fd = os.open(path, os.O_WRONLY)
sys.stdin.read(1)
for i in range(count):
    os.pwrite(fd, bad if i % 2 == 0 else good, 0)
os.pwrite(fd, good, 0)
print(count, flush=True)
"""


def race(spec: dict[str, Any]) -> dict[str, Any]:
    """A writer rewrites the stored bundle ``rewrites`` times (alternating wrong and right
    bytes of the same size) while freeze + mount cycles run: a mounted copy must always be
    the verified digest, and the first mounted copy must never change."""
    sc.mount(None, "/", None, MS_REC | sc.MS_PRIVATE)
    root, digest, size = spec["root"], spec["digest"], spec["size"]
    good_path = Path(spec["target_dir"]) / "good"
    bad_path = Path(spec["target_dir"]) / "bad"
    good = Path(spec["good_path"]).read_bytes()
    good_path.write_bytes(good)
    bad_path.write_bytes(bytes([good[0] ^ 0xFF]) + good[1:-1] + bytes([good[-1] ^ 0xFF]))
    library = Library.open(root)
    targets = Path(spec["target_dir"])
    expected = digest.split(":", 1)[1]

    def cycle(target: str) -> str:
        try:
            with library.open_bundle(digest, size) as bundle, freeze(bundle) as frozen:
                frozen.attach(target)
        except LibraryError as refused:
            return refused.code
        return "mounted"

    first = str(targets / "first")
    assert cycle(first) == "mounted"
    stats: dict[str, int] = {}
    wrong: list[str] = []
    first_changed = 0
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            f"{root}/{bundle_name(digest)}",
            str(good_path),
            str(bad_path),
            str(spec["rewrites"]),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None
    writer.stdin.write("g")
    writer.stdin.close()
    cycles = 0
    while True:
        running = writer.poll() is None
        target = str(targets / f"t{cycles % 2}")
        outcome = cycle(target)
        stats[outcome] = stats.get(outcome, 0) + 1
        if outcome == "mounted":
            if sha256_of(target) != expected:
                wrong.append(target)
            sc.umount2(target, sc.MNT_DETACH)
        if sha256_of(first) != expected:
            first_changed += 1
        cycles += 1
        if not running:
            break
    assert writer.stdout is not None
    rewrites = int(writer.stdout.read().strip() or 0)
    writer.wait()
    after = cycle(str(targets / "after"))
    library.close()
    return {
        "cycles": cycles,
        "outcomes": stats,
        "wrong_mounts": wrong,
        "first_changed": first_changed,
        "rewrites_done": rewrites,
        "after": after,
        "after_sha256": sha256_of(str(targets / "after")) if after == "mounted" else "",
    }


def _enter_user_namespace() -> None:
    """unshare(NEWUSER|NEWNS) with this uid as root inside, / private (a sandbox's init)."""
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    sc.mount(None, "/", None, MS_REC | sc.MS_PRIVATE)


def launcher(spec: dict[str, Any]) -> dict[str, Any]:
    """The launch shape: the host opens the bundle (and, with ``host_freeze``, freezes it:
    a root launcher); a forked child enters a new user and mount namespace (freezes, if the
    host could not) and attaches."""
    library = Library.open(spec["root"])
    bundle = library.open_bundle(spec["digest"], spec["size"])
    frozen: FrozenProjection | None = freeze(bundle) if spec["host_freeze"] else None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        report: dict[str, Any] = {}
        try:
            os.close(read)
            _enter_user_namespace()
            mine = frozen if frozen is not None else freeze(bundle)
            with mine:
                if spec.get("park"):
                    mine.park(spec["park"])
                attached = mine.attach(spec["target"])
            bundle.close()
            library.close()
            report = {
                "freeze_method": attached.freeze_method,
                "mountinfo": line_for(spec["target"]),
                "park_mountinfo": line_for(spec["park"]) if spec.get("park") else "",
                "sha256": sha256_of(spec["target"]),
                "dropped": run_dropped(spec["target"]),
            }
        except BaseException as exc:
            report = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            os.write(write, json.dumps(report).encode())
            os._exit(0)
    os.close(write)
    if frozen is not None:
        frozen.close()
    bundle.close()
    library.close()
    with os.fdopen(read, "rb") as handle:
        data = handle.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    result["host_mountinfo"] = line_for(spec["target"])
    return result


def targets(spec: dict[str, Any]) -> dict[str, Any]:
    """Attach beneath a new root's descriptor (as ``build_root`` would), and every target
    that must be refused: a symlink on the way, '..' out of the root, a directory, a
    relative path without a root; report each code and whether anything was mounted."""
    sc.mount(None, "/", None, MS_REC | sc.MS_PRIVATE)
    new_root = spec["new_root"]
    root_fd = os.open(new_root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    library = Library.open(spec["root"])
    results: dict[str, Any] = {}
    try:
        with library.open_bundle(spec["digest"], spec["size"]) as bundle, freeze(bundle) as frozen:
            for label, target, beneath in spec["cases"]:
                before = mount_lines()
                try:
                    frozen.attach(target, dir_fd=root_fd if beneath else None)
                    code = "none"
                except LibraryError as refused:
                    code = refused.code
                results[label] = {"code": code, "mounted": mount_lines() != before}
    finally:
        library.close()
        os.close(root_fd)
    results["good_sha256"] = sha256_of(f"{new_root}/etc/skill.md")
    return results


def main() -> None:
    """Run the scenario named on the command line; print its JSON result."""
    scenario, spec = sys.argv[1], json.loads(sys.argv[2])
    handlers = {
        "project": project,
        "attacks": attacks,
        "race": race,
        "nested": attacks_on_mount_spec,
        "launcher": launcher,
        "targets": targets,
    }
    print(json.dumps(handlers[scenario](spec)))


def attacks_on_mount_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """``nested``: the attacks against ``spec["target"]`` from here."""
    return attacks_on_mount(spec["target"])


if __name__ == "__main__":
    main()
