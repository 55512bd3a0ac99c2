"""Errors of the library store and of projections: every refusal has a stable ``code``.

::

    GloveError
    └── LibraryError              anything glove.library raises on purpose; ``code`` is stable
        ├── LibraryRootError      the library root is unusable, and is never repaired:
        │                         library_root_missing, library_root_symlink,
        │                         library_root_not_directory, library_root_wrong_owner,
        │                         library_root_mode, library_root_unusable
        ├── SourceError           ``add`` refused the file it was given:
        │                         library_source_unreadable, library_source_not_regular,
        │                         library_source_too_large, library_source_changed
        ├── StoreWriteError       the store could not be written (a full disk, an I/O error):
        │                         library_write_failed
        ├── StoredBundleError     an entry of the store is not as the store leaves it (found
        │                         by ``verify`` and ``add``): library_bundle_mode,
        │                         library_stray_entry
        ├── ProjectionError       one bundle is refused by resolve or verification; nothing
        │   │                     is mounted
        │   ├── BundleNameError   projection_name_invalid, projection_name_absolute,
        │   │                     projection_name_traversal, projection_escape
        │   ├── BundleMissing     projection_missing
        │   ├── BundleUnsafe      projection_symlink, projection_cross_device,
        │   │                     projection_not_regular, projection_wrong_owner,
        │   │                     projection_hardlinked, projection_writable,
        │   │                     projection_unreadable
        │   └── BundleMismatch    projection_size_mismatch, projection_digest_mismatch,
        │                         projection_changed, projection_too_large
        ├── FreezeError           the verified bytes could not be frozen into a private
        │                         tmpfs: freeze_unavailable, freeze_not_permitted,
        │                         freeze_failed
        └── MountError            the frozen copy could not be mounted at its target:
                                  mount_target_invalid, mount_failed, mount_check_failed

A :class:`ProjectionError` says the bundle on disk is not what was asked for (somebody
changed, replaced, linked or loosened it); a :class:`FreezeError` or :class:`MountError`
says this kernel or this caller cannot do the step. The codes are contracts (receipts and
the CLI carry them): add, never rename. :data:`ERROR_CODES` lists every one.
"""

from __future__ import annotations

from typing import ClassVar, Final

from glove.errors import GloveError

__all__ = [
    "ERROR_CODES",
    "BundleMismatch",
    "BundleMissing",
    "BundleNameError",
    "BundleUnsafe",
    "FreezeError",
    "LibraryError",
    "LibraryRootError",
    "MountError",
    "ProjectionError",
    "SourceError",
    "StoreWriteError",
    "StoredBundleError",
]


class LibraryError(GloveError):
    """Base class of the errors of ``glove.library``.

    Attributes:
        code: the stable error code (one of the class's ``codes``).
        subject: what was refused (a path, a bundle name, a digest or a target), or ``""``.
    """

    #: The codes an instance of this class may carry.
    codes: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, code: str, message: str, *, subject: str = "") -> None:
        """Build the error.

        Raises:
            ValueError: ``code`` is not one of this class's codes (a bug in the caller).
        """
        if code not in self.codes:
            raise ValueError(f"{type(self).__name__} has no error code {code!r}")
        super().__init__(message)
        self.code = code
        self.subject = subject


class LibraryRootError(LibraryError):
    """The library root is missing, a symlink, not a directory, not ours or not 0700."""

    codes = frozenset(
        {
            "library_root_missing",
            "library_root_symlink",
            "library_root_not_directory",
            "library_root_wrong_owner",
            "library_root_mode",
            "library_root_unusable",
        }
    )


class SourceError(LibraryError):
    """``add`` refused its source file (unreadable, not regular, too large, changed)."""

    codes = frozenset(
        {
            "library_source_unreadable",
            "library_source_not_regular",
            "library_source_too_large",
            "library_source_changed",
        }
    )


class StoreWriteError(LibraryError):
    """A bundle could not be written into, or removed from, the store."""

    codes = frozenset({"library_write_failed"})


class StoredBundleError(LibraryError):
    """A store entry the store would never have left: a bundle whose mode is not 0400, a
    file or directory whose name is not a bundle's."""

    codes = frozenset({"library_bundle_mode", "library_stray_entry"})


class ProjectionError(LibraryError):
    """One bundle is refused by resolve or verification; nothing was mounted."""

    codes = frozenset()


class BundleNameError(ProjectionError):
    """The bundle reference is not ``sha256:<64 hex>`` / ``sha256-<64 hex>``, or escapes."""

    codes = frozenset(
        {
            "projection_name_invalid",
            "projection_name_absolute",
            "projection_name_traversal",
            "projection_escape",
        }
    )


class BundleMissing(ProjectionError):
    """No bundle of that digest is in the store."""

    codes = frozenset({"projection_missing"})


class BundleUnsafe(ProjectionError):
    """The bundle's name leads somewhere a bundle may never be, or its inode is unsafe."""

    codes = frozenset(
        {
            "projection_symlink",
            "projection_cross_device",
            "projection_not_regular",
            "projection_wrong_owner",
            "projection_hardlinked",
            "projection_writable",
            "projection_unreadable",
        }
    )


class BundleMismatch(ProjectionError):
    """The bundle's bytes are not the ones asked for, or changed while they were read."""

    codes = frozenset(
        {
            "projection_size_mismatch",
            "projection_digest_mismatch",
            "projection_changed",
            "projection_too_large",
        }
    )


class FreezeError(LibraryError):
    """The verified bytes could not be copied into a private read-only tmpfs."""

    codes = frozenset({"freeze_unavailable", "freeze_not_permitted", "freeze_failed"})


class MountError(LibraryError):
    """The frozen copy could not be mounted (or shown) at its target."""

    codes = frozenset({"mount_target_invalid", "mount_failed", "mount_check_failed"})


#: Every error code of the package, sorted.
ERROR_CODES: Final = tuple(
    sorted(
        LibraryRootError.codes
        | SourceError.codes
        | StoreWriteError.codes
        | StoredBundleError.codes
        | BundleNameError.codes
        | BundleMissing.codes
        | BundleUnsafe.codes
        | BundleMismatch.codes
        | FreezeError.codes
        | MountError.codes
    )
)
