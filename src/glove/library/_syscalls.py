"""ctypes bindings for the syscalls the store and the projections need (Python 3.11 has none).

``openat2`` to resolve beneath the library root, the new mount API (``fsopen``,
``fsconfig``, ``fsmount``, ``fspick``, ``open_tree``, ``mount_setattr``, ``move_mount``) to
freeze and mount a copy, ``mount``/``umount2`` for the fallback, ``renameat2`` for a
no-replace rename. Calls go through ``ctypes.PyDLL`` so the GIL stays held (the sandbox's
init may call them right after ``clone3`` from a multi-threaded parent). Every wrapper raises
``OSError`` with the errno; every descriptor made here is close-on-exec.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from typing import Final

#: Syscall numbers that differ by architecture (x86_64, aarch64); the rest are shared.
_NUMBERS: Final = {
    "x86_64": {"renameat2": 316},
    "aarch64": {"renameat2": 276},
}
_SHARED: Final = {
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "openat2": 437,
    "mount_setattr": 442,
}

AT_FDCWD: Final = -100
AT_SYMLINK_NOFOLLOW: Final = 0x100
AT_EMPTY_PATH: Final = 0x1000

RESOLVE_NO_XDEV: Final = 0x01
RESOLVE_NO_MAGICLINKS: Final = 0x02
RESOLVE_NO_SYMLINKS: Final = 0x04
RESOLVE_BENEATH: Final = 0x08

MOUNT_ATTR_RDONLY: Final = 0x1
MOUNT_ATTR_NOSUID: Final = 0x2
MOUNT_ATTR_NODEV: Final = 0x4
MOUNT_ATTR_NOEXEC: Final = 0x8
MS_RDONLY: Final = 0x1
MS_NOSUID: Final = 0x2
MS_NODEV: Final = 0x4
MS_NOEXEC: Final = 0x8
MS_REMOUNT: Final = 0x20
MS_BIND: Final = 0x1000
MS_PRIVATE: Final = 0x40000
MNT_DETACH: Final = 0x2

OPEN_TREE_CLONE: Final = 0x1
OPEN_TREE_CLOEXEC: Final = os.O_CLOEXEC
MOVE_MOUNT_F_EMPTY_PATH: Final = 0x4
MOVE_MOUNT_T_EMPTY_PATH: Final = 0x40
FSOPEN_CLOEXEC: Final = 0x1
FSPICK_CLOEXEC: Final = 0x1
FSPICK_EMPTY_PATH: Final = 0x8
FSMOUNT_CLOEXEC: Final = 0x1
FSCONFIG_SET_FLAG: Final = 0
FSCONFIG_SET_STRING: Final = 1
FSCONFIG_CMD_CREATE: Final = 6
FSCONFIG_CMD_RECONFIGURE: Final = 7
RENAME_NOREPLACE: Final = 0x1

#: errnos that mean "this kernel, or a seccomp filter, does not give us the new mount API".
API_MISSING_ERRNOS: Final = frozenset({errno.ENOSYS, errno.EPERM})

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


def _number(name: str) -> int:
    if name in _SHARED:
        return _SHARED[name]
    table = _NUMBERS.get(platform.machine())
    if table is None:
        raise OSError(errno.ENOSYS, f"{name}: unsupported architecture {platform.machine()}")
    return table[name]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _MountAttr(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64) for name in ("attr_set", "attr_clr", "propagation", "userns_fd")
    ]


def openat2(dir_fd: int, path: str, flags: int, resolve: int) -> int:
    """``openat2(dir_fd, path, {flags, 0, resolve})``; return the new descriptor.

    Raises:
        OSError: ELOOP (a symlink), EXDEV (an escape or a mount crossing), ENOSYS, ...
    """
    how = _OpenHow(flags=flags | os.O_CLOEXEC, mode=0, resolve=resolve)
    result = _libc.syscall(
        _number("openat2"),
        ctypes.c_int(dir_fd),
        os.fsencode(path),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    return _check(int(result), f"openat2 {path!r}")


def fsopen(fstype: str) -> int:
    """Start a filesystem context of ``fstype``; return its descriptor.

    Raises:
        OSError: ENOSYS (no new mount API), EPERM (no CAP_SYS_ADMIN over the user namespace,
            or a seccomp filter), ENODEV (unknown type).
    """
    result = _libc.syscall(_number("fsopen"), os.fsencode(fstype), ctypes.c_uint(FSOPEN_CLOEXEC))
    return _check(int(result), f"fsopen {fstype}")


def fspick(mount_fd: int) -> int:
    """Open the filesystem context of the superblock ``mount_fd`` shows, to reconfigure it.

    Raises:
        OSError: the kernel refused.
    """
    flags = ctypes.c_uint(FSPICK_CLOEXEC | FSPICK_EMPTY_PATH)
    result = _libc.syscall(_number("fspick"), ctypes.c_int(mount_fd), b"", flags)
    return _check(int(result), "fspick")


def _fsconfig(fs_fd: int, command: int, key: bytes | None, value: bytes | None) -> None:
    result = _libc.syscall(
        _number("fsconfig"),
        ctypes.c_int(fs_fd),
        ctypes.c_uint(command),
        key,
        value,
        ctypes.c_int(0),
    )
    _check(int(result), f"fsconfig {key!r}")


def fsconfig_string(fs_fd: int, key: str, value: str) -> None:
    """Set a string parameter (``size``, ``mode``, ...) on a filesystem context.

    Raises:
        OSError: the kernel refused the parameter.
    """
    _fsconfig(fs_fd, FSCONFIG_SET_STRING, key.encode(), value.encode())


def fsconfig_flag(fs_fd: int, key: str) -> None:
    """Set a flag parameter (``ro``) on a filesystem context.

    Raises:
        OSError: the kernel refused the parameter.
    """
    _fsconfig(fs_fd, FSCONFIG_SET_FLAG, key.encode(), None)


def fsconfig_create(fs_fd: int) -> None:
    """Create the superblock of a configured filesystem context.

    Raises:
        OSError: the kernel refused.
    """
    _fsconfig(fs_fd, FSCONFIG_CMD_CREATE, None, None)


def fsconfig_reconfigure(fs_fd: int) -> None:
    """Apply the parameters set on a picked context to its live superblock.

    Raises:
        OSError: the kernel refused.
    """
    _fsconfig(fs_fd, FSCONFIG_CMD_RECONFIGURE, None, None)


def fsmount(fs_fd: int, attrs: int) -> int:
    """Make a detached mount of a created superblock, with ``MOUNT_ATTR_*`` ``attrs``.

    Raises:
        OSError: the kernel refused.
    """
    result = _libc.syscall(
        _number("fsmount"),
        ctypes.c_int(fs_fd),
        ctypes.c_uint(FSMOUNT_CLOEXEC),
        ctypes.c_uint(attrs),
    )
    return _check(int(result), "fsmount")


def open_tree_clone(dir_fd: int, path: str) -> int:
    """A detached clone of the mount at ``path`` beneath ``dir_fd`` (just it, no submounts).

    Raises:
        OSError: the kernel refused.
    """
    flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW
    if not path:
        flags |= AT_EMPTY_PATH
    result = _libc.syscall(
        _number("open_tree"), ctypes.c_int(dir_fd), os.fsencode(path), ctypes.c_uint(flags)
    )
    return _check(int(result), "open_tree")


def mount_setattr(mount_fd: int, attr_set: int, propagation: int = 0) -> None:
    """Set ``MOUNT_ATTR_*`` (and optionally a propagation type) on the mount ``mount_fd``.

    Raises:
        OSError: the kernel refused.
    """
    attr = _MountAttr(attr_set=attr_set, attr_clr=0, propagation=propagation, userns_fd=0)
    result = _libc.syscall(
        _number("mount_setattr"),
        ctypes.c_int(mount_fd),
        b"",
        ctypes.c_uint(AT_EMPTY_PATH),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(int(result), "mount_setattr")


def mount_clear_attr(mount_fd: int, attr_clr: int) -> None:
    """Clear ``MOUNT_ATTR_*`` bits on the mount ``mount_fd`` (the tests' attacker call).

    Raises:
        OSError: the kernel refused (EPERM on a locked mount).
    """
    attr = _MountAttr(attr_set=0, attr_clr=attr_clr, propagation=0, userns_fd=0)
    result = _libc.syscall(
        _number("mount_setattr"),
        ctypes.c_int(mount_fd),
        b"",
        ctypes.c_uint(AT_EMPTY_PATH),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(int(result), "mount_setattr")


def move_mount(tree_fd: int, target_fd: int) -> None:
    """Attach the detached mount ``tree_fd`` on top of what ``target_fd`` refers to.

    Raises:
        OSError: the kernel refused.
    """
    result = _libc.syscall(
        _number("move_mount"),
        ctypes.c_int(tree_fd),
        b"",
        ctypes.c_int(target_fd),
        b"",
        ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH),
    )
    _check(int(result), "move_mount")


#: ``unshare(2)`` flags: a new user namespace, a new mount namespace.
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWNS: Final = 0x00020000


def unshare(flags: int) -> int:
    """``unshare(2)``: 0, or -1 (the errno is not kept: only a probe's child calls it)."""
    return int(_libc.unshare(ctypes.c_int(flags)))


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    """``mount(2)`` (the fallback where the new mount API is missing).

    Raises:
        OSError: the kernel refused.
    """
    encoded = [None if value is None else os.fsencode(value) for value in (source, fstype, data)]
    result = _libc.mount(encoded[0], os.fsencode(target), encoded[1], flags, encoded[2])
    _check(int(result), f"mount {target}")


def umount2(target: str, flags: int) -> None:
    """``umount2(2)``.

    Raises:
        OSError: the kernel refused.
    """
    _check(int(_libc.umount2(os.fsencode(target), flags)), f"umount {target}")


def renameat2(dir_fd: int, old: str, new: str, flags: int) -> None:
    """``renameat2(dir_fd, old, dir_fd, new, flags)`` within one directory.

    Raises:
        OSError: EEXIST with ``RENAME_NOREPLACE`` when ``new`` exists, or any rename error.
    """
    result = _libc.syscall(
        _number("renameat2"),
        ctypes.c_int(dir_fd),
        os.fsencode(old),
        ctypes.c_int(dir_fd),
        os.fsencode(new),
        ctypes.c_uint(flags),
    )
    _check(int(result), f"rename {old!r}")
