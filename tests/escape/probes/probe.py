"""Attacks run INSIDE the sandbox by the escape suite, one related group per subcommand.

Usage: ``python3 -I -S probe.py SUBCOMMAND [JSON-ARGUMENT]``. The probe uses the standard
library only (it runs on the system interpreter that the sandbox binds read-only), makes
each attempt for real, and prints one line ``GLOVE-PROBE:{json}`` describing what happened.
The host-side tests decide what counts as an escape; the probe never decides.

Results of a single attempt are ``{"ok": value}`` or ``{"errno": "ENAME"}``; attempts that
may kill the process (seccomp) run in a forked child and may report ``{"signal": N}``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

MARK = "GLOVE-PROBE:"
MIB = 1024 * 1024

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def emit(obj: object) -> None:
    """Print the probe's single result line and flush it."""
    sys.stdout.write(MARK + json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def err_name(exc: OSError) -> str:
    """Return the symbolic errno of an OSError."""
    return errno.errorcode.get(exc.errno or 0, f"E{exc.errno}")


def attempt(fn: Callable[[], object]) -> dict[str, Any]:
    """Run one attempt and describe its outcome."""
    try:
        value = fn()
    except OSError as exc:
        return {"errno": err_name(exc)}
    except Exception as exc:  # a probe reports, never crashes
        return {"exc": f"{type(exc).__name__}: {exc}"}
    if isinstance(value, bytes):
        value = value[:64].decode("latin-1")
    return {"ok": value}


def raw(nr: int, *args: int | bytes | None) -> int:
    """Call syscall ``nr`` with integer or pointer arguments; raise OSError on failure."""
    conv: list[object] = []
    for a in args:
        if a is None or isinstance(a, bytes):
            conv.append(ctypes.c_char_p(a))
        else:
            conv.append(ctypes.c_long(a))
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return int(r)


def in_child(fn: Callable[[], object]) -> dict[str, Any]:
    """Run ``fn`` in a forked child so a seccomp kill (SIGSYS) is seen, not suffered."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = attempt(fn)
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return json.loads(data) if data else {"lost": True}


def write_file(path: str, data: bytes) -> int:
    """Open ``path`` for writing (no create) and write ``data``."""
    fd = os.open(path, os.O_WRONLY)
    try:
        return os.write(fd, data)
    finally:
        os.close(fd)


def create_file(path: str) -> str:
    """Create and remove a file at ``path``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    os.unlink(path)
    return "created"


def read_file(path: str, n: int = 64) -> bytes:
    """Read up to ``n`` bytes of ``path``."""
    with open(path, "rb") as f:
        return f.read(n)


def proc_status() -> dict[str, str]:
    """Parse /proc/self/status into a dict."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def mountinfo() -> list[dict[str, Any]]:
    """Parse /proc/self/mountinfo: mount point, per-mount options, fs type, super options."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            rfields = right.split()
            mounts.append(
                {
                    "mountpoint": fields[4].replace("\\040", " "),
                    "root": fields[3],
                    "opts": fields[5].split(","),
                    "fstype": rfields[0],
                    "source": rfields[1] if len(rfields) > 1 else "",
                    "super": rfields[2].split(",") if len(rfields) > 2 else [],
                }
            )
    return mounts


# -- subcommands ---------------------------------------------------------------------------


def cmd_pids(arg: dict[str, Any]) -> object:
    """Which processes are visible, and whether any host process carrying a marker is."""
    marker = "".join(arg.get("marker_parts", []))  # split so our own argv does not match
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    seen_marker = []
    for p in pids:
        try:
            cmdline = read_file(f"/proc/{p}/cmdline", 4096)
        except OSError:
            continue
        if marker and marker.encode() in cmdline:
            seen_marker.append(p)
    return {
        "pids": pids,
        "self": os.getpid(),
        "ppid": os.getppid(),
        "marker_pids": seen_marker,
        "kill_host_pid": attempt(lambda: os.kill(int(arg["host_pid"]), 0))
        if "host_pid" in arg
        else None,
        "pid1_cmdline": attempt(lambda: read_file("/proc/1/cmdline", 256)),
    }


def cmd_ns(arg: dict[str, Any]) -> object:
    """The namespace identities of this process."""
    out = {}
    for name in ("user", "pid", "mnt", "net", "ipc", "uts", "cgroup"):
        out[name] = attempt(lambda name=name: os.readlink(f"/proc/self/ns/{name}"))
    return out


def cmd_hostname(arg: dict[str, Any]) -> object:
    """Hostname inside, and an attempt to change it."""
    new = b"glove-escape-pwned"

    def sethostname() -> int:
        r = libc.sethostname(ctypes.c_char_p(new), ctypes.c_size_t(len(new)))
        if r != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return r

    return {
        "hostname": socket.gethostname(),
        "sethostname": attempt(sethostname),
        "after": socket.gethostname(),
    }


def cmd_ipc(arg: dict[str, Any]) -> object:
    """Look for the host's SysV and POSIX IPC objects by key and name."""
    ipc_key = int(arg["key"])

    def sysv(nr: int, *rest: int) -> Callable[[], int]:
        return lambda: raw(nr, ipc_key, *rest)

    rt = ctypes.CDLL("librt.so.1", use_errno=True)

    def mq_open() -> int:
        fd = rt.mq_open(ctypes.c_char_p(arg["mq"].encode()), os.O_RDONLY)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return int(fd)

    sysv_ipc = {}
    for name in ("msg", "sem", "shm"):
        try:
            with open(f"/proc/sysvipc/{name}") as f:
                sysv_ipc[name] = len(f.readlines()) - 1
        except OSError as exc:
            sysv_ipc[name] = err_name(exc)
    return {
        "shmget": attempt(sysv(29, 0, 0)),  # shmget(key, 0, 0)
        "msgget": attempt(sysv(68, 0)),  # msgget(key, 0)
        "semget": attempt(sysv(64, 0, 0)),  # semget(key, 0, 0)
        "posix_shm": attempt(lambda: read_file("/dev/shm/" + arg["shm"])),
        "mq_open": attempt(mq_open),
        "sysvipc_counts": sysv_ipc,
    }


def _sleeper(marker: str, mode: str) -> None:
    """Become a long sleeper whose argv carries ``marker`` (after double-fork/setsid)."""
    if mode == "stopped":
        os.kill(os.getpid(), signal.SIGSTOP)
    os.execv("/bin/sleep", [f"{marker}-{mode}", "1000"])


def cmd_spawn(arg: dict[str, Any]) -> object:
    """Leave behind setsid'd, double-forked and stopped descendants, then wait or exit."""
    marker = arg["marker"]
    for mode in ("setsid", "daemon", "stopped", "plain"):
        pid = os.fork()
        if pid == 0:
            if mode in ("setsid", "daemon"):
                os.setsid()
            if mode == "daemon" and os.fork() != 0:
                os._exit(0)  # the grandchild is orphaned and reparented
            for fd in (0, 1, 2):  # never hold the output pipe open
                os.dup2(os.open("/dev/null", os.O_RDWR), fd)
            _sleeper(marker, mode)
        if mode == "daemon":
            os.waitpid(pid, 0)
    if "ready" in arg:
        with open(arg["ready"], "w") as f:
            f.write(str(os.getpid()))
    if arg.get("then") == "sleep":
        time.sleep(float(arg.get("sleep", 1000)))
    return {"spawned": 4}


def cmd_userns(arg: dict[str, Any]) -> object:
    """Try to make a nested user namespace three ways."""
    clone_newuser = 0x10000000
    import subprocess

    def unshare_cmd() -> int:
        p = subprocess.run(
            ["/usr/bin/unshare", "-U", "/bin/true"],
            capture_output=True,
            check=False,
            timeout=10,
        )
        return p.returncode

    return {
        "unshare_newuser": in_child(lambda: raw(272, clone_newuser)),
        "unshare_cmd_rc": attempt(unshare_cmd),
        "max_user_namespaces": attempt(
            lambda: read_file("/proc/sys/user/max_user_namespaces").decode().strip()
        ),
        "raise_max_user_namespaces": attempt(
            lambda: write_file("/proc/sys/user/max_user_namespaces", b"1000\n")
        ),
    }


def cmd_read(arg: dict[str, Any]) -> object:
    """Read each path (file contents or directory listing)."""
    out = {}
    for path in arg["paths"]:

        def read_any(path: str = path) -> object:
            if os.path.isdir(path):
                return sorted(os.listdir(path))[:50]
            return read_file(path)

        out[path] = attempt(read_any)
    return out


def cmd_write(arg: dict[str, Any]) -> object:
    """Try to create a file in each listed directory and in every mount point."""
    out: dict[str, Any] = {"paths": {}, "mounts": {}}
    for path in arg.get("paths", []):
        out["paths"][path] = attempt(lambda path=path: create_file(path))
    if arg.get("all_mounts"):
        for m in mountinfo():
            mp = m["mountpoint"]
            if not os.path.isdir(mp):
                continue
            target = os.path.join(mp, f".glove-escape-{os.getpid()}")
            out["mounts"][mp] = attempt(lambda target=target: create_file(target))
    return out


def cmd_mountinfo(arg: dict[str, Any]) -> object:
    """The mount table as the sandbox sees it."""
    return {"mounts": mountinfo()}


def _fill_one(path: str, limit: int) -> dict[str, Any]:
    """Write to ``path`` until the filesystem refuses or ``limit`` bytes are written."""
    chunk = b"\xa5" * MIB
    written = 0
    error = None
    try:
        st = os.statvfs(os.path.dirname(path))
    except OSError as exc:
        return {"errno": err_name(exc), "written": 0}
    try:
        with open(path, "wb", buffering=0) as f:
            while written < limit:
                written += f.write(chunk)
    except OSError as exc:
        error = err_name(exc)
    return {"written": written, "errno": error, "fs_bytes": st.f_blocks * st.f_frsize}


def cmd_fill(arg: dict[str, Any]) -> object:
    """Fill each listed file in turn, keeping them all until the end (totals add up)."""
    out = {path: _fill_one(path, int(arg["max"])) for path in arg["paths"]}
    for path in arg["paths"]:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return out


def cmd_inodes(arg: dict[str, Any]) -> object:
    """Create empty files in ``dir`` until refused or ``max`` exist (costs no bytes)."""
    d = arg["dir"]
    limit = int(arg["max"])
    made = 0
    error = None
    try:
        for made in range(limit):
            os.close(os.open(f"{d}/i{made}", os.O_WRONLY | os.O_CREAT, 0o600))
        made = limit
    except OSError as exc:
        error = err_name(exc)
    return {"made": made, "errno": error}


def cmd_links(arg: dict[str, Any]) -> object:
    """Follow planted symlinks, plant new ones, and hardlink files from outside."""
    out: dict[str, Any] = {"follow": {}, "plant": {}, "hardlink": {}}
    for link in arg.get("follow", []):
        out["follow"][link] = attempt(lambda link=link: read_file(link))
    for target in arg.get("plant", []):
        name = os.path.join(arg["dir"], "planted-" + target.strip("/").replace("/", "_"))

        def plant(target: str = target, name: str = name) -> bytes:
            os.symlink(target, name)
            return read_file(name)

        out["plant"][target] = attempt(plant)
    for src in arg.get("hardlink", []):
        dst = os.path.join(arg["dir"], "hard-" + src.strip("/").replace("/", "_"))
        out["hardlink"][src] = attempt(lambda src=src, dst=dst: os.link(src, dst) or "linked")
    return out


def cmd_dev(arg: dict[str, Any]) -> object:
    """List /dev, try mknod in every writable place, and use the harmless devices."""
    out: dict[str, Any] = {"dev": attempt(lambda: sorted(os.listdir("/dev")))}
    mk = {}
    for d in arg.get("dirs", ["/tmp", "/dev", "/dev/shm"]):
        for kind, mode, dev in (
            ("char_mem", 0o20600, os.makedev(1, 1)),
            ("char_null", 0o20666, os.makedev(1, 3)),
            ("block_sda", 0o60600, os.makedev(8, 0)),
        ):
            path = os.path.join(d, f"glove-{kind}")

            def do(path: str = path, mode: int = mode, dev: int = dev) -> str:
                os.mknod(path, mode, dev)
                os.unlink(path)
                return "created"

            mk[path] = attempt(do)
    out["mknod"] = mk
    out["mkfifo_tmp"] = attempt(lambda: os.mkfifo("/tmp/glove-fifo") or "created")
    out["dev_null_write"] = attempt(lambda: write_file("/dev/null", b"x"))
    out["dev_urandom_read"] = attempt(lambda: len(read_file("/dev/urandom", 16)))
    out["dev_zero_read"] = attempt(lambda: read_file("/dev/zero", 4) == b"\0\0\0\0")
    return out


def _same_value_write(path: str) -> str:
    """Write a file's current content back to it; only open it when it is write-only."""
    try:
        current = read_file(path, 4096)
    except OSError:
        current = None
    fd = os.open(path, os.O_WRONLY)
    try:
        if current is None:
            return "opened-for-write"
        os.write(fd, current)
        return "wrote"
    finally:
        os.close(fd)


def cmd_proc_writable(arg: dict[str, Any]) -> object:
    """Every non-process file under /proc that opens for writing (nothing is written)."""
    found = []
    skip = {"self", "thread-self"}
    for root, dirs, files in os.walk("/proc"):
        depth = root.count("/")
        dirs[:] = [
            d for d in dirs if depth < 5 and not (root == "/proc" and (d.isdigit() or d in skip))
        ]
        for name in files:
            path = os.path.join(root, name)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
            except OSError:
                continue
            st = os.fstat(fd)
            os.close(fd)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3):
                continue  # masked by a /dev/null bind: writes go nowhere
            found.append(path)
    return {"writable": sorted(found)}


