"""The library store: an owner-only directory of digest-named, read-only bundles.

Layout (flat; nothing else belongs there)::

    ROOT/                        0700, owned by the store's user; refused, never repaired,
                                 if it is anything else
        sha256-<64 hex>          a bundle: regular file, 0400, link count 1, our uid,
                                 its bytes' SHA-256 is its name

``add`` writes a bundle the way a crash cannot leave half of: the bytes are hashed while
they are copied into an unnamed ``O_TMPFILE`` in the root (a ``.tmp-<random>`` name where
the filesystem has none), the file is fsynced, then linked into place under its digest name
without ever replacing one (``linkat`` fails with EEXIST; the named fallback uses
``renameat2(RENAME_NOREPLACE)``), and the root directory is fsynced. Adding bytes that are
already there is a no-op that re-verifies the stored copy. A source that changes while it is
read (size, identity or times between the two ``fstat`` calls, or a byte count that is not
its size) is refused.

Every call is blocking file I/O: gloved runs them on an executor it owns.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from types import TracebackType
from typing import Final

import msgspec

from glove.library import _syscalls as sc
from glove.library._names import bundle_name, digest_of, is_bundle_name, name_of, quoted
from glove.library._resolve import (
    BUNDLE_MODE,
    MAX_BUNDLE_BYTES,
    ROOT_MODE,
    OpenedBundle,
    ReadFailed,
    check_root,
    copy_hashing,
    identity,
    open_bundle,
    read_verified,
)
from glove.library.errors import (
    BundleMissing,
    LibraryRootError,
    ProjectionError,
    SourceError,
    StoredBundleError,
    StoreWriteError,
)

#: Prefix of the named temporary files of ``add`` where ``O_TMPFILE`` is missing.
TEMP_PREFIX: Final = ".tmp-"
_ROOT_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SOURCE_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: errnos of an ``O_TMPFILE`` open that mean "this filesystem has no unnamed files".
_NO_TMPFILE: Final = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL})


class Bundle(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A bundle in the store, as ``add`` and ``list`` report it.

    Attributes:
        digest: ``sha256:<64 lower-case hex>`` of its bytes.
        size: its size in bytes.
    """

    digest: str
    size: int


class BundleProblem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One entry of the store that ``verify`` refused.

    Attributes:
        name: the entry's file name (non-printable characters escaped).
        code: the stable error code (``projection_digest_mismatch``,
            ``library_bundle_mode``, ``library_stray_entry``, ...).
        message: what is wrong, for a person.
    """

    name: str
    code: str
    message: str


class VerifyReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``verify`` found: the bundles that passed and every entry that did not.

    Attributes:
        bundles: the bundles whose bytes, name, mode, owner and link count are right.
        problems: every other entry, by name.
    """

    bundles: tuple[Bundle, ...]
    problems: tuple[BundleProblem, ...]

    @property
    def ok(self) -> bool:
        """Whether every entry of the store passed."""
        return not self.problems


def _shown(name: str) -> str:
    """A directory entry's name as printable text (it may hold any byte but ``/``)."""
    text = os.fsencode(name).decode("utf-8", "backslashreplace")
    return text if text.isprintable() else repr(text)[1:-1]


def _root_refusal(path: str, exc: OSError) -> LibraryRootError:
    """Map a failed open of the root to its code (the path is looked at without following)."""
    try:
        info = os.lstat(path)
    except OSError:
        info = None
    if info is None or exc.errno == errno.ENOENT:
        return LibraryRootError(
            "library_root_missing", f"library root {path} does not exist", subject=path
        )
    if stat.S_ISLNK(info.st_mode):
        return LibraryRootError(
            "library_root_symlink",
            f"library root {path} is a symlink; it is never followed",
            subject=path,
        )
    if not stat.S_ISDIR(info.st_mode):
        return LibraryRootError(
            "library_root_not_directory", f"library root {path} is not a directory", subject=path
        )
    if info.st_uid != os.geteuid():
        return LibraryRootError(
            "library_root_wrong_owner",
            f"library root {path} is owned by uid {info.st_uid}, not by this user "
            f"(uid {os.geteuid()}); it is never taken over",
            subject=path,
        )
    return LibraryRootError(
        "library_root_unusable",
        f"library root {path} cannot be opened: {os.strerror(exc.errno or 0)}",
        subject=path,
    )


