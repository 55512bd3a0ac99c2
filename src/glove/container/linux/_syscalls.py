"""ctypes bindings for the syscalls Python 3.11 lacks, in one private module.

Everything goes through ``ctypes.PyDLL`` so the GIL stays held across the call: that is what
makes ``clone3`` safe from a multi-threaded parent (a CDLL call drops the GIL and a child
cloned meanwhile can inherit a lock held by another thread and deadlock). Every wrapper
raises ``OSError`` with the errno on failure.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
from collections.abc import Iterable
from typing import Final

#: Syscall numbers that differ by architecture (x86_64, aarch64).
_SYSCALLS: Final = {
    "x86_64": {
        "clone3": 435,
        "pivot_root": 155,
        "openat2": 437,
        "mount_setattr": 442,
        "capset": 126,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "seccomp": 317,
        "connect": 42,
    },
    "aarch64": {
        "clone3": 435,
        "pivot_root": 41,
        "openat2": 437,
        "mount_setattr": 442,
        "capset": 91,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "seccomp": 277,
        "connect": 203,
    },
}

CLONE_NEWNS: Final = 0x00020000
CLONE_NEWCGROUP: Final = 0x02000000
CLONE_NEWUTS: Final = 0x04000000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWPID: Final = 0x20000000
CLONE_NEWNET: Final = 0x40000000
CLONE_PIDFD: Final = 0x00001000
#: clone3: start the child in the cgroup v2 group ``clone_args.cgroup`` names (Linux 5.7).
CLONE_INTO_CGROUP: Final = 0x200000000
#: Every namespace-creating clone flag (NEWTIME is clone3/unshare only).
CLONE_NEW_ANY: Final = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)
SANDBOX_NAMESPACES: Final = CLONE_NEW_ANY

MS_RDONLY: Final = 0x1
MS_NOSUID: Final = 0x2
MS_NODEV: Final = 0x4
MS_NOEXEC: Final = 0x8
MS_REMOUNT: Final = 0x20
MS_BIND: Final = 0x1000
MS_REC: Final = 0x4000
MS_PRIVATE: Final = 0x40000
MNT_DETACH: Final = 0x2

MOUNT_ATTR_RDONLY: Final = 0x1
MOUNT_ATTR_NOSUID: Final = 0x2
MOUNT_ATTR_NODEV: Final = 0x4
MOUNT_ATTR_NOEXEC: Final = 0x8
AT_EMPTY_PATH: Final = 0x1000
AT_RECURSIVE: Final = 0x8000

OPEN_TREE_CLONE: Final = 0x1
MOVE_MOUNT_F_EMPTY_PATH: Final = 0x4
MOVE_MOUNT_T_EMPTY_PATH: Final = 0x40

RESOLVE_NO_MAGICLINKS: Final = 0x02
RESOLVE_NO_SYMLINKS: Final = 0x04
RESOLVE_IN_ROOT: Final = 0x10

PR_SET_PDEATHSIG: Final = 1
PR_SET_DUMPABLE: Final = 4
PR_SET_SECCOMP: Final = 22
PR_CAPBSET_DROP: Final = 24
PR_SET_SECUREBITS: Final = 28
PR_SET_NO_NEW_PRIVS: Final = 38
PR_CAP_AMBIENT: Final = 47
PR_CAP_AMBIENT_CLEAR_ALL: Final = 4
SECCOMP_MODE_FILTER: Final = 2
#: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and NO_CAP_AMBIENT_RAISE, each with its lock bit.
SECUREBITS_LOCKED_DOWN: Final = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_LINUX_CAPABILITY_VERSION_3: Final = 0x20080522
#: signalfd(2) flags, and the size of one ``struct signalfd_siginfo`` read from it.
SFD_CLOEXEC: Final = 0o2000000
SFD_NONBLOCK: Final = 0o4000
SIGNALFD_SIGINFO_BYTES: Final = 128
_SIGSET_BYTES: Final = 128  # glibc's sigset_t

_libc = ctypes.PyDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.signalfd.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]
_py = ctypes.pythonapi
for _hook in ("PyOS_BeforeFork", "PyOS_AfterFork_Parent", "PyOS_AfterFork_Child"):
    getattr(_py, _hook).restype = None
    getattr(_py, _hook).argtypes = []


#: This host's architecture and its syscall table, read once per process.
_MACHINE: Final = platform.machine()
_TABLE: Final = _SYSCALLS.get(_MACHINE)


def syscall_number(name: str) -> int:
    """Return this architecture's number for ``name``.

    Raises:
        OSError: ENOSYS on an architecture the table does not know.
    """
    if _TABLE is None:
        raise OSError(38, f"unsupported architecture {_MACHINE}")
    return _TABLE[name]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _b(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def signalfd(signals: Iterable[int]) -> int:
    """A non-blocking, close-on-exec signalfd for ``signals`` (the caller blocks them).

    Raises:
        OSError: the kernel refused it.
    """
    mask = 0
    for signum in signals:
        mask |= 1 << (signum - 1)
    sigset = mask.to_bytes(_SIGSET_BYTES, "little")
    return _check(_libc.signalfd(-1, sigset, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd")


def read_signals(fd: int) -> list[int]:
    """The signal numbers waiting on signalfd ``fd``, in the order the kernel gives them
    (none when nothing is waiting)."""
    try:
        data = os.read(fd, SIGNALFD_SIGINFO_BYTES * 64)
    except BlockingIOError:
        return []
    size = SIGNALFD_SIGINFO_BYTES
    return [int.from_bytes(data[at : at + 4], "little") for at in range(0, len(data), size)]


class _CloneArgs(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags",
            "pidfd",
            "child_tid",
            "parent_tid",
            "exit_signal",
            "stack",
            "stack_size",
            "tls",
            "set_tid",
            "set_tid_size",
            "cgroup",
        )
    ]


def clone3(flags: int, cgroup_fd: int = -1) -> tuple[int, int]:
    """Fork with ``clone3(flags | CLONE_PIDFD)``, keeping the interpreter consistent.

    With ``cgroup_fd`` (a cgroup v2 directory) the child starts in that group
    (``CLONE_INTO_CGROUP``): no migration later, which is the slow part of a placement.
    Returns ``(0, -1)`` in the child and ``(pid, pidfd)`` in the parent.

    Raises:
        OSError: the kernel refused (ENOSYS when clone3 is filtered, EPERM, ...).
    """
    pidfd = ctypes.c_int(-1)
    args = _CloneArgs()
    args.flags = flags | CLONE_PIDFD
    args.pidfd = ctypes.addressof(pidfd)
    args.exit_signal = 17  # SIGCHLD, so waitpid() works as for fork()
    if cgroup_fd >= 0:
        args.flags |= CLONE_INTO_CGROUP
        args.cgroup = cgroup_fd
    number = syscall_number("clone3")
    _py.PyOS_BeforeFork()
    result = _libc.syscall(number, ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args)))
    err = ctypes.get_errno()
    if result == 0:
        _py.PyOS_AfterFork_Child()
        return 0, -1
    _py.PyOS_AfterFork_Parent()
    if result < 0:
        raise OSError(err, f"clone3: {os.strerror(err)}")
    return int(result), pidfd.value


def unshare(flags: int) -> None:
    """Call ``unshare(2)``.

    Raises:
        OSError: the kernel refused.
    """
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    """Call ``mount(2)``.

    Raises:
        OSError: the kernel refused.
    """
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {target}")


def umount2(target: str, flags: int) -> None:
    """Call ``umount2(2)``.

    Raises:
        OSError: the kernel refused.
    """
    _check(_libc.umount2(_b(target), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """Call ``pivot_root(2)``.

    Raises:
        OSError: the kernel refused.
    """
    number = syscall_number("pivot_root")
    _check(_libc.syscall(number, _b(new_root), _b(put_old)), "pivot_root")


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def openat2(path: str, flags: int, resolve: int, dir_fd: int = -100) -> int:
    """Open ``path`` with ``openat2(2)`` and the given ``RESOLVE_*`` restrictions.

    Raises:
        OSError: ELOOP when a forbidden symlink is met, or any open error.
    """
    how = _OpenHow(flags=flags, mode=0, resolve=resolve)
    number = syscall_number("openat2")
    result = _libc.syscall(
        number,
        ctypes.c_int(dir_fd),
        _b(path),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    return _check(int(result), f"open {path}")


def open_no_symlinks(path: str, flags: int, mode: int = 0o600) -> int:
    """``open`` with ``RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` (any link: ELOOP).

    Raises:
        OSError: ELOOP when a symlink is met, or any open error.
    """
    creating = flags & (os.O_CREAT | os.O_TMPFILE)
    how = _OpenHow(
        flags=flags | os.O_CLOEXEC,
        mode=mode if creating else 0,  # openat2 refuses a mode it would not use
        resolve=RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    )
    number = syscall_number("openat2")
    result = _libc.syscall(
        number, ctypes.c_int(-100), _b(path), ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how))
    )
    return _check(int(result), f"open {path}")


def create_file_no_symlinks(path: str, mode: int = 0o644) -> int:
    """Create or truncate ``path`` for writing, refusing any symlink on the way.

    For files the launcher writes where a sandbox could have planted links (a status file in
    the workspace): the path is resolved with ``RESOLVE_NO_SYMLINKS``, so neither the file
    nor a parent directory can redirect the write.

    Raises:
        OSError: ELOOP when a symlink is met, or any open error.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    how = _OpenHow(flags=flags, mode=mode, resolve=RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    number = syscall_number("openat2")
    result = _libc.syscall(
        number, ctypes.c_int(-100), _b(path), ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how))
    )
    return _check(int(result), f"open {path}")


class _MountAttr(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64) for name in ("attr_set", "attr_clr", "propagation", "userns_fd")
    ]


def mount_setattr_recursive(fd: int, attr_set: int) -> None:
    """Set mount attributes on the mount ``fd`` is the root of, and every mount below it.

    Raises:
        OSError: the kernel refused.
    """
    attr = _MountAttr(attr_set=attr_set, attr_clr=0, propagation=0, userns_fd=0)
    number = syscall_number("mount_setattr")
    flags = ctypes.c_uint(AT_RECURSIVE | AT_EMPTY_PATH)
    result = _libc.syscall(
        number,
        ctypes.c_int(fd),
        b"",
        flags,
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(int(result), "mount_setattr")


def open_tree_clone(fd: int) -> int:
    """Clone the mount tree at ``fd`` (recursively) into a new detached tree; return its fd.

    Raises:
        OSError: the kernel refused.
    """
    number = syscall_number("open_tree")
    flags = OPEN_TREE_CLONE | os.O_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH
    return _check(
        int(_libc.syscall(number, ctypes.c_int(fd), b"", ctypes.c_uint(flags))), "open_tree"
    )


def move_mount_fd(tree_fd: int, target_fd: int) -> None:
    """Attach the detached tree ``tree_fd`` on top of the path ``target_fd`` refers to.

    Raises:
        OSError: the kernel refused.
    """
    number = syscall_number("move_mount")
    flags = ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
    result = _libc.syscall(number, ctypes.c_int(tree_fd), b"", ctypes.c_int(target_fd), b"", flags)
    _check(int(result), "move_mount")


FSOPEN_CLOEXEC: Final = 0x1
FSCONFIG_SET_STRING: Final = 1
FSCONFIG_CMD_CREATE: Final = 6
FSMOUNT_CLOEXEC: Final = 0x1


def fsmount_ext4(device: str) -> int:
    """Mount the ext4 filesystem on ``device`` as a detached mount; return its mount fd.

    The mount is nosuid and nodev and is attached nowhere until ``move_mount``.

    Raises:
        OSError: the kernel refused (not root, bad filesystem, ...).
    """
    fs_fd = _check(
        int(_libc.syscall(syscall_number("fsopen"), b"ext4", ctypes.c_uint(FSOPEN_CLOEXEC))),
        "fsopen ext4",
    )
    try:
        number = syscall_number("fsconfig")
        _check(
            int(
                _libc.syscall(
                    number,
                    ctypes.c_int(fs_fd),
                    ctypes.c_uint(FSCONFIG_SET_STRING),
                    b"source",
                    _b(device),
                    ctypes.c_int(0),
                )
            ),
            "fsconfig source",
        )
        _check(
            int(
                _libc.syscall(
                    number,
                    ctypes.c_int(fs_fd),
                    ctypes.c_uint(FSCONFIG_CMD_CREATE),
                    None,
                    None,
                    ctypes.c_int(0),
                )
            ),
            "fsconfig create",
        )
        attrs = ctypes.c_uint(MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
        return _check(
            int(
                _libc.syscall(
                    syscall_number("fsmount"),
                    ctypes.c_int(fs_fd),
                    ctypes.c_uint(FSMOUNT_CLOEXEC),
                    attrs,
                )
            ),
            "fsmount",
        )
    finally:
        os.close(fs_fd)


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    """Call ``prctl(2)`` with integer arguments.

    Raises:
        OSError: the kernel refused.
    """
    return _check(_libc.prctl(option, arg2, arg3, 0, 0), f"prctl {option}")


@functools.cache
def cap_last_cap() -> int:
    """The highest capability number this kernel knows (read once per process)."""
    fd = os.open("/proc/sys/kernel/cap_last_cap", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return int(os.read(fd, 32))
    finally:
        os.close(fd)


def drop_all_capabilities(last_cap: int) -> None:
    """Lock securebits, empty the bounding and ambient sets, then zero the other sets.

    Must run while the process still holds CAP_SETPCAP in its user namespace.

    Raises:
        OSError: a step was refused.
    """
    prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN)
    for cap in range(last_cap + 1):
        prctl(PR_CAPBSET_DROP, cap)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}, all zero
    number = syscall_number("capset")
    _check(int(_libc.syscall(number, ctypes.byref(header), ctypes.byref(data))), "capset")


def set_own_cmdline(title: bytes) -> None:
    """Overwrite this process's argv area so ``/proc/self/cmdline`` shows ``title``.

    The sandbox init is a fork of the launcher; without this, the contained command could
    read the launcher's full command line (host paths, options) from ``/proc/1/cmdline``.
    The argv strings are contiguous from ``program_invocation_name``; the area is zeroed to
    its current length and ``title`` (truncated to fit) is written at its start.
    """
    fd = os.open("/proc/self/cmdline", os.O_RDONLY | os.O_CLOEXEC)
    try:
        length = len(os.read(fd, 1 << 16))
    finally:
        os.close(fd)
    start = ctypes.c_void_p.in_dll(_libc, "program_invocation_name").value
    if not start or length == 0:
        return
    ctypes.memset(start, 0, length)
    ctypes.memmove(start, title[: length - 1], min(len(title), length - 1))


#: struct statfs is 120 bytes on 64-bit Linux; f_type is its first field (a long).
_STATFS_BYTES: Final = 120
_libc.fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]


def filesystem_magic(fd: int) -> int:
    """Return the ``f_type`` magic of the filesystem ``fd`` lives on (``fstatfs``).

    Raises:
        OSError: the kernel refused.
    """
    buffer = ctypes.create_string_buffer(_STATFS_BYTES)
    _check(_libc.fstatfs(fd, buffer), "fstatfs")
    return ctypes.c_long.from_buffer(buffer).value & 0xFFFFFFFF


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


SECCOMP_SET_MODE_FILTER: Final = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER: Final = 1 << 3
#: Once the launcher has received a notification, only a fatal signal interrupts the caller
#: (Linux 5.19): a call performed on its behalf is never restarted half done.
SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: Final = 1 << 5
SECCOMP_IOCTL_NOTIF_RECV: Final = 0xC0502100
SECCOMP_IOCTL_NOTIF_SEND: Final = 0xC0182101
#: struct seccomp_notif: id u64, pid u32, flags u32, data {nr s32, arch u32, ip u64, args u64[6]}.
_NOTIF_FORMAT: Final = "=QIIiIQ6Q"
#: struct seccomp_notif_resp: id u64, val s64, error s32, flags u32.
_NOTIF_RESP_FORMAT: Final = "=QqiI"


def load_seccomp_listener(program: bytes) -> int:
    """Set no_new_privs, install ``program`` and return its user-notification listener fd.

    Raises:
        OSError: the kernel refused (no user notification support, bad program).
    """
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
    number = syscall_number("seccomp")
    result = _libc.syscall(
        number, SECCOMP_SET_MODE_FILTER, ctypes.c_uint(flags), ctypes.byref(fprog)
    )
    if result < 0 and ctypes.get_errno() == errno.EINVAL:  # a kernel before 5.19
        flags = SECCOMP_FILTER_FLAG_NEW_LISTENER
        result = _libc.syscall(
            number, SECCOMP_SET_MODE_FILTER, ctypes.c_uint(flags), ctypes.byref(fprog)
        )
    return _check(int(result), "seccomp listener")


def receive_notification(listener: int) -> tuple[int, int, int, tuple[int, ...]] | None:
    """Read one pending notification: (id, pid, syscall number, its six arguments), or None
    if it went away.

    Raises:
        OSError: the listener itself failed.
    """
    import fcntl
    import struct

    buffer = bytearray(struct.calcsize(_NOTIF_FORMAT))
    try:
        fcntl.ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, buffer)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EINTR, errno.EAGAIN):
            return None
        raise
    ident, pid, _flags, number, _arch, _ip, *args = struct.unpack(_NOTIF_FORMAT, buffer)
    return ident, pid, number, tuple(args)


def answer_notification(listener: int, ident: int, error: int) -> None:
    """Fail the notified syscall with ``error`` (an errno); a vanished caller is ignored."""
    import fcntl
    import struct

    response = bytearray(struct.pack(_NOTIF_RESP_FORMAT, ident, 0, -error, 0))
    with contextlib.suppress(OSError):
        fcntl.ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, response)


def load_seccomp_bpf(program: bytes) -> None:
    """Set no_new_privs and install a classic-BPF seccomp program.

    Raises:
        OSError: the kernel refused the program.
    """
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    result = _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0)
    _check(result, "seccomp")
