"""Retained writable copies: a directory copied into a hard-sized ext4 image that persists.

The kernel refuses to mount ext4 inside a user namespace, so the launcher does it, and only
as real root: the image is created once (``mkfs.ext4 -d SOURCE`` copies the seed directory
in), attached to a loop device with ``LO_FLAGS_AUTOCLEAR``, and mounted with the new mount
API (``fsopen``/``fsconfig``/``fsmount``) as a *detached* mount that never appears in the
host's mount table. The sandbox init inherits the mount fd and attaches it with
``move_mount``. When the sandbox's mount namespace dies the filesystem is unmounted (its
journal flushed to the image) and the loop device detaches itself. The image size is the
hard limit; the init reports the bytes used.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
from pathlib import Path
from typing import Final

import msgspec

from glove.container._spec import Retained
from glove.container.errors import SandboxSetupError, SpecError
from glove.container.linux import _syscalls as sc

LOOP_CTL_GET_FREE: Final = 0x4C82
LOOP_CONFIGURE: Final = 0x4C0A
LO_FLAGS_AUTOCLEAR: Final = 4
#: How long mkfs may take to build and seed an image.
MKFS_TIMEOUT_S: Final = 120.0
MKFS: Final = "/usr/sbin/mkfs.ext4"


class _LoopInfo64(ctypes.Structure):
    _fields_ = [
        ("lo_device", ctypes.c_uint64),
        ("lo_inode", ctypes.c_uint64),
        ("lo_rdevice", ctypes.c_uint64),
        ("lo_offset", ctypes.c_uint64),
        ("lo_sizelimit", ctypes.c_uint64),
        ("lo_number", ctypes.c_uint32),
        ("lo_encrypt_type", ctypes.c_uint32),
        ("lo_encrypt_key_size", ctypes.c_uint32),
        ("lo_flags", ctypes.c_uint32),
        ("lo_file_name", ctypes.c_uint8 * 64),
        ("lo_crypt_name", ctypes.c_uint8 * 64),
        ("lo_encrypt_key", ctypes.c_uint8 * 32),
        ("lo_init", ctypes.c_uint64 * 2),
    ]


class _LoopConfig(ctypes.Structure):
    _fields_ = [
        ("fd", ctypes.c_uint32),
        ("block_size", ctypes.c_uint32),
        ("info", _LoopInfo64),
        ("reserved", ctypes.c_uint64 * 8),
    ]


class PreparedRetained(msgspec.Struct, frozen=True):
    """A retained copy mounted (detached) by the launcher, ready to attach inside."""

    mount_fd: int
    target: str
    image: str
    size: int


def _open_seed(seed: str) -> int:
    """Open the seed directory without following any link (it may sit in a workspace where
    a sandbox swapped it for a symlink to a host directory); mkfs then reads that very fd.

    Raises:
        SpecError: the seed is missing, not a directory, or reached through a symlink.
    """
    try:
        return sc.openat2(
            seed,
            os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC,
            sc.RESOLVE_NO_SYMLINKS | sc.RESOLVE_NO_MAGICLINKS,
        )
    except OSError as exc:
        raise SpecError(f"retained seed {seed} unusable (symlinks are refused): {exc}") from exc


def _create_image(spec: Retained) -> None:
    import subprocess  # only root launchers with retained copies need it

    seed_fd = _open_seed(spec.seed) if spec.seed is not None else -1
    try:
        fd = sc.open_no_symlinks(spec.image, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, spec.size)
        finally:
            os.close(fd)
        argv = [MKFS, "-q", "-F", "-t", "ext4", "-E", f"root_owner={os.geteuid()}:{os.getegid()}"]
        if seed_fd >= 0:
            argv += ["-d", f"/proc/self/fd/{seed_fd}"]
        done = subprocess.run(
            [*argv, spec.image],
            capture_output=True,
            timeout=MKFS_TIMEOUT_S,
            check=False,
            pass_fds=(seed_fd,) if seed_fd >= 0 else (),
        )
    finally:
        if seed_fd >= 0:
            os.close(seed_fd)
    if done.returncode != 0:
        with contextlib.suppress(OSError):
            Path(spec.image).unlink()
        message = done.stderr.decode(errors="replace").strip()
        raise SandboxSetupError(f"cannot build retained image {spec.image}: {message}")


def _exists_no_symlinks(image: str) -> bool:
    """Whether ``image`` exists, reached without any symlink.

    Raises:
        OSError: ELOOP when a symlink is on the way (never followed).
    """
    try:
        os.close(sc.open_no_symlinks(image, os.O_PATH))
    except FileNotFoundError:
        return False
    return True


def _attach_loop(image: str) -> tuple[int, str]:
    """Attach ``image`` to a free loop device (autoclear); return its open fd and path."""
    control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    try:
        number = fcntl.ioctl(control, LOOP_CTL_GET_FREE)
    finally:
        os.close(control)
    path = f"/dev/loop{number}"
    device = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    backing = sc.open_no_symlinks(image, os.O_RDWR)
    try:
        config = _LoopConfig(fd=backing, block_size=0)
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR
        fcntl.ioctl(device, LOOP_CONFIGURE, bytes(config))
    except OSError:
        os.close(device)
        raise
    finally:
        os.close(backing)
    return device, path


def _inside(path: str, tree: str) -> bool:
    # Compared as written (normalized, links not resolved): a path that reaches a writable
    # tree only through a link is refused as well, since opening it follows no links.
    path, tree = os.path.normpath(path), os.path.normpath(tree)
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def check_images_outside(items: tuple[Retained, ...], writable_sources: list[str]) -> None:
    """Refuse an image the sandbox itself could write to while it is mounted.

    Raises:
        SpecError: an image lies inside the workspace or a read-write bind.
    """
    for item in items:
        for tree in writable_sources:
            if _inside(item.image, tree):
                raise SpecError(
                    f"retained image {item.image} is inside {tree}, which the sandbox can "
                    "write: it could corrupt the mounted filesystem"
                )


def prepare_retained(items: tuple[Retained, ...]) -> list[PreparedRetained]:
    """Create (first time), loop-attach and mount each retained image, detached.

    Raises:
        SpecError: the launcher is not root (the kernel allows no other way).
        SandboxSetupError: an image could not be built, attached or mounted.
    """
    if not items:
        return []
    if os.geteuid() != 0:
        raise SpecError(
            "retained copies need a root launcher: ext4 images cannot be mounted inside a "
            "user namespace; use an ephemeral (tmpfs) copy instead"
        )
    prepared: list[PreparedRetained] = []
    try:
        for item in items:
            if not _exists_no_symlinks(item.image):
                _create_image(item)
            device, path = _attach_loop(item.image)
            try:
                mount_fd = sc.fsmount_ext4(path)
            finally:
                os.close(device)
            prepared.append(
                PreparedRetained(
                    mount_fd=mount_fd, target=item.target, image=item.image, size=item.size
                )
            )
    except OSError as exc:
        close_retained(prepared)
        raise SandboxSetupError(f"cannot mount retained image: {exc}") from exc
    except BaseException:
        close_retained(prepared)
        raise
    return prepared


def close_retained(prepared: list[PreparedRetained]) -> None:
    """Close the launcher's mount fds (the filesystem unmounts when the sandbox is gone)."""
    for item in prepared:
        with contextlib.suppress(OSError):
            os.close(item.mount_fd)