def _suid_attempts(d: str) -> dict[str, Any]:
    """Try every way to leave a setuid/setgid or file-capability executable in ``d``."""
    src = "/bin/true"

    def copy(name: str) -> str:
        path = f"{d}/{name}"
        with open(src, "rb") as f, open(path, "wb") as g:
            g.write(f.read())
        return path

    def via_open() -> int:
        fd = os.open(f"{d}/s-open", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o4755)
        os.close(fd)
        return 0

    def via_fchmodat2() -> int:
        path = copy("s-fchmodat2")
        return raw(452, -100, path.encode(), 0o4755, 0)

    def via_fchmod() -> None:
        fd = os.open(copy("s-fchmod"), os.O_RDONLY)
        try:
            os.fchmod(fd, 0o4755)
        finally:
            os.close(fd)

    # VFS_CAP_REVISION_2 with CAP_SETUID|CAP_SYS_ADMIN permitted and effective.
    fcap = struct.pack("<IIIII", 0x02000001, (1 << 7) | (1 << 21), 0, 0, 0)
    return {
        "chmod": attempt(lambda: os.chmod(copy("s-chmod"), 0o4755)),
        "chmod_setgid": attempt(lambda: os.chmod(copy("s-chmod-g"), 0o2755)),
        "fchmod": attempt(via_fchmod),
        "open_creat": attempt(via_open),
        "mknod": attempt(lambda: os.mknod(f"{d}/s-mknod", 0o100000 | 0o4755)),
        "fchmodat2": attempt(via_fchmodat2),
        "cp_preserve": attempt(lambda: os.system(f"cp -p /usr/bin/su {d}/s-cp 2>/dev/null")),
        "file_caps": attempt(lambda: os.setxattr(copy("s-fcap"), "security.capability", fcap)),
    }