def _open_root(path: str, create: bool) -> int:
    if create:
        try:
            Path(path).mkdir(mode=ROOT_MODE)
        except FileExistsError:
            pass  # whatever is there is checked below, never changed
        except OSError as exc:
            raise LibraryRootError(
                "library_root_unusable",
                f"cannot create library root {path}: {os.strerror(exc.errno or 0)}",
                subject=path,
            ) from exc
    try:
        fd = os.open(path, _ROOT_FLAGS)
    except OSError as exc:
        raise _root_refusal(path, exc) from exc
    try:
        check_root(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_failed(what: str, exc: OSError) -> StoreWriteError:
    return StoreWriteError(
        "library_write_failed", f"cannot {what}: {os.strerror(exc.errno or 0)}", subject=what
    )


class Library:
    """The library store at one root directory, pinned by an open descriptor.

    ``Library.open(path)`` opens (or, with ``create=True``, makes) the root; every method
    works through the descriptor and checks the root again first, so a root that was
    loosened after it was opened is refused too.
    """

    __slots__ = ("_fd", "_path")

    def __init__(self, path: str, root_fd: int) -> None:
        """Take ownership of ``root_fd``; use :meth:`open` instead."""
        self._path = path
        self._fd = root_fd

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False) -> Library:
        """Open the store at ``path``; with ``create``, make the directory (0700) if absent.

        Raises:
            LibraryRootError: the root is missing, a symlink, not a directory, not ours, not
                mode 0700, or cannot be opened. It is never created over or repaired.
        """
        text = os.fspath(path)
        return cls(text, _open_root(text, create))

    @property
    def path(self) -> str:
        """The root's path, as given."""
        return self._path

    @property
    def root_fd(self) -> int:
        """The pinned root descriptor (close-on-exec; owned by this object)."""
        if self._fd < 0:
            raise LibraryRootError(
                "library_root_unusable", "the library was closed", subject=self._path
            )
        return self._fd

    def close(self) -> None:
        """Close the root descriptor (idempotent)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> Library:
        """Use as a context manager that closes the root."""
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the root."""
        self.close()

    def _root(self) -> int:
        fd = self.root_fd
        check_root(fd, self._path)
        return fd

    # -- add -------------------------------------------------------------------------------

    def add(self, source: str | os.PathLike[str]) -> Bundle:
        """Copy ``source`` into the store as a bundle; return its digest and size.

        Adding bytes that are already stored changes nothing (the stored copy is verified).

        Raises:
            LibraryRootError: the root is no longer safe.
            SourceError: the source cannot be read, is not a regular file, is larger than
                :data:`~glove.library.MAX_BUNDLE_BYTES`, or changed while it was read.
            StoreWriteError: the bundle could not be written (no space, I/O error).
            ProjectionError, StoredBundleError: the same bytes are stored already, but the
                stored copy is damaged (its code says how; it is left for the owner).
        """
        root = self._root()
        path = os.fspath(source)
        try:
            src = os.open(path, _SOURCE_FLAGS)
        except OSError as exc:
            raise SourceError(
                "library_source_unreadable",
                f"cannot open {path}: {os.strerror(exc.errno or 0)}",
                subject=path,
            ) from exc
        try:
            name, size, placed = self._copy_in(root, path, src)
        finally:
            os.close(src)
        if placed:
            try:
                os.fsync(root)
            except OSError as exc:
                raise _write_failed("sync the library root", exc) from exc
        else:
            self._check_stored(root, name, size)
        return Bundle(digest=digest_of(name), size=size)

    def _copy_in(self, root: int, path: str, src: int) -> tuple[str, int, bool]:
        """Hash ``src`` into a temporary file and link it under its digest name."""
        first = os.fstat(src)
        if not stat.S_ISREG(first.st_mode):
            raise SourceError(
                "library_source_not_regular", f"{path} is not a regular file", subject=path
            )
        if first.st_size > MAX_BUNDLE_BYTES:
            raise SourceError(
                "library_source_too_large",
                f"{path} has {first.st_size} bytes; a bundle may have {MAX_BUNDLE_BYTES}",
                subject=path,
            )
        tmp, tmp_name = self._temporary(root)
        try:
            try:
                hexdigest, count = copy_hashing(src, first.st_size, tmp)
            except ReadFailed as failed:
                raise SourceError(
                    "library_source_unreadable",
                    f"cannot read {path}: {os.strerror(failed.error.errno or 0)}",
                    subject=path,
                ) from failed.error
            second = os.fstat(src)
            if count != first.st_size or identity(second) != identity(first):
                raise SourceError(
                    "library_source_changed",
                    f"{path} changed while it was read ({count} bytes read of "
                    f"{first.st_size}); nothing was added",
                    subject=path,
                )
            os.fchmod(tmp, BUNDLE_MODE)
            os.fsync(tmp)
            name = name_of(hexdigest)
            placed = self._place(root, tmp, tmp_name, name)
        except OSError as exc:
            raise _write_failed("write the bundle", exc) from exc
        finally:
            os.close(tmp)
            if tmp_name is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp_name, dir_fd=root)
        return name, first.st_size, placed

    @staticmethod
    def _temporary(root: int) -> tuple[int, str | None]:
        """An unnamed file in the root (``O_TMPFILE``), else a uniquely named one."""
        if Path("/proc/self/fd").is_dir():  # linking an unnamed file goes through /proc
            try:
                fd = os.open(
                    ".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, BUNDLE_MODE, dir_fd=root
                )
                return fd, None
            except OSError as exc:
                if exc.errno not in _NO_TMPFILE:
                    raise _write_failed("create a temporary file", exc) from exc
        name = TEMP_PREFIX + secrets.token_hex(8)
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(name, flags, BUNDLE_MODE, dir_fd=root), name
        except OSError as exc:
            raise _write_failed("create a temporary file", exc) from exc

    @staticmethod
    def _place(root: int, tmp: int, tmp_name: str | None, name: str) -> bool:
        """Give the written file its digest name, never replacing one; False if it exists.

        Raises:
            OSError: the link or rename failed otherwise.
        """
        try:
            if tmp_name is None:
                os.link(f"/proc/self/fd/{tmp}", name, dst_dir_fd=root, follow_symlinks=True)
                return True
            try:
                sc.renameat2(root, tmp_name, name, sc.RENAME_NOREPLACE)
            except OSError as exc:
                if exc.errno != errno.EINVAL:  # no RENAME_NOREPLACE on this filesystem
                    raise
                os.link(tmp_name, name, src_dir_fd=root, dst_dir_fd=root)
            return True
        except FileExistsError:
            return False

    # -- list, remove ------------------------------------------------------------------------

    def list(self) -> tuple[Bundle, ...]:
        """Every bundle in the store (regular files with a bundle name), by digest.

        Nothing is hashed: :meth:`verify` does that.

        Raises:
            LibraryRootError: the root is no longer safe, or cannot be read.
        """
        root = self._root()
        found: builtins.list[Bundle] = []
        for name in self._names(root):
            if not is_bundle_name(name):
                continue
            with contextlib.suppress(FileNotFoundError):
                info = os.stat(name, dir_fd=root, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    found.append(Bundle(digest=digest_of(name), size=info.st_size))
        return tuple(found)

    def _names(self, root: int) -> tuple[str, ...]:
        try:
            return tuple(sorted(os.listdir(root)))
        except OSError as exc:
            raise LibraryRootError(
                "library_root_unusable",
                f"cannot list library root {self._path}: {os.strerror(exc.errno or 0)}",
                subject=self._path,
            ) from exc

    def remove(self, ref: str) -> None:
        """Remove the bundle ``ref`` (``sha256:<hex>``).

        Raises:
            LibraryRootError: the root is no longer safe.
            BundleNameError: ``ref`` is not a digest.
            BundleMissing: no such bundle.
            StoreWriteError: it could not be removed.
        """
        root = self._root()
        name = bundle_name(ref)
        try:
            os.unlink(name, dir_fd=root)
        except FileNotFoundError as exc:
            raise BundleMissing(
                "projection_missing", f"no bundle {digest_of(name)} in the library", subject=ref
            ) from exc
        except OSError as exc:
            raise _write_failed(f"remove bundle {name}", exc) from exc
        try:
            os.fsync(root)
        except OSError as exc:
            raise _write_failed("sync the library root", exc) from exc

    # -- verify ------------------------------------------------------------------------------

    def open_bundle(self, ref: str, size: int | None) -> OpenedBundle:
        """Resolve ``ref`` beneath the pinned root and check its inode (see ``open_bundle``).

        Raises:
            LibraryRootError: the root is no longer safe.
            ProjectionError: the bundle is refused (its code says why).
        """
        return open_bundle(self._root(), ref, size)

    @staticmethod
    def _check_stored(root: int, name: str, size: int | None) -> Bundle:
        """Everything a stored bundle must be, its bytes re-hashed.

        Raises:
            ProjectionError: what resolving and reading it refuses.
            StoredBundleError: ``library_bundle_mode`` (not exactly 0400).
        """
        with open_bundle(root, name, size) as bundle:
            mode = stat.S_IMODE(bundle.first.st_mode)
            if mode != BUNDLE_MODE:
                raise StoredBundleError(
                    "library_bundle_mode",
                    f"bundle {name} has mode {mode:04o}, not 0400",
                    subject=name,
                )
            read_verified(bundle)
            return Bundle(digest=bundle.digest, size=bundle.size)

    def verify(self) -> VerifyReport:
        """Re-hash every bundle; report each entry whose bytes, name, mode, owner, type or
        link count is wrong (nothing is changed or removed).

        Raises:
            LibraryRootError: the root is no longer safe, or cannot be read.
        """
        root = self._root()
        bundles: builtins.list[Bundle] = []
        problems: builtins.list[BundleProblem] = []
        for name in self._names(root):
            shown = _shown(name)
            if not is_bundle_name(name):
                what = (
                    "a temporary file left by an interrupted add"
                    if name.startswith(TEMP_PREFIX)
                    else "not a bundle name (sha256-<64 hex>)"
                )
                problems.append(
                    BundleProblem(
                        name=shown,
                        code="library_stray_entry",
                        message=f"{quoted(shown)} is {what}",
                    )
                )
                continue
            try:
                bundles.append(self._check_stored(root, name, None))
            except (ProjectionError, StoredBundleError) as refused:
                problems.append(BundleProblem(name=shown, code=refused.code, message=str(refused)))
        return VerifyReport(bundles=tuple(bundles), problems=tuple(problems))
