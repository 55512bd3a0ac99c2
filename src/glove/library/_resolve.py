"""Resolve a bundle beneath the pinned library root, check its inode, read it while hashing.

The steps, each refusal with its own code (``errors``)::

    bundle_name(ref)                       only sha256:<hex> / sha256-<hex>, nothing else
    openat2(root_fd, name,                 O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_NOCTTY|O_CLOEXEC
            BENEATH|NO_SYMLINKS|           no escape, no symlink, no /proc magic link, no
            NO_MAGICLINKS|NO_XDEV)         mount crossing; a FIFO opens without blocking
    fstat #1                               regular, ours, link count 1, no group/other
                                           write, the size the caller expects
    pread from 0 while hashing (and        bytes read == st_size, one more read finds EOF
    copying into a sink)
    fstat #2 == fstat #1                   on (dev, ino, size, mtime_ns, ctime_ns, nlink,
                                           mode): nothing changed while reading
    digest == the one asked for

``pread`` from offset 0 keeps the read independent of the descriptor's offset, which a
forked child shares. Without ``openat2`` (Linux < 5.6) the name, already checked to be flat,
is opened with ``openat(O_NOFOLLOW)`` and the mount is compared with the root's.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from types import TracebackType
from typing import Final

from glove.library import _syscalls as sc
from glove.library._names import bundle_name, digest_of, is_bundle_name, quoted
from glove.library.errors import (
    BundleMismatch,
    BundleMissing,
    BundleNameError,
    BundleUnsafe,
    LibraryRootError,
    ProjectionError,
)

#: How a bundle is opened: read-only, never following, never blocking, never a tty.
OPEN_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: How its name is resolved beneath the root descriptor.
RESOLVE_FLAGS: Final = (
    sc.RESOLVE_BENEATH | sc.RESOLVE_NO_SYMLINKS | sc.RESOLVE_NO_MAGICLINKS | sc.RESOLVE_NO_XDEV
)
#: The largest bundle the store takes or a projection reads, in bytes.
MAX_BUNDLE_BYTES: Final = 64 * 1024 * 1024
#: How much is read (and hashed, and copied) per system call, in bytes.
COPY_CHUNK_BYTES: Final = 1024 * 1024
#: The mode of the library root: owner-only.
ROOT_MODE: Final = 0o700
#: The mode of a stored bundle: owner read-only.
BUNDLE_MODE: Final = 0o400
_GROUP_OTHER_WRITE: Final = stat.S_IWGRP | stat.S_IWOTH


def identity(info: os.stat_result) -> tuple[int, ...]:
    """What must not change between the two ``fstat`` calls around a read.

    Not the owner: ``st_uid`` is translated by the caller's user namespace, and the two
    calls may straddle one (an unprivileged launcher opens, the sandbox's init reads). A
    chown moves ``st_ctime`` anyway, as a chmod, a link or an unlink do.
    """
    return (
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_nlink,
        info.st_mode,
    )


def check_root(fd: int, path: str = "") -> os.stat_result:
    """Check the pinned library root: a directory, owned by us, mode exactly 0700.

    Raises:
        LibraryRootError: ``library_root_not_directory``, ``library_root_wrong_owner`` or
            ``library_root_mode`` (never repaired: the owner decides what happened).
    """
    info = os.fstat(fd)
    where = path or f"descriptor {fd}"
    if not stat.S_ISDIR(info.st_mode):
        raise LibraryRootError(
            "library_root_not_directory", f"library root {where} is not a directory", subject=path
        )
    if info.st_uid != os.geteuid():
        raise LibraryRootError(
            "library_root_wrong_owner",
            f"library root {where} is owned by uid {info.st_uid}, not by this user "
            f"(uid {os.geteuid()}); it is never taken over",
            subject=path,
        )
    if stat.S_IMODE(info.st_mode) != ROOT_MODE:
        raise LibraryRootError(
            "library_root_mode",
            f"library root {where} has mode {stat.S_IMODE(info.st_mode):04o}, not 0700; "
            f"it is never repaired: check who changed it, then chmod 0700 {path or 'it'}",
            subject=path,
        )
    return info


def _check_same(name: str, info: os.stat_result, first: tuple[int, ...]) -> None:
    """Refuse a bundle whose identity is not ``first`` (another file, or this one changed).

    Raises:
        BundleMismatch: ``projection_changed``.
    """
    if identity(info) != tuple(first):
        raise BundleMismatch(
            "projection_changed",
            f"bundle {name} is not the file that was opened, or it changed since",
            subject=name,
        )


class OpenedBundle:
    """A bundle opened beneath the library root and checked; owns its descriptor.

    Attributes:
        name: the file name (``sha256-<hex>``).
        digest: the digest asked for (``sha256:<hex>``).
        size: the size asked for, which the first ``fstat`` matched.
        fd: the read-only, close-on-exec descriptor.
        first: the first ``fstat``.
    """

    __slots__ = ("digest", "fd", "first", "name", "size")

    def __init__(self, name: str, fd: int, first: os.stat_result) -> None:
        """Take ownership of ``fd`` (opened and checked by :func:`open_bundle`)."""
        self.name = name
        self.digest = digest_of(name)
        self.size = first.st_size
        self.fd = fd
        self.first = first

    @classmethod
    def adopt(cls, name: str, fd: int, size: int, first: tuple[int, ...]) -> OpenedBundle:
        """Take ``fd``, a bundle another process opened and checked (``first`` is the
        :func:`identity` of its first ``fstat``), checking it again: its type, owner, link
        count, write bits and ``size``, and that its identity has not moved.

        ``fd`` is closed when it is refused.

        Raises:
            BundleNameError: ``name`` is not a bundle name.
            BundleUnsafe: ``projection_not_regular``, ``projection_wrong_owner``,
                ``projection_hardlinked``, ``projection_writable``.
            BundleMismatch: ``projection_size_mismatch``, ``projection_too_large``,
                ``projection_changed`` (another file, or this one moved since it was opened).
        """
        try:
            name = bundle_name(name)
            info = os.fstat(fd)
            check_inode(name, info, size)
            _check_same(name, info, first)
        except BaseException:
            os.close(fd)
            raise
        return cls(name, fd, info)

    @property
    def identity(self) -> tuple[int, ...]:
        """The :func:`identity` of the first ``fstat`` (what :meth:`adopt` checks)."""
        return identity(self.first)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __enter__(self) -> OpenedBundle:
        """Use as a context manager that closes the descriptor."""
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the descriptor."""
        self.close()

    def __repr__(self) -> str:
        """Name and descriptor, for logs."""
        return f"OpenedBundle({self.name!r}, fd={self.fd})"


def _mount_id(fd: int) -> int | None:
    """The mount id of ``fd`` from ``/proc/self/fdinfo`` (``None`` without /proc)."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as handle:  # noqa: PTH123 (an fd's proc file)
            for line in handle:
                if line.startswith(b"mnt_id:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _open_flat(root_fd: int, name: str, flags: int) -> int:
    """``openat(O_NOFOLLOW)`` of a flat, checked name where ``openat2`` is missing."""
    fd = os.open(name, flags, dir_fd=root_fd)
    try:
        here, root = os.fstat(fd), os.fstat(root_fd)
        mine, theirs = _mount_id(fd), _mount_id(root_fd)
    except BaseException:
        os.close(fd)
        raise
    if here.st_dev != root.st_dev or (mine is not None and mine != theirs):
        os.close(fd)
        raise OSError(errno.EXDEV, "bundle is on another mount")
    return fd


def open_beneath(root_fd: int, name: str, flags: int = OPEN_FLAGS) -> int:
    """Open ``name`` beneath ``root_fd`` with :data:`RESOLVE_FLAGS` (``openat2``).

    ``name`` is passed as given: callers check it first (:func:`bundle_name`), this is the
    second line.

    Raises:
        OSError: ELOOP for a symlink, EXDEV for an escape or a mount crossing, ENOENT, ...
    """
    try:
        return sc.openat2(root_fd, name, flags, RESOLVE_FLAGS)
    except OSError as exc:
        if exc.errno != errno.ENOSYS or "/" in name or name in {".", ".."}:
            raise
    return _open_flat(root_fd, name, flags | os.O_NOFOLLOW)


def _diagnose_unopenable(root_fd: int, name: str, cause: OSError) -> ProjectionError:
    """Say why a bundle we may not read was refused: look at its inode without reading."""
    try:
        fd = open_beneath(root_fd, name, os.O_PATH | os.O_NOFOLLOW)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            check_inode(name, os.fstat(fd), None)
        except ProjectionError as refusal:
            return refusal
        finally:
            os.close(fd)
    return BundleUnsafe(
        "projection_unreadable",
        f"bundle {name} cannot be read: {os.strerror(cause.errno or 0)}",
        subject=name,
    )


def _refusal(root_fd: int, name: str, exc: OSError) -> ProjectionError:
    """Map an ``openat2`` failure to the refusal it means."""
    code = exc.errno
    if code in {errno.EACCES, errno.EPERM}:
        return _diagnose_unopenable(root_fd, name, exc)
    if code == errno.ENOENT:
        return BundleMissing(
            "projection_missing", f"no bundle {digest_of(name)} in the library", subject=name
        )
    if code == errno.EXDEV and not is_bundle_name(name):
        return BundleNameError(
            "projection_escape",
            f"bundle name {quoted(name)} resolves outside the library root",
            subject=name,
        )
    unsafe = {
        errno.ELOOP: (
            "projection_symlink",
            f"bundle {name} is a symlink (or goes through one); bundles are never followed",
        ),
        errno.EXDEV: (
            "projection_cross_device",
            f"bundle {name} is on another mount than the library root (a mount point)",
        ),
        errno.ENXIO: ("projection_not_regular", f"bundle {name} is not a regular file"),
    }
    refused, message = unsafe.get(
        code or 0,
        ("projection_unreadable", f"bundle {name} cannot be opened: {os.strerror(code or 0)}"),
    )
    return BundleUnsafe(refused, message, subject=name)


def check_inode(name: str, info: os.stat_result, size: int | None) -> None:
    """The checks on the first ``fstat``: type, owner, link count, write bits, size.

    Raises:
        BundleUnsafe: ``projection_not_regular``, ``projection_wrong_owner``,
            ``projection_hardlinked``, ``projection_writable``.
        BundleMismatch: ``projection_size_mismatch``, ``projection_too_large``,
            ``projection_changed`` (a link count of 0: deleted while opened).
    """
    if not stat.S_ISREG(info.st_mode):
        raise BundleUnsafe(
            "projection_not_regular",
            f"bundle {name} is not a regular file (mode {info.st_mode:07o})",
            subject=name,
        )
    if info.st_uid != os.geteuid():
        raise BundleUnsafe(
            "projection_wrong_owner",
            f"bundle {name} is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})",
            subject=name,
        )
    if info.st_nlink > 1:
        raise BundleUnsafe(
            "projection_hardlinked",
            f"bundle {name} has {info.st_nlink} links; a bundle has exactly one (another "
            "name could change it)",
            subject=name,
        )
    if info.st_nlink == 0:
        raise BundleMismatch(
            "projection_changed", f"bundle {name} was removed while it was opened", subject=name
        )
    if info.st_mode & _GROUP_OTHER_WRITE:
        raise BundleUnsafe(
            "projection_writable",
            f"bundle {name} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})",
            subject=name,
        )
    if size is not None and info.st_size != size:
        raise BundleMismatch(
            "projection_size_mismatch",
            f"bundle {name} has {info.st_size} bytes, not the {size} asked for",
            subject=name,
        )
    if info.st_size > MAX_BUNDLE_BYTES:
        raise BundleMismatch(
            "projection_too_large",
            f"bundle {name} has {info.st_size} bytes, more than the {MAX_BUNDLE_BYTES} a "
            "bundle may have",
            subject=name,
        )


def open_bundle(root_fd: int, ref: str, size: int | None) -> OpenedBundle:
    """Resolve ``ref`` (``sha256:<hex>``) beneath the pinned root and check its inode.

    ``size`` is the size the caller expects (the plan's); ``None`` takes the bundle's own
    (``verify`` of the whole store). The bytes are not read yet: :func:`read_verified`
    (or ``freeze``) reads, hashes and checks them.

    Raises:
        LibraryRootError: ``root_fd`` is not an owner-only directory of ours.
        ProjectionError: the reference, the name's resolution or the inode is refused
            (every code in ``errors``).
    """
    check_root(root_fd)
    name = bundle_name(ref)
    try:
        fd = open_beneath(root_fd, name)
    except OSError as exc:
        raise _refusal(root_fd, name, exc) from exc
    try:
        first = os.fstat(fd)
        check_inode(name, first, size)
    except BaseException:
        os.close(fd)
        raise
    return OpenedBundle(name, fd, first)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class ReadFailed(Exception):
    """Reading the source failed (the ``OSError`` is ``error``); a failed write to the sink
    stays an ``OSError``, so each caller can name the side that broke."""

    def __init__(self, error: OSError) -> None:
        """Wrap the read's ``OSError``."""
        super().__init__(str(error))
        self.error = error


def _pread(fd: int, count: int, offset: int) -> bytes:
    try:
        return os.pread(fd, count, offset)
    except OSError as exc:
        raise ReadFailed(exc) from exc


def copy_hashing(src_fd: int, size: int, sink_fd: int | None) -> tuple[str, int]:
    """Read ``size`` bytes of ``src_fd`` from offset 0, hashing each chunk and writing it to
    ``sink_fd`` (when given) exactly as hashed; return (hex digest, bytes read).

    One read past ``size`` looks for bytes that appeared meanwhile: the count returned is
    then ``size + 1``, so a caller comparing it with ``size`` refuses a file that grew as
    well as one that shrank.

    Raises:
        ReadFailed: a read of ``src_fd`` failed.
        OSError: a write to ``sink_fd`` failed.
    """
    hasher = hashlib.sha256()
    offset = 0
    while offset < size:
        chunk = _pread(src_fd, min(COPY_CHUNK_BYTES, size - offset), offset)
        if not chunk:
            break
        hasher.update(chunk)
        if sink_fd is not None:
            _write_all(sink_fd, chunk)
        offset += len(chunk)
    if offset == size and _pread(src_fd, 1, offset):
        offset += 1
    return hasher.hexdigest(), offset


def finish_read(bundle: OpenedBundle, hexdigest: str, count: int) -> None:
    """The checks after the read: every byte read, nothing changed, the digest asked for.

    Raises:
        BundleMismatch: ``projection_changed`` or ``projection_digest_mismatch``.
    """
    second = os.fstat(bundle.fd)
    if count != bundle.size or identity(second) != identity(bundle.first):
        raise BundleMismatch(
            "projection_changed",
            f"bundle {bundle.name} changed while it was read (read {count} bytes of "
            f"{bundle.size}; the file's identity, size or times moved)",
            subject=bundle.name,
        )
    got = digest_of(f"sha256-{hexdigest}")
    if got != bundle.digest:
        raise BundleMismatch(
            "projection_digest_mismatch",
            f"bundle {bundle.name} holds bytes of digest {got}, not {bundle.digest}",
            subject=bundle.name,
        )


def read_verified(bundle: OpenedBundle, sink_fd: int | None = None) -> None:
    """Read the whole bundle while hashing it (copying into ``sink_fd``), then check it.

    Raises:
        BundleMismatch: ``projection_changed`` or ``projection_digest_mismatch``.
        BundleUnsafe: ``projection_unreadable`` (an I/O error reading the bundle).
        OSError: writing to ``sink_fd`` failed (the caller names that step).
    """
    try:
        hexdigest, count = copy_hashing(bundle.fd, bundle.size, sink_fd)
    except ReadFailed as failed:
        raise BundleUnsafe(
            "projection_unreadable",
            f"bundle {bundle.name} could not be read: {os.strerror(failed.error.errno or 0)}",
            subject=bundle.name,
        ) from failed.error
    finish_read(bundle, hexdigest, count)