def cmd_suid(arg: dict[str, Any]) -> object:
    """Leave privileged executables in the workspace by every route; the host inspects them."""
    return _suid_attempts(arg["dir"])


def cmd_procsys(arg: dict[str, Any]) -> object:
    """Dangerous /proc and /sys surfaces."""
    proc_writes = [
        "/proc/sysrq-trigger",
        "/proc/sys/kernel/core_pattern",
        "/proc/sys/kernel/modprobe",
        "/proc/sys/fs/suid_dumpable",
        "/proc/sys/kernel/panic",
        "/proc/sys/vm/overcommit_memory",
        "/proc/sys/vm/drop_caches",
        "/proc/sys/fs/binfmt_misc/register",
    ]
    out: dict[str, Any] = {
        "kcore": attempt(lambda: read_file("/proc/kcore", 16)),
        "kmem": attempt(lambda: read_file("/dev/kmem", 16)),
        "kmsg": attempt(lambda: read_file("/proc/kmsg", 16)),
        "sys_exists": os.path.exists("/sys"),
        "sys_listing": attempt(lambda: sorted(os.listdir("/sys"))),
        "writes": {},
    }
    # Never write a harmful value: a readable file gets its own current value written back
    # (a no-op that proves the write path); a write-only one is only opened for writing.
    for path in proc_writes:
        out["writes"][path] = attempt(lambda path=path: _same_value_write(path))
    sys_writes = [
        "/sys/kernel/uevent_helper",
        "/sys/power/state",
        "/sys/fs/cgroup/cgroup.procs",
        "/sys/class/net/lo/mtu",
    ]
    for path in sys_writes:
        out["writes"][path] = attempt(lambda path=path: os.close(os.open(path, os.O_WRONLY)))
    out["sys_mkdir_cgroup"] = attempt(lambda: os.mkdir("/sys/fs/cgroup/glove-escape"))
    return out


