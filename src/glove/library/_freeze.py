"""Freeze a verified bundle into a private tmpfs and mount that copy read-only at a target.

Binding the stored bundle itself would show its *mutable* inode: whoever can write the store
(the owner's other processes) could change the bytes after they were verified. So the bytes
are copied, hashed as they are written, into a filesystem nobody else can reach, and only
that copy is ever mounted::

    host (root launcher), or the sandbox's init in its own user namespace
      freeze(bundle)
        fsopen("tmpfs"); fsconfig(size=<pages>, nr_inodes=4, mode=0700); fsmount
            a tmpfs that is in no mount table: reachable only through its descriptor
        copy + hash + fstat checks (``_resolve.read_verified``) into <tmpfs>/sha256-<hex>
        fspick + fsconfig(ro) + RECONFIGURE      the superblock itself read-only
        mount_setattr(RDONLY)                    and the detached mount
      -> FrozenProjection (owns the mount fd; passes to a child through clone)

    the sandbox's init, in the sandbox's mount namespace, before pivot_root
      frozen.attach(target)
        open_tree(mount_fd, name, OPEN_TREE_CLONE|OPEN_TREE_CLOEXEC)   just that file
        mount_setattr(RDONLY|NOSUID|NODEV|NOEXEC, propagation=private)
        move_mount(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) onto the target's fd
        check: the target shows the frozen inode, with all four flags

Where the new mount API is missing (``fsopen`` fails with ENOSYS, or with EPERM as under a
container runtime's seccomp profile) and the caller named a ``fallback_dir`` in a private
mount namespace, the copy goes into a tmpfs mounted with ``mount(2)`` on a fresh 0700
directory there, remounted read-only; ``attach`` bind-mounts the copy and remounts the bind
``ro,nosuid,nodev,noexec``. :attr:`FrozenProjection.freeze_method` says which was used.

When the mount was made in the sandbox's user namespace (or copied into a less privileged
one) its flags are locked: a process there without ``CAP_SYS_ADMIN`` over the namespace's
owner (every agent: the init drops all capabilities before exec) can neither remount,
unmount nor clear them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Final, NamedTuple

import msgspec

from glove.library import _syscalls as sc
from glove.library._names import bundle_name, digest_of
from glove.library._resolve import BUNDLE_MODE, OpenedBundle, read_verified
from glove.library.errors import FreezeError, MountError

#: ``freeze_method`` of a copy in a detached tmpfs, attached with the new mount API.
FREEZE_DETACHED_TMPFS: Final = "detached-tmpfs"
#: ``freeze_method`` of the fallback: a tmpfs mounted in a private directory, bind + remount.
FREEZE_BIND_REMOUNT: Final = "tmpfs-bind-remount"
#: The flags every projection is mounted with, as mountinfo spells them.
MOUNT_FLAGS: Final = ("ro", "nosuid", "nodev", "noexec")
#: Inodes of a freeze tmpfs: its root and the one file (0 would mean unlimited).
FREEZE_TMPFS_INODES: Final = 4
_PAGE_BYTES: Final = os.sysconf("SC_PAGESIZE")
_MOUNT_ATTRS: Final = (
    sc.MOUNT_ATTR_RDONLY | sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV | sc.MOUNT_ATTR_NOEXEC
)
_MS_FLAGS: Final = sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC
_ST_FLAGS: Final = os.ST_RDONLY | os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC
_O_PATH: Final = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_COPY: Final = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Held while a copy's writable descriptor is open; every ``os.fork`` of this process waits
#: for it (``os.register_at_fork``). A fork in another thread would otherwise copy that
#: descriptor into the child (close-on-exec acts only at exec), and while the child holds
#: it the kernel refuses to make the tmpfs read-only (EBUSY): a multi-threaded launcher
#: such as gloved forks other sessions' sandboxes while it freezes.
_WRITING: Final = threading.Lock()
#: Tries of the seal when a writer outside this process's forks (a ``subprocess`` child
#: between its fork and its exec) still holds the copy, and the pause between them.
SEAL_TRIES: Final = 5
SEAL_PAUSE_S: Final = 0.002


def _release_after_fork() -> None:
    if _WRITING.locked():
        _WRITING.release()


os.register_at_fork(
    before=_WRITING.acquire, after_in_parent=_WRITING.release, after_in_child=_release_after_fork
)


class AttachedProjection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A frozen copy mounted at its target: what a receipt commits.

    Attributes:
        target: the path it is mounted at (as given to ``attach``).
        digest: ``sha256:<hex>`` of the bytes mounted.
        size: their size in bytes.
        freeze_method: :data:`FREEZE_DETACHED_TMPFS` or :data:`FREEZE_BIND_REMOUNT`.
        mount_flags: :data:`MOUNT_FLAGS`, checked on the mounted target.
    """

    target: str
    digest: str
    size: int
    freeze_method: str
    mount_flags: tuple[str, ...] = MOUNT_FLAGS


