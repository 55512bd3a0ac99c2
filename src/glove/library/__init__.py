"""The library: digest-named bundles in an owner-only store, verified, frozen and mounted
read-only into a sandbox, so the sandbox never sees a byte that was not verified.

Depends on no other Glove package but ``glove.errors``. The store, then a projection::

    library = Library.open(root, create=True)      # 0700, ours; refused, never repaired
    bundle = library.add(path)                     # Bundle(digest="sha256:...", size=N)
    library.list(); library.remove(digest); library.verify()   # VerifyReport

    opened = library.open_bundle(digest, size)     # openat2 beneath the pinned root; fstat
    frozen = freeze(opened)                        # copy + hash into a detached tmpfs
    attached = frozen.attach("/target/path")       # open_tree + mount_setattr + move_mount
    frozen.close(); opened.close()

A root launcher freezes before it clones the sandbox and its init attaches; an unprivileged
launcher opens the bundle and the sandbox's init, in its own user namespace, freezes and
attaches. See ``docs/library.md`` for the layout, the checks, the error codes and figures.
"""

from glove.library._freeze import (
    FREEZE_BIND_REMOUNT,
    FREEZE_DETACHED_TMPFS,
    FREEZE_TMPFS_INODES,
    MOUNT_FLAGS,
    AttachedProjection,
    FreezeBatch,
    FrozenProjection,
    freeze,
    freeze_method_here,
)
from glove.library._names import (
    ALGORITHM,
    BUNDLE_NAME_PATTERN,
    bundle_name,
    digest_of,
    is_bundle_name,
)
from glove.library._resolve import (
    BUNDLE_MODE,
    COPY_CHUNK_BYTES,
    MAX_BUNDLE_BYTES,
    OPEN_FLAGS,
    RESOLVE_FLAGS,
    ROOT_MODE,
    OpenedBundle,
    check_root,
    open_bundle,
    read_verified,
)
from glove.library._store import Bundle, BundleProblem, Library, VerifyReport
from glove.library.errors import (
    ERROR_CODES,
    BundleMismatch,
    BundleMissing,
    BundleNameError,
    BundleUnsafe,
    FreezeError,
    LibraryError,
    LibraryRootError,
    MountError,
    ProjectionError,
    SourceError,
    StoredBundleError,
    StoreWriteError,
)

__all__ = [
    "ALGORITHM",
    "BUNDLE_MODE",
    "BUNDLE_NAME_PATTERN",
    "COPY_CHUNK_BYTES",
    "ERROR_CODES",
    "FREEZE_BIND_REMOUNT",
    "FREEZE_DETACHED_TMPFS",
    "FREEZE_TMPFS_INODES",
    "MAX_BUNDLE_BYTES",
    "MOUNT_FLAGS",
    "OPEN_FLAGS",
    "RESOLVE_FLAGS",
    "ROOT_MODE",
    "AttachedProjection",
    "Bundle",
    "BundleMismatch",
    "BundleMissing",
    "BundleNameError",
    "BundleProblem",
    "BundleUnsafe",
    "FreezeBatch",
    "FreezeError",
    "FrozenProjection",
    "Library",
    "LibraryError",
    "LibraryRootError",
    "MountError",
    "OpenedBundle",
    "ProjectionError",
    "SourceError",
    "StoreWriteError",
    "StoredBundleError",
    "VerifyReport",
    "bundle_name",
    "check_root",
    "digest_of",
    "freeze",
    "freeze_method_here",
    "is_bundle_name",
    "open_bundle",
    "read_verified",
]