def cmd_sockets(arg: dict[str, Any]) -> object:
    """Connect to host unix sockets by path and by abstract name."""
    out: dict[str, Any] = {"paths": {}, "abstract": {}}

    def connect(addr: str | bytes) -> str:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(2)
            s.connect(addr)
            return "connected"
        finally:
            s.close()

    for p in arg.get("paths", []):
        out["paths"][p] = attempt(lambda p=p: connect(p))
    for name in arg.get("abstract", []):
        out["abstract"][name] = attempt(lambda name=name: connect(b"\0" + name.encode()))
    return out


def cmd_privs(arg: dict[str, Any]) -> object:
    """Capabilities, no_new_privs, seccomp mode, ids and group changes."""
    st = proc_status()
    keys = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
    out: dict[str, Any] = {k: st.get(k) for k in keys}
    out["Seccomp_filters"] = st.get("Seccomp_filters")
    out["uid"] = os.getuid()
    out["gid"] = os.getgid()
    out["groups"] = os.getgroups()
    out["setgroups"] = attempt(lambda: os.setgroups([]))
    out["setuid0"] = attempt(lambda: os.setuid(0))
    out["uid_map"] = attempt(lambda: read_file("/proc/self/uid_map", 4096).decode())
    out["gid_map"] = attempt(lambda: read_file("/proc/self/gid_map", 4096).decode())
    out["setgroups_file"] = attempt(lambda: read_file("/proc/self/setgroups").decode().strip())
    out["write_uid_map"] = attempt(lambda: write_file("/proc/self/uid_map", b"0 0 1\n"))
    return out


def cmd_run(arg: dict[str, Any]) -> object:
    """Run a program and report its exit code and output (setuid and tool checks)."""
    import subprocess

    out = {}
    for key, argv in arg["argvs"].items():
        try:
            p = subprocess.run(argv, capture_output=True, check=False, timeout=20)
            out[key] = {
                "rc": p.returncode,
                "stdout": p.stdout.decode(errors="replace")[-2000:],
                "stderr": p.stderr.decode(errors="replace")[-500:],
            }
        except OSError as exc:
            out[key] = {"errno": err_name(exc)}
    return out


