"""Run inside a gloved sandbox (its own python3, stdlib only): read a projection and try
everything an agent would against its mount; print one JSON report on stdout.

argv: TARGET
"""

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import subprocess
import sys

MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MNT_DETACH = 2
AT_EMPTY_PATH = 0x1000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOEXEC = 0x8
SYS_MOUNT_SETATTR = 442

libc = ctypes.CDLL(None, use_errno=True)


def _errno(result: int) -> int:
    return 0 if result == 0 else ctypes.get_errno()


def try_errno(call):
    try:
        call()
    except OSError as exc:
        return exc.errno or -1
    return 0


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def clear(target: str, bits: int) -> int:
    fd = os.open(target, os.O_PATH | os.O_CLOEXEC)
    try:
        attr = MountAttr(0, bits, 0, 0)
        result = libc.syscall(
            SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr)
        )
        return _errno(result)
    finally:
        os.close(fd)


def mountinfo(target: str) -> str:
    with open("/proc/self/mountinfo") as handle:
        lines = [line.strip() for line in handle if line.split()[4] == target]
    return lines[-1] if lines else ""


def mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as handle:
        return [line.split()[4] for line in handle]


def descriptors() -> list[str]:
    names = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            names.append(os.readlink(f"/proc/self/fd/{name}"))
    return names


def read(target: str) -> bytes:
    with open(target, "rb") as handle:
        return handle.read()


def main() -> None:
    target = sys.argv[1]
    if not os.path.exists(target):  # a session without that projection: its baseline
        print(json.dumps({"fds": descriptors(), "mounts": mount_points()}))
        return
    path = target.encode()
    data = read(target)
    report = {
        "sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "write": try_errno(lambda: os.close(os.open(target, os.O_WRONLY | os.O_CLOEXEC))),
        "remount_rw": _errno(libc.mount(None, path, None, MS_REMOUNT | MS_BIND, None)),
        "remount_sb_rw": _errno(libc.mount(None, path, None, MS_REMOUNT, None)),
        "clear_rdonly": clear(target, MOUNT_ATTR_RDONLY),
        "clear_noexec": clear(target, MOUNT_ATTR_NOEXEC),
        "umount": _errno(libc.umount2(path, 0)),
        "umount_detach": _errno(libc.umount2(path, MNT_DETACH)),
        "mount_cmd": subprocess.run(
            ["mount", "-o", "remount,rw", target], capture_output=True, check=False
        ).returncode,
        "umount_cmd": subprocess.run(
            ["umount", target], capture_output=True, check=False
        ).returncode,
        "mountinfo": mountinfo(target),
        "fds": descriptors(),
        "mounts": mount_points(),
        "after": "sha256:" + hashlib.sha256(read(target)).hexdigest(),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    assert errno.EROFS  # stdlib only
    main()