def _tmpfs_bytes(size: int) -> int:
    """The freeze tmpfs's size limit: the file's pages, never 0 (which means unlimited)."""
    return max(_PAGE_BYTES, -(-size // _PAGE_BYTES) * _PAGE_BYTES)


def _failed(step: str, exc: OSError) -> FreezeError:
    return FreezeError("freeze_failed", f"cannot {step}: {os.strerror(exc.errno or 0)}")


def _mount_failed(target: str, step: str, exc: OSError) -> MountError:
    hint = ""
    if exc.errno in sc.API_MISSING_ERRNOS:
        hint = " (the new mount API is missing or filtered here, or this process lacks "
        hint += "CAP_SYS_ADMIN over its mount namespace)"
    return MountError(
        "mount_failed",
        f"cannot mount the projection at {target}: {step}: {os.strerror(exc.errno or 0)}{hint}",
        subject=target,
    )


class _Copy(NamedTuple):
    """What a frozen copy keeps of its bundle (an adopted copy has no bundle here)."""

    name: str
    digest: str
    size: int


def _check_adopted(
    name: str, size: int, method: str, mount_fd: int, inode: tuple[int, int]
) -> None:
    """Refuse ``mount_fd`` unless it is the sealed detached tmpfs holding the copy described.

    Raises:
        MountError: ``mount_check_failed``.
    """

    def refused(why: str) -> MountError:
        return MountError("mount_check_failed", f"the frozen copy of {name} {why}", subject=name)

    if method != FREEZE_DETACHED_TMPFS:
        raise refused(f"was frozen with {method!r}: only a detached tmpfs crosses processes")
    try:
        root = os.fstat(mount_fd)
        flags = os.fstatvfs(mount_fd).f_flag
        copy = os.open(name, _O_PATH, dir_fd=mount_fd)  # a bundle name: one component
    except OSError as exc:
        raise refused(f"cannot be checked: {os.strerror(exc.errno or 0)}") from exc
    try:
        info = os.fstat(copy)
    finally:
        os.close(copy)
    if not stat.S_ISDIR(root.st_mode) or root.st_dev != inode[0]:
        raise refused("is not in the tmpfs that was frozen")
    if not flags & os.ST_RDONLY:
        raise refused("is in a tmpfs that is not read-only")
    if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != tuple(inode):
        raise refused("is not the file that was frozen")
    if info.st_size != size:
        raise refused(f"has {info.st_size} bytes, not {size}")


class FrozenProjection:
    """A verified bundle's bytes in a private read-only tmpfs; owns its descriptors.

    Made by :func:`freeze`. :meth:`attach` mounts the copy at a target in the *current*
    mount namespace; :meth:`close` releases the tmpfs (mounts made from it stay). Every
    descriptor is close-on-exec; :attr:`descriptors` lists them for a launcher that keeps
    them across ``clone``.

    Attributes:
        name: the copy's file name in the tmpfs (``sha256-<hex>``).
        digest: ``sha256:<hex>`` of the copy, as hashed while it was written.
        size: its size in bytes.
        freeze_method: :data:`FREEZE_DETACHED_TMPFS` or :data:`FREEZE_BIND_REMOUNT`.
        mount_fd: the detached tmpfs's mount (the fallback: its root directory, O_PATH).
        inode: (st_dev, st_ino) of the copy, which the target must show once attached.
    """

    __slots__ = (
        "_dir",
        "_parked",
        "_shared",
        "digest",
        "freeze_method",
        "inode",
        "mount_fd",
        "name",
        "size",
    )

    def __init__(
        self,
        bundle: OpenedBundle | _Copy,
        method: str,
        mount_fd: int,
        inode: tuple[int, int],
        directory: str = "",
        *,
        shared: list[bool] | None = None,
    ) -> None:
        """Take ownership of ``mount_fd`` (and ``directory``, the fallback's mount point).

        ``shared`` is the parked flag of a tmpfs several projections share (each holds its
        own descriptor of it: :class:`FreezeBatch`); it is parked once."""
        self.name = bundle.name
        self.digest = bundle.digest
        self.size = bundle.size
        self.freeze_method = method
        self.mount_fd = mount_fd
        self.inode = inode
        self._dir = directory
        self._parked = False
        self._shared = shared

    @classmethod
    def adopt(
        cls,
        *,
        name: str,
        size: int,
        method: str,
        mount_fd: int,
        inode: tuple[int, int],
        shared: list[bool] | None = None,
    ) -> FrozenProjection:
        """Take ``mount_fd``, a copy another process froze (:func:`freeze`, a detached
        tmpfs), checking it again: the tmpfs is read-only and holds ``name``, a regular file
        of ``size`` bytes whose ``(st_dev, st_ino)`` is ``inode``. ``shared`` as for the
        constructor (copies of one :class:`FreezeBatch` share one flag).

        ``mount_fd`` is closed when it is refused.

        Raises:
            BundleNameError: ``name`` is not a bundle name.
            MountError: ``mount_check_failed`` (another method, a writable tmpfs, another
                file or size than was frozen).
        """
        try:
            name = bundle_name(name)
            _check_adopted(name, size, method, mount_fd, inode)
        except BaseException:
            os.close(mount_fd)
            raise
        copy = _Copy(name, digest_of(name), size)
        return cls(copy, method, mount_fd, (inode[0], inode[1]), shared=shared)

    @property
    def descriptors(self) -> tuple[int, ...]:
        """The descriptors :meth:`attach` needs (empty once closed)."""
        return (self.mount_fd,) if self.mount_fd >= 0 else ()

    def attach(
        self, target: str, *, dir_fd: int | None = None, create: bool = True
    ) -> AttachedProjection:
        """Mount the frozen copy at ``target``, read-only, nosuid, nodev, noexec.

        ``target`` is an absolute path, or a path beneath ``dir_fd`` (a new root being
        built), resolved without following any symlink. With ``create`` a missing last
        component is created as an empty file; its parent must exist. The caller is in a
        private mount namespace (attaching under a shared mount would propagate).

        Raises:
            MountError: ``mount_target_invalid`` (not a file, a symlink on the way, ...),
                ``mount_failed`` (the kernel refused a step; nothing stays mounted) or
                ``mount_check_failed`` (the target does not show the copy with its flags;
                what was attached is detached again).
        """
        if self.mount_fd < 0:
            raise MountError("mount_failed", "the frozen projection was closed", subject=target)
        point = _mount_point(target, dir_fd, create)
        try:
            if self.freeze_method == FREEZE_DETACHED_TMPFS:
                self._attach_detached(target, point)
            else:
                self._attach_bind(target, point, dir_fd)
        finally:
            os.close(point)
        _check_attached(target, dir_fd, self.inode)
        return AttachedProjection(
            target=target, digest=self.digest, size=self.size, freeze_method=self.freeze_method
        )

    def _attach_detached(self, target: str, point: int) -> None:
        try:
            tree = sc.open_tree_clone(self.mount_fd, self.name)
        except OSError as exc:
            raise _mount_failed(target, "open_tree", exc) from exc
        try:
            # Flags go on before the clone is attached anywhere: it is never visible without
            # them. Private: nothing mounted on it later propagates anywhere.
            sc.mount_setattr(tree, _MOUNT_ATTRS, propagation=sc.MS_PRIVATE)
            sc.move_mount(tree, point)
        except OSError as exc:
            raise _mount_failed(target, exc.strerror or "mount_setattr/move_mount", exc) from exc
        finally:
            os.close(tree)

    def _attach_bind(self, target: str, point: int, dir_fd: int | None) -> None:
        # mount(2) resolves paths in the current namespace: the copy is opened again there
        # by path (no symlinks) and must be the inode that was frozen.
        # Beneath the tmpfs's own descriptor, not by its path: in a sandbox's init the
        # directory it is mounted on is covered by the new root's tmpfs by now.
        source = _open_path(self.name, self.mount_fd, target)
        try:
            info = os.fstat(source)
            if (info.st_dev, info.st_ino) != self.inode:
                raise MountError(
                    "mount_check_failed",
                    f"the frozen copy for {target} is not the file that was frozen",
                    subject=target,
                )
            sc.mount(f"/proc/self/fd/{source}", f"/proc/self/fd/{point}", None, sc.MS_BIND)
        except OSError as exc:
            raise _mount_failed(target, "bind mount", exc) from exc
        finally:
            os.close(source)
        # The point's descriptor still names the file under the bind: open the bind itself.
        bound = _open_path(_relative(target, dir_fd), dir_fd, target)
        try:
            sc.mount(None, f"/proc/self/fd/{bound}", None, sc.MS_REMOUNT | sc.MS_BIND | _MS_FLAGS)
        except OSError as exc:
            _detach(f"/proc/self/fd/{bound}")
            raise _mount_failed(target, "remount read-only", exc) from exc
        finally:
            os.close(bound)

    def park(self, directory: str, *, dir_fd: int | None = None) -> None:
        """Attach the frozen tmpfs itself on the empty ``directory``, so that :meth:`close`
        costs nothing.

        Closing the last descriptor of a *detached* mount unmounts it on the spot, and the
        kernel waits for an RCU grace period there (2.6-20 ms measured on this kind of
        machine, per projection). A sandbox's init parks the tmpfs on a directory of the old
        root before ``pivot_root``: it then goes away with the old root's one detach, which
        the init does anyway. Only ever park in a private mount namespace that is about to
        lose that directory (the tmpfs root is 0700 and read-only, but it is a mount).
        :meth:`attach` works the same before and after. The fallback's tmpfs is mounted
        already: parking it only keeps :meth:`close` from unmounting it.

        Raises:
            MountError: ``mount_target_invalid`` (not a directory reached without symlinks)
                or ``mount_failed``.
        """
        if self.mount_fd < 0:
            raise MountError("mount_failed", "the frozen projection was closed", subject=directory)
        if self._shared is not None and self._shared[0]:
            self._parked = True  # the tmpfs this copy shares was parked already
        if self.freeze_method == FREEZE_DETACHED_TMPFS and not self._parked:
            point = _open_path(_relative(directory, dir_fd), dir_fd, directory, os.O_DIRECTORY)
            try:
                sc.move_mount(self.mount_fd, point)
            except OSError as exc:
                raise _mount_failed(directory, "move_mount", exc) from exc
            finally:
                os.close(point)
        self._parked = True
        if self._shared is not None:
            self._shared[0] = True

    def close(self) -> None:
        """Release the tmpfs: close its descriptor. An unparked fallback tmpfs is also
        unmounted (lazily, so binds made from it stay) and its directory removed; an
        unparked detached one is unmounted by the kernel (see :meth:`park`). Idempotent."""
        if self.mount_fd < 0:
            return
        fd, self.mount_fd = self.mount_fd, -1
        os.close(fd)
        if self._dir and not self._parked:
            _detach(self._dir)
            with contextlib.suppress(OSError):
                Path(self._dir).rmdir()

    def __enter__(self) -> FrozenProjection:
        """Use as a context manager that closes the tmpfs."""
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the tmpfs."""
        self.close()

    def __repr__(self) -> str:
        """Name, method and descriptor, for logs."""
        return f"FrozenProjection({self.name!r}, {self.freeze_method}, fd={self.mount_fd})"


def _detach(path: str) -> None:
    with contextlib.suppress(OSError):
        sc.umount2(path, sc.MNT_DETACH)


def _relative(target: str, dir_fd: int | None) -> str:
    """``target`` as resolved: beneath ``dir_fd`` without its leading slashes."""
    return target.lstrip("/") if dir_fd is not None else target


def _resolve_flags(dir_fd: int | None) -> int:
    flags = sc.RESOLVE_NO_SYMLINKS | sc.RESOLVE_NO_MAGICLINKS
    return flags | sc.RESOLVE_BENEATH if dir_fd is not None else flags


def _walk(base: int, path: str, flags: int) -> int:
    """``openat2(RESOLVE_NO_SYMLINKS)`` by hand where ``openat2`` is missing (Linux < 5.6):
    one ``O_PATH|O_NOFOLLOW`` component at a time, refusing symlinks and ``..``.

    Raises:
        OSError: ELOOP for a symlink, EXDEV for ``..``, or any open error.
    """
    parts = [part for part in path.split("/") if part and part != "."]
    if ".." in parts:
        raise OSError(errno.EXDEV, "'..' in a projection target")
    fd = os.open("/" if path.startswith("/") else ".", _O_PATH | os.O_DIRECTORY, dir_fd=base)
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        try:
            child = os.open(part, _O_PATH | (flags if last else os.O_DIRECTORY), dir_fd=fd)
        finally:
            os.close(fd)
        if stat.S_ISLNK(os.fstat(child).st_mode):
            os.close(child)
            raise OSError(errno.ELOOP, "symlink in a projection target")
        fd = child
    return fd


def _open_path(path: str, dir_fd: int | None, target: str, flags: int = 0) -> int:
    """``openat2(O_PATH|O_NOFOLLOW)`` of ``path`` with no symlink (beneath ``dir_fd``).

    Raises:
        MountError: ``mount_target_invalid``.
    """
    base = dir_fd if dir_fd is not None else sc.AT_FDCWD
    try:
        try:
            return sc.openat2(base, path, _O_PATH | flags, _resolve_flags(dir_fd))
        except OSError as exc:
            if exc.errno != errno.ENOSYS:
                raise
        return _walk(base, path, flags)
    except OSError as exc:
        why = "goes through a symlink" if exc.errno == errno.ELOOP else os.strerror(exc.errno or 0)
        raise MountError(
            "mount_target_invalid", f"projection target {target}: {why}", subject=target
        ) from exc


def _mount_point(target: str, dir_fd: int | None, create: bool) -> int:
    """Open (creating if asked) the regular file the copy is mounted on."""
    if dir_fd is None and not target.startswith("/"):
        raise MountError(
            "mount_target_invalid",
            f"projection target {target!r} is not an absolute path",
            subject=target,
        )
    relative = _relative(target, dir_fd)
    parent, _, leaf = relative.rpartition("/")
    if not leaf or leaf in {".", ".."}:
        raise MountError(
            "mount_target_invalid", f"projection target {target!r} names no file", subject=target
        )
    if create:
        where = parent or ("." if dir_fd is not None else "/")
        parent_fd = _open_path(where, dir_fd, target, os.O_DIRECTORY)
        try:
            with contextlib.suppress(FileExistsError):
                os.close(os.open(leaf, _CREATE_COPY, 0o644, dir_fd=parent_fd))
        except OSError as exc:
            raise MountError(
                "mount_target_invalid",
                f"cannot create projection target {target}: {os.strerror(exc.errno or 0)}",
                subject=target,
            ) from exc
        finally:
            os.close(parent_fd)
    point = _open_path(relative, dir_fd, target)
    if not stat.S_ISREG(os.fstat(point).st_mode):
        os.close(point)
        raise MountError(
            "mount_target_invalid",
            f"projection target {target} is not a regular file (a projection is one file)",
            subject=target,
        )
    return point


def _check_attached(target: str, dir_fd: int | None, inode: tuple[int, int]) -> None:
    """The target shows the frozen inode, read-only, nosuid, nodev, noexec; else detach it.

    Raises:
        MountError: ``mount_check_failed``.
    """
    shown = _open_path(_relative(target, dir_fd), dir_fd, target)
    try:
        info = os.fstat(shown)
        flags = os.fstatvfs(shown).f_flag
        if (info.st_dev, info.st_ino) == inode and flags & _ST_FLAGS == _ST_FLAGS:
            return
        _detach(f"/proc/self/fd/{shown}")
    finally:
        os.close(shown)
    raise MountError(
        "mount_check_failed",
        f"projection target {target} does not show the frozen copy read-only, nosuid, nodev "
        "and noexec after mounting; it was detached",
        subject=target,
    )


class FreezeBatch:
    """One detached tmpfs holding the copies of several bundles (a session's projections):
    one ``fsopen``/``fsmount``, one seal and one superblock to tear down instead of one per
    projection. :meth:`add` copies and checks each bundle (as :func:`freeze` does), and
    :meth:`seal` makes the tmpfs read-only and gives one :class:`FrozenProjection` per
    added bundle, each with its own descriptor of the shared mount (the tmpfs goes when the
    last is closed, or with the directory it was parked on). Each attach still mounts only
    its own file. The same bundle added twice is copied once.

    Raises (the constructor):
        FreezeError: ``freeze_unavailable`` (no new mount API: use :func:`freeze` with a
            fallback for each bundle instead), ``freeze_failed``.
    """

    __slots__ = ("_added", "_fd", "_inodes")

    def __init__(self, sizes: list[int]) -> None:
        """Make the tmpfs, sized for bundles of ``sizes`` (each file's pages)."""
        try:
            fs_fd = sc.fsopen("tmpfs")
        except OSError as exc:
            if exc.errno in sc.API_MISSING_ERRNOS:
                raise FreezeError(
                    "freeze_unavailable",
                    f"the new mount API is not available here (fsopen: "
                    f"{os.strerror(exc.errno or 0)})",
                ) from exc
            raise _failed("open a tmpfs context", exc) from exc
        try:
            try:
                total = sum(_tmpfs_bytes(size) for size in sizes) or _PAGE_BYTES
                sc.fsconfig_string(fs_fd, "size", str(total))
                sc.fsconfig_string(fs_fd, "nr_inodes", str(len(sizes) + FREEZE_TMPFS_INODES))
                sc.fsconfig_string(fs_fd, "mode", "0700")
                sc.fsconfig_create(fs_fd)
                self._fd = sc.fsmount(
                    fs_fd, sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV | sc.MOUNT_ATTR_NOEXEC
                )
            except OSError as exc:
                raise _failed("make the freeze tmpfs", exc) from exc
        finally:
            os.close(fs_fd)
        self._added: list[OpenedBundle] = []
        self._inodes: dict[str, tuple[int, int]] = {}

    def add(self, bundle: OpenedBundle) -> None:
        """Copy ``bundle`` in, hashing and checking it (the bundle stays open).

        Raises:
            ProjectionError: its bytes are refused (``read_verified``).
            FreezeError: ``freeze_failed``.
        """
        if self._fd < 0:
            raise FreezeError("freeze_failed", "the freeze batch was sealed or closed")
        if bundle.name not in self._inodes:
            self._inodes[bundle.name] = _copy_into(bundle, self._fd)
        self._added.append(bundle)

    def seal(self) -> list[FrozenProjection]:
        """Make the tmpfs read-only; one frozen projection per :meth:`add`, in order.

        Raises:
            FreezeError: ``freeze_failed`` (the batch is closed then).
        """
        try:
            _seal(self._fd)
            fds = [self._fd] + [os.dup(self._fd) for _ in self._added[1:]]
        except OSError as exc:
            self.close()
            raise _failed("seal the freeze tmpfs", exc) from exc
        if not self._added:
            os.close(self._fd)
        self._fd = -1  # owned by the frozen projections now
        shared = [False]
        return [
            FrozenProjection(
                bundle, FREEZE_DETACHED_TMPFS, fd, self._inodes[bundle.name], shared=shared
            )
            for bundle, fd in zip(self._added, fds, strict=False)
        ]

    def close(self) -> None:
        """Release the tmpfs unless it was sealed (idempotent)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def _copy_into(bundle: OpenedBundle, dir_fd: int) -> tuple[int, int]:
    """Copy the bundle into ``dir_fd`` (the freeze tmpfs) while hashing and checking it.

    Raises:
        ProjectionError: the bundle's bytes are refused (``read_verified``).
        FreezeError: ``freeze_failed`` (the copy could not be written).
    """
    with _WRITING:  # no fork copies the writable descriptor (see _WRITING)
        try:
            copy = os.open(bundle.name, _CREATE_COPY, BUNDLE_MODE, dir_fd=dir_fd)
        except OSError as exc:
            raise _failed("create the copy", exc) from exc
        try:
            try:
                read_verified(bundle, copy)
            except OSError as exc:
                raise _failed("write the copy", exc) from exc
            info = os.fstat(copy)
        finally:
            os.close(copy)
    if info.st_size != bundle.size:
        raise FreezeError("freeze_failed", f"the copy of {bundle.name} has the wrong size")
    return info.st_dev, info.st_ino


def _seal(mount_fd: int) -> None:
    """Make the freeze tmpfs's superblock and its detached mount read-only."""
    picked = sc.fspick(mount_fd)
    try:
        sc.fsconfig_flag(picked, "ro")
        for attempt in range(SEAL_TRIES):
            try:
                sc.fsconfig_reconfigure(picked)
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or attempt == SEAL_TRIES - 1:
                    raise
                time.sleep(SEAL_PAUSE_S)
    finally:
        os.close(picked)
    sc.mount_setattr(mount_fd, sc.MOUNT_ATTR_RDONLY)


def _freeze_detached(bundle: OpenedBundle, fs_fd: int) -> FrozenProjection:
    try:
        try:
            sc.fsconfig_string(fs_fd, "size", str(_tmpfs_bytes(bundle.size)))
            sc.fsconfig_string(fs_fd, "nr_inodes", str(FREEZE_TMPFS_INODES))
            sc.fsconfig_string(fs_fd, "mode", "0700")
            sc.fsconfig_create(fs_fd)
            mount_fd = sc.fsmount(
                fs_fd, sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV | sc.MOUNT_ATTR_NOEXEC
            )
        except OSError as exc:
            raise _failed("make the freeze tmpfs", exc) from exc
    finally:
        os.close(fs_fd)
    try:
        inode = _copy_into(bundle, mount_fd)
        try:
            _seal(mount_fd)
        except OSError as exc:
            raise _failed("seal the freeze tmpfs", exc) from exc
    except BaseException:
        os.close(mount_fd)
        raise
    return FrozenProjection(bundle, FREEZE_DETACHED_TMPFS, mount_fd, inode)


def _freeze_fallback(
    bundle: OpenedBundle, fallback_dir: str | None, why: OSError
) -> FrozenProjection:
    if fallback_dir is None:
        raise FreezeError(
            "freeze_unavailable",
            f"the new mount API is not available here (fsopen: {os.strerror(why.errno or 0)}) "
            "and no fallback directory in a private mount namespace was given",
        )
    try:
        directory = tempfile.mkdtemp(prefix=".glove-projection-", dir=fallback_dir)
    except OSError as exc:
        raise _failed(f"make a directory in {fallback_dir}", exc) from exc
    options = f"size={_tmpfs_bytes(bundle.size)},nr_inodes={FREEZE_TMPFS_INODES},mode=0700"
    try:
        sc.mount("tmpfs", directory, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC, options)
    except OSError as exc:
        Path(directory).rmdir()
        if exc.errno == errno.EPERM:
            raise FreezeError(
                "freeze_not_permitted",
                "freezing a projection needs CAP_SYS_ADMIN over the current mount namespace: "
                "run it as root or in the sandbox's user namespace",
            ) from exc
        raise _failed("mount the fallback tmpfs", exc) from exc
    try:
        dir_fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        _detach(directory)
        Path(directory).rmdir()
        raise _failed("open the fallback tmpfs", exc) from exc
    frozen = None
    try:
        inode = _copy_into(bundle, dir_fd)
        try:
            sc.mount(None, directory, None, sc.MS_REMOUNT | _MS_FLAGS)
        except OSError as exc:
            raise _failed("remount the fallback tmpfs read-only", exc) from exc
        frozen = FrozenProjection(bundle, FREEZE_BIND_REMOUNT, dir_fd, inode, directory)
    finally:
        if frozen is None:
            os.close(dir_fd)
            _detach(directory)
            with contextlib.suppress(OSError):
                Path(directory).rmdir()
    return frozen


def freeze(
    bundle: OpenedBundle, *, fallback_dir: str | None = None, method: str | None = None
) -> FrozenProjection:
    """Copy a checked bundle into a private tmpfs, hashing and verifying it as it is written.

    Runs where the caller has ``CAP_SYS_ADMIN`` over its user namespace: a root launcher
    before it clones the sandbox, or the sandbox's init in its own user namespace (the
    unprivileged case). The bundle stays open (the caller closes it).

    ``method`` None tries the new mount API and falls back (with ``fallback_dir``) where it
    is missing; :data:`FREEZE_DETACHED_TMPFS` never falls back; :data:`FREEZE_BIND_REMOUNT`
    uses the fallback only (a launcher that committed to it, see :func:`freeze_method_here`).

    Raises:
        ProjectionError: the bytes are refused (``projection_changed``,
            ``projection_digest_mismatch``, ``projection_unreadable``); nothing is kept.
        FreezeError: ``freeze_unavailable`` (no new mount API and no ``fallback_dir``),
            ``freeze_not_permitted`` (no mount privilege at all), ``freeze_failed``.
    """
    if method == FREEZE_BIND_REMOUNT:
        return _freeze_fallback(bundle, fallback_dir, OSError(errno.ENOSYS, "not used"))
    try:
        fs_fd = sc.fsopen("tmpfs")
    except OSError as exc:
        if exc.errno in sc.API_MISSING_ERRNOS:
            return _freeze_fallback(bundle, fallback_dir if method is None else None, exc)
        raise _failed("open a tmpfs context", exc) from exc
    return _freeze_detached(bundle, fs_fd)


def _probe_in_user_namespace() -> bool:
    """Whether ``fsopen("tmpfs")`` works in a fresh user and mount namespace (the one a
    sandbox's init has): asked in a forked child, which does nothing else."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 2
        try:
            if sc.unshare(sc.CLONE_NEWUSER | sc.CLONE_NEWNS) == 0:
                try:
                    os.close(sc.fsopen("tmpfs"))
                    code = 0
                except OSError as exc:
                    code = 1 if exc.errno in sc.API_MISSING_ERRNOS else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 1


_METHOD_HERE: list[str] = []


def freeze_method_here() -> str:
    """The freeze method this process's projections get, probed once per process.

    :data:`FREEZE_DETACHED_TMPFS` where ``fsopen("tmpfs")`` works (as root: here; else in a
    fresh user and mount namespace, as a sandbox's init has), :data:`FREEZE_BIND_REMOUNT`
    where it fails with ENOSYS (an old kernel) or EPERM (a seccomp profile). A launcher
    commits to it before the launch (the launch binding names it) and passes it to
    :func:`freeze` as ``method``, so a receipt always says the method that was used.
    """
    if not _METHOD_HERE:
        if os.geteuid() == 0:
            try:
                os.close(sc.fsopen("tmpfs"))
                works = True
            except OSError as exc:
                works = exc.errno not in sc.API_MISSING_ERRNOS
        else:
            works = _probe_in_user_namespace()
        _METHOD_HERE.append(FREEZE_DETACHED_TMPFS if works else FREEZE_BIND_REMOUNT)
    return _METHOD_HERE[0]