# x86_64 syscall numbers and harmless argument choices. Each choice makes an unfiltered
# kernel answer something other than EPERM where the kernel allows it (EFAULT, EBADF,
# EINVAL or success), so a passing check proves the filter, not the kernel, said no.
AT_FDCWD = -100
SYSCALLS: dict[str, Callable[[], object]] = {
    "getpid": lambda: raw(39),
    "ptrace_traceme": lambda: raw(101, 0, 0, 0, 0),
    "process_vm_readv": lambda: raw(310, os.getpid(), 0, 0, 0, 0, 0),
    "process_vm_writev": lambda: raw(311, os.getpid(), 0, 0, 0, 0, 0),
    "keyctl": lambda: raw(250, 0, -2, 0),  # KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING
    "add_key": lambda: raw(248, 0, 0, 0, 0, 0),
    "request_key": lambda: raw(249, 0, 0, 0, 0),
    "mount": lambda: raw(165, 0, 1, 0, 0, 0),  # target pointer 1 -> EFAULT
    "umount2": lambda: raw(166, 1, 0),
    "pivot_root": lambda: raw(155, 1, 1),
    "fsopen": lambda: raw(430, b"tmpfs", 0),
    "fsconfig": lambda: raw(431, -1, 0, 0, 0, 0),
    "fsmount": lambda: raw(432, -1, 0, 0),
    "fspick": lambda: raw(433, AT_FDCWD, b"/", 0),
    "open_tree": lambda: raw(428, AT_FDCWD, b"/", 0),  # O_PATH-like: succeeds unfiltered
    "move_mount": lambda: raw(429, -1, b"", -1, b"", 0),
    "mount_setattr": lambda: raw(442, -1, b"", 0, 0, 0),
    "unshare_newuser": lambda: raw(272, 0x10000000),
    "unshare_newns": lambda: raw(272, 0x00020000),
    "unshare_newnet": lambda: raw(272, 0x40000000),
    "setns": lambda: raw(308, -1, 0),
    "clone3": lambda: raw(435, 0, 0),  # size 0 -> EINVAL unfiltered; ENOSYS wanted
    "bpf": lambda: raw(321, 0x7FFF, 0, 0),
    "perf_event_open": lambda: raw(298, 0, 0, -1, -1, 0),
    "userfaultfd": lambda: raw(323, 1 | 0x4000),  # UFFD_USER_MODE_ONLY | bogus -> EINVAL
    "kexec_load": lambda: raw(246, 0, 0, 0, 0),
    "kexec_file_load": lambda: raw(320, -1, -1, 0, 0, 0),
    "init_module": lambda: raw(175, 0, 0, 0),
    "finit_module": lambda: raw(313, -1, 0, 0),
    "delete_module": lambda: raw(176, 0, 0),
    "open_by_handle_at": lambda: raw(304, -1, 0, 0),
    "io_uring_setup": lambda: raw(425, 1, 0),
    "io_uring_enter": lambda: raw(426, -1, 0, 0, 0, 0, 0),
    "io_uring_register": lambda: raw(427, -1, 0, 0, 0),
    "ioctl_TIOCSTI": lambda: raw(16, -1, 0x5412, 0),
    "ioctl_TIOCLINUX": lambda: raw(16, -1, 0x541C, 0),
    "ioctl_TIOCGWINSZ": lambda: raw(16, -1, 0x5413, 0),
    "socket_packet_raw": lambda: raw(41, 17, 3, 0),  # AF_PACKET, SOCK_RAW
    "socket_packet_dgram": lambda: raw(41, 17, 2, 0),  # AF_PACKET, SOCK_DGRAM
    "socket_inet_raw": lambda: raw(41, 2, 3, 255),  # AF_INET, SOCK_RAW, IPPROTO_RAW
    "socket_inet6_raw": lambda: raw(41, 10, 3, 255),
    "socket_inet_packet": lambda: raw(41, 2, 10, 0),  # obsolete SOCK_PACKET
    "socket_netlink_route": lambda: raw(41, 16, 3, 0),  # AF_NETLINK, SOCK_RAW, ROUTE
    "socket_netlink_dgram": lambda: raw(41, 16, 2, 0),
    "socket_netlink_uevent": lambda: raw(41, 16, 3, 15),  # NETLINK_KOBJECT_UEVENT
    "socket_netlink_sock_diag": lambda: raw(41, 16, 3, 4),  # NETLINK_SOCK_DIAG
    "socket_netlink_audit": lambda: raw(41, 16, 3, 9),  # NETLINK_AUDIT
    "socket_netlink_generic": lambda: raw(41, 16, 3, 16),  # NETLINK_GENERIC
    "socketpair_netlink": lambda: raw(53, 16, 3, 0, 0),
    "x32_ptrace": lambda: raw(0x40000000 | 101, 0, 0, 0, 0),  # x32 ABI number space
    "socket_vsock": lambda: raw(41, 40, 1, 0),  # AF_VSOCK: not isolated by the netns
    "syslog_read_all": lambda: raw(103, 3, 0, 0),  # the kernel log: host-wide
    "socket_inet_stream": lambda: raw(41, 2, 1, 0),
    "socket_unix_stream": lambda: raw(41, 1, 1, 0),
}


def _rtnetlink(sock: socket.socket, kind: int, flags: int, body: bytes) -> list[bytes]:
    """Send one rtnetlink request; return the payloads of every reply message until done."""
    header = struct.pack("=IHHII", 16 + len(body), kind, flags | 0x1, 1, 0)  # NLM_F_REQUEST
    sock.send(header + body)
    replies: list[bytes] = []
    while True:
        data = sock.recv(65536)
        offset = 0
        while offset < len(data):
            length, msg_type, _f, _seq, _pid = struct.unpack_from("=IHHII", data, offset)
            payload = data[offset + 16 : offset + length]
            if msg_type == 3:  # NLMSG_DONE
                return replies
            replies.append(struct.pack("=H", msg_type) + payload)
            if msg_type == 2:  # NLMSG_ERROR: the answer to a request without a dump
                return replies
            offset += (length + 3) & ~3


def cmd_rtnetlink(arg: dict[str, Any]) -> object:
    """List links over NETLINK_ROUTE, then try to take ``lo`` down: what the sandbox can do."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    links = []
    ifinfo = struct.pack("=BxHiII", 0, 0, 0, 0, 0)
    for reply in _rtnetlink(sock, 18, 0x300, ifinfo):  # RTM_GETLINK, NLM_F_DUMP
        if struct.unpack_from("=H", reply)[0] != 16:  # RTM_NEWLINK
            continue
        attrs = reply[2 + 16 :]
        while len(attrs) >= 4:
            alen, atype = struct.unpack_from("=HH", attrs)
            if atype == 3:  # IFLA_IFNAME
                links.append(attrs[4:alen].rstrip(b"\0").decode())
            attrs = attrs[(alen + 3) & ~3 :]
    lo = socket.if_nametoindex("lo")
    down = struct.pack("=BxHiII", 0, 0, lo, 0, 1)  # ifi_flags 0, ifi_change IFF_UP
    (answer,) = _rtnetlink(sock, 16, 0x4, down)  # RTM_NEWLINK, NLM_F_ACK
    error = -struct.unpack_from("=i", answer, 2)[0]
    return {"links": links, "lo_down": errno.errorcode.get(error, str(error)) if error else "ok"}


def cmd_seccomp(arg: dict[str, Any]) -> object:
    """Make every listed syscall, each in its own forked child."""
    names = arg.get("names") or list(SYSCALLS)
    return {name: in_child(SYSCALLS[name]) for name in names}


def cmd_fds(arg: dict[str, Any]) -> object:
    """List open fds and try to use the numbers the host had open."""
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        fds[name] = attempt(lambda name=name: os.readlink(f"/proc/self/fd/{name}"))
    probes = {}
    for n in arg.get("numbers", []):
        probes[str(n)] = attempt(lambda n=n: os.fstat(int(n)).st_ino)
        rel = arg.get("relative")
        if rel:
            probes[f"{n}/{rel}"] = attempt(
                lambda n=n, rel=rel: read_file(f"/proc/self/fd/{n}/{rel}")
            )
            probes[f"openat:{n}/{rel}"] = attempt(
                lambda n=n, rel=rel: os.read(os.open(rel, os.O_RDONLY, dir_fd=int(n)), 64)
            )
    return {"fds": fds, "probes": probes}


def cmd_net(arg: dict[str, Any]) -> object:
    """Interfaces, routes, outbound connects, DNS, and loopback use."""
    with open("/proc/net/dev") as f:
        ifaces = [line.split(":")[0].strip() for line in f.readlines()[2:]]
    out: dict[str, Any] = {"ifaces": ifaces}
    with open("/proc/net/route") as f:
        out["routes_v4"] = [line.split()[:3] for line in f.readlines()[1:]]
    try:
        with open("/proc/net/ipv6_route") as f:
            out["routes_v6"] = [
                line.split()
                for line in f
                if line.split()[9] != "lo"  # local-table loopback entries are expected
            ]
    except OSError as exc:
        out["routes_v6"] = err_name(exc)

    def tcp(host: str, port: int, fam: int = socket.AF_INET) -> str:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect((host, port))
            return "connected"
        finally:
            s.close()

    def udp(host: str, port: int) -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            return s.sendto(b"\0" * 12, (host, port))
        finally:
            s.close()

    out["tcp_1.1.1.1:80"] = attempt(lambda: tcp("1.1.1.1", 80))
    out["tcp_gateway"] = attempt(lambda: tcp("10.0.2.2", 80))
    out["udp_8.8.8.8:53"] = attempt(lambda: udp("8.8.8.8", 53))
    out["tcp6"] = attempt(lambda: tcp("2606:4700:4700::1111", 80, socket.AF_INET6))
    out["dns"] = attempt(lambda: socket.getaddrinfo("example.com", 80)[0][4][0])
    if "host_port" in arg:
        out["tcp_host_loopback"] = attempt(lambda: tcp("127.0.0.1", int(arg["host_port"])))

    def loopback_echo() -> str:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        c = socket.create_connection(srv.getsockname(), timeout=3)
        conn, _ = srv.accept()
        c.sendall(b"ping")
        data = conn.recv(4)
        for s in (c, conn, srv):
            s.close()
        return data.decode()

    out["loopback"] = attempt(loopback_echo)
    return out


def cmd_init(arg: dict[str, Any]) -> object:
    """Attack the sandbox's own init and parent: their fds, memory, environment and privileges."""
    out: dict[str, Any] = {"self": os.getpid(), "ppid": os.getppid()}
    for pid in sorted({1, os.getppid()} - {0, os.getpid()}):
        entry: dict[str, Any] = {}
        try:
            with open(f"/proc/{pid}/status") as f:
                status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
            entry["status"] = {
                k: status.get(k)
                for k in ("Name", "Uid", "CapEff", "CapPrm", "Seccomp", "NoNewPrivs")
            }
        except OSError as exc:
            entry["status"] = err_name(exc)
        entry["mem_rw"] = attempt(lambda pid=pid: os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR)))
        entry["environ"] = attempt(lambda pid=pid: read_file(f"/proc/{pid}/environ", 256))
        entry["root"] = attempt(lambda pid=pid: sorted(os.listdir(f"/proc/{pid}/root"))[:20])
        fds: dict[str, Any] = {}
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError as exc:
            names = []
            fds["list"] = {"errno": err_name(exc)}
        for name in names:
            path = f"/proc/{pid}/fd/{name}"
            target = attempt(lambda path=path: os.readlink(path))

            def use(path: str = path) -> object:
                if os.path.isdir(path):
                    return sorted(os.listdir(path))[:20]
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                os.close(fd)
                return "opened"

            fds[name] = {"target": target, "use": attempt(use)}
        entry["fds"] = fds

        def getfds(pid: int = pid) -> list[int]:
            pidfd = raw(434, pid, 0)  # pidfd_open
            got = []
            try:
                for n in range(64):
                    try:
                        got.append(n)
                        os.close(raw(438, pidfd, n, 0))  # pidfd_getfd
                    except OSError as exc:
                        got.pop()
                        if exc.errno == errno.EPERM:
                            raise
            finally:
                os.close(pidfd)
            return got

        entry["pidfd_getfd"] = attempt(getfds)
        out[str(pid)] = entry
    return out


def cmd_stdin(arg: dict[str, Any]) -> object:
    """What fd 0 is, and whether it reaches the host: as a directory, for writing, by path."""
    out: dict[str, Any] = {}
    try:
        st = os.fstat(0)
        out["mode"] = stat.filemode(st.st_mode)
    except OSError as exc:
        out["mode"] = err_name(exc)
    out["link"] = attempt(lambda: os.readlink("/proc/self/fd/0"))
    rel = arg.get("relative", "secret.txt")
    out["openat"] = attempt(lambda: os.read(os.open(rel, os.O_RDONLY, dir_fd=0), 64))
    out["via_proc"] = attempt(lambda: read_file(f"/proc/self/fd/0/{rel}"))
    out["write"] = attempt(lambda: os.write(0, arg.get("payload", "PWNED").encode()))
    out["reopen_rw"] = attempt(lambda: os.close(os.open("/proc/self/fd/0", os.O_RDWR)))
    return out


def cmd_swap(arg: dict[str, Any]) -> object:
    """Keep exchanging a directory and a symlink at ``path`` (renameat2 RENAME_EXCHANGE)."""
    path, other = arg["path"], arg["path"] + ".swap"
    rename_exchange = 2
    until = time.monotonic() + float(arg.get("seconds", 10))
    swaps = 0
    while time.monotonic() < until:
        raw(316, -100, path.encode(), -100, other.encode(), rename_exchange)
        swaps += 1
        if swaps == 1 and "ready" in arg:
            with open(arg["ready"], "w") as f:
                f.write("swapping")
    return {"swaps": swaps}


def cmd_env(arg: dict[str, Any]) -> object:
    """The environment as the sandboxed program receives it."""
    return {"env": dict(os.environ)}


def cmd_tty(arg: dict[str, Any]) -> object:
    """Push characters into every terminal within reach with TIOCSTI and TIOCLINUX."""
    import fcntl
    import termios

    out: dict[str, Any] = {
        "fds": {
            n: attempt(lambda n=n: os.readlink(f"/proc/self/fd/{n}"))
            for n in os.listdir("/proc/self/fd")
        },
        "isatty": [os.isatty(fd) for fd in (0, 1, 2)],
        "sid_is_self": os.getsid(0) == os.getpid(),
    }
    payload = arg.get("payload", "X")
    fds = {"0": 0, "1": 1, "2": 2}
    try:
        fds["/dev/tty"] = os.open("/dev/tty", os.O_RDWR)
    except OSError as exc:
        out["open_dev_tty"] = err_name(exc)
    for name, fd in fds.items():

        def sti(fd: int = fd) -> str:
            for ch in payload.encode():
                fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
            return "injected"

        out[f"TIOCSTI:{name}"] = attempt(sti)
        out[f"TIOCSCTTY:{name}"] = attempt(lambda fd=fd: fcntl.ioctl(fd, termios.TIOCSCTTY, 1))
        # TIOCLINUX subcode 6 (get selection mode) is harmless; EPERM/EINVAL/ENOTTY all deny.
        out[f"TIOCLINUX:{name}"] = attempt(
            lambda fd=fd: fcntl.ioctl(fd, 0x541C, struct.pack("b", 6))
        )
        out[f"TIOCSTI_hi:{name}"] = attempt(
            lambda fd=fd: raw(16, fd, 0x5412 | (1 << 32), bytes(payload[:1].encode()))
        )
    return out


def cmd_kill_all(arg: dict[str, Any]) -> object:
    """kill(-1, SIGKILL): every process this one may signal, which must be only the sandbox."""
    child = os.fork()
    if child == 0:  # a sandbox process for kill(-1) to find (control)
        time.sleep(30)
        os._exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    result = attempt(lambda: os.kill(-1, signal.SIGTERM))
    _, status = os.waitpid(child, 0)
    return {"kill_minus_one": result, "child_signal": os.WTERMSIG(status)}


def cmd_deny_flood(arg: dict[str, Any]) -> object:
    """Hammer a denied syscall (ptrace) from several processes until killed or ``seconds``."""
    procs = int(arg.get("procs", 4))
    until = time.monotonic() + float(arg.get("seconds", 30))
    for _ in range(procs - 1):
        if os.fork() == 0:
            break
    calls = 0
    while time.monotonic() < until:
        libc.syscall(ctypes.c_long(101), ctypes.c_long(0), 0, 0, 0)  # ptrace(TRACEME)
        calls += 1
    return {"calls": calls}


def cmd_exit(arg: dict[str, Any]) -> object:
    """Exit with a code or die by a signal."""
    if "signal" in arg:
        sys.stdout.flush()
        os.kill(os.getpid(), int(arg["signal"]))
        time.sleep(5)
    os._exit(int(arg.get("code", 0)))


def cmd_cpu(arg: dict[str, Any]) -> object:
    """Burn CPU until killed or ``max`` seconds of CPU have been used."""
    limit = float(arg.get("max", 60))
    for _ in range(int(arg.get("procs", 1)) - 1):
        if os.fork() == 0:
            break  # every process burns on its own
    while time.process_time() < limit:
        for _ in range(100000):
            pass
    return {"cpu": time.process_time()}


def _mem_many(size: int, procs: int) -> dict[str, Any]:
    """Have ``procs`` processes each hold ``size`` touched bytes at once; count successes."""
    r, w = os.pipe()
    kids = []
    for _ in range(procs):
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                buf = bytearray(size)
                for i in range(0, size, 4096):
                    buf[i] = 1
                os.write(w, b"1")
                time.sleep(3)  # hold it while the others allocate
            except MemoryError:
                os.write(w, b"0")
            os._exit(0)
        kids.append(pid)
    os.close(w)
    for pid in kids:
        os.waitpid(pid, 0)
    got = b""
    while chunk := os.read(r, 64):
        got += chunk
    return {"held": got.count(b"1"), "procs": procs, "allocated": got.count(b"1") == procs}


def cmd_mem(arg: dict[str, Any]) -> object:
    """Allocate and touch ``bytes`` of memory; report whether it worked."""
    size = int(arg["bytes"])
    procs = int(arg.get("procs", 1))
    if procs > 1:
        return _mem_many(size, procs)
    try:
        buf = bytearray(size)
        for i in range(0, size, 4096):
            buf[i] = 1
    except MemoryError:
        return {"allocated": False, "error": "MemoryError"}
    return {"allocated": True, "bytes": len(buf)}


def cmd_pids_limit(arg: dict[str, Any]) -> object:
    """Fork up to ``max`` sleeping children and count how many the kernel allowed."""
    limit = int(arg["max"])
    children = []
    error = None
    for _ in range(limit):
        try:
            pid = os.fork()
        except OSError as exc:
            error = err_name(exc)
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return {"forked": len(children), "errno": error}


def cmd_forkbomb(arg: dict[str, Any]) -> object:
    """A bounded fork bomb: every process forks ``width`` children to ``depth`` levels."""
    width = int(arg.get("width", 6))
    depth = int(arg.get("depth", 5))
    level = 0
    while level < depth:
        made = 0
        while made < width:
            try:
                pid = os.fork()
            except OSError:
                time.sleep(0.01)
                continue
            made += 1
            if pid == 0:
                level += 1
                break
        else:
            break
    while True:  # everyone spins, keeping the pids and a CPU busy
        time.sleep(0.05)


def cmd_output(arg: dict[str, Any]) -> object:
    """Write ``bytes`` to stdout, optionally leaving an orphan that holds the pipe open."""
    if arg.get("orphan"):
        if os.fork() == 0:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            os.execv("/bin/sleep", [arg.get("marker", "glove-orphan"), "1000"])
        os.wait()
    total = int(arg.get("bytes", 0))
    chunk = b"o" * 65536
    out = sys.stderr.buffer if arg.get("stream") == "stderr" else sys.stdout.buffer
    if arg.get("stream") == "fd0":
        out = os.fdopen(0, "wb", buffering=0, closefd=False)
    written = 0
    try:
        while written < total:
            n = min(len(chunk), total - written)
            out.write(chunk[:n])
            written += n
        out.flush()
    except BrokenPipeError:
        os._exit(0)
    os._exit(0)


COMMANDS: dict[str, Callable[[dict[str, Any]], object]] = {
    "cpu": cmd_cpu,
    "deny-flood": cmd_deny_flood,
    "dev": cmd_dev,
    "env": cmd_env,
    "exit": cmd_exit,
    "fds": cmd_fds,
    "fill": cmd_fill,
    "forkbomb": cmd_forkbomb,
    "hostname": cmd_hostname,
    "init": cmd_init,
    "inodes": cmd_inodes,
    "ipc": cmd_ipc,
    "kill-all": cmd_kill_all,
    "links": cmd_links,
    "mem": cmd_mem,
    "mountinfo": cmd_mountinfo,
    "net": cmd_net,
    "ns": cmd_ns,
    "output": cmd_output,
    "pids": cmd_pids,
    "pids-limit": cmd_pids_limit,
    "privs": cmd_privs,
    "proc-writable": cmd_proc_writable,
    "procsys": cmd_procsys,
    "read": cmd_read,
    "run": cmd_run,
    "seccomp": cmd_seccomp,
    "rtnetlink": cmd_rtnetlink,
    "sockets": cmd_sockets,
    "stdin": cmd_stdin,
    "spawn": cmd_spawn,
    "suid": cmd_suid,
    "swap": cmd_swap,
    "tty": cmd_tty,
    "userns": cmd_userns,
    "write": cmd_write,
}


def main() -> None:
    """Dispatch the subcommand named in argv[1] with the JSON argument in argv[2]."""
    arg = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    emit(COMMANDS[sys.argv[1]](arg))


if __name__ == "__main__":
    main()
