"""A bundle or a frozen copy taken over from another process (gloved's launcher takes them
by SCM_RIGHTS): checked again on the way in, refused with its code when the descriptor is
not the file its record names, and the refused descriptor closed."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.library import (
    FREEZE_BIND_REMOUNT,
    FREEZE_DETACHED_TMPFS,
    FrozenProjection,
    LibraryError,
    OpenedBundle,
    freeze,
    open_bundle,
)
from tests.library.conftest import Owner, digest, make_store, put, root_only

pytestmark = root_only

ROOT = Owner("root", 0, 0)
SKILL = b"# a skill\n" * 1000


@pytest.fixture
def store(base: Path) -> Iterator[tuple[Path, int]]:
    """A root-owned store holding SKILL, and a descriptor of its root."""
    root = make_store(base, ROOT)
    put(root, SKILL, ROOT)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    yield root, fd
    os.close(fd)


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError as exc:
        return exc.errno == errno.EBADF
    return False


def _refused(call: object, fd: int) -> str:
    assert callable(call)
    with pytest.raises(LibraryError) as caught:
        call()
    assert _closed(fd), "a refused descriptor is closed"
    return caught.value.code


def test_an_opened_bundle_is_adopted_only_while_it_is_the_file_that_was_opened(
    store: tuple[Path, int],
) -> None:
    root, root_fd = store
    opened = open_bundle(root_fd, digest(SKILL), len(SKILL))
    with opened:

        def refused(fd: int, size: int = len(SKILL)) -> str:
            return _refused(lambda: OpenedBundle.adopt(opened.name, fd, size, opened.identity), fd)

        same = OpenedBundle.adopt(opened.name, os.dup(opened.fd), len(SKILL), opened.identity)
        with same:
            assert same.identity == opened.identity
        assert refused(os.dup(opened.fd), len(SKILL) + 1) == "projection_size_mismatch"
        other = root / "other"
        other.write_bytes(SKILL)
        other.chmod(0o400)
        assert refused(os.open(other, os.O_RDONLY | os.O_CLOEXEC)) == "projection_changed"
        stored = root / opened.name
        os.utime(stored, ns=(1, 1))  # its times moved since it was opened
        assert refused(os.dup(opened.fd)) == "projection_changed"
        os.link(stored, root / "a-second-name")
        assert refused(os.dup(opened.fd)) == "projection_hardlinked"


def test_a_frozen_copy_is_adopted_only_as_the_sealed_tmpfs_that_holds_it(
    store: tuple[Path, int],
) -> None:
    _, root_fd = store
    with open_bundle(root_fd, digest(SKILL), len(SKILL)) as opened:
        frozen = freeze(opened, method=FREEZE_DETACHED_TMPFS)
    with frozen:

        def adopt(fd: int, **changes: object) -> FrozenProjection:
            fields: dict[str, object] = {
                "name": frozen.digest,
                "size": frozen.size,
                "method": frozen.freeze_method,
                "mount_fd": fd,
                "inode": frozen.inode,
            }
            fields.update(changes)
            return FrozenProjection.adopt(**fields)  # type: ignore[arg-type]

        with adopt(os.dup(frozen.mount_fd)) as same:
            assert (same.name, same.digest, same.inode) == (
                frozen.name,
                frozen.digest,
                frozen.inode,
            )
        dev, ino = frozen.inode
        for changes in (
            {"inode": (dev, ino + 1)},
            {"inode": (dev + 1, ino)},
            {"size": frozen.size - 1},
            {"method": FREEZE_BIND_REMOUNT},
            {"name": "sha256:" + "0" * 64},
        ):
            fd = os.dup(frozen.mount_fd)
            assert _refused(lambda fd=fd, c=changes: adopt(fd, **c), fd) == "mount_check_failed"
        # A descriptor of another directory (a writable one here) is no frozen copy.
        fd = os.open("/var/tmp", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        assert _refused(lambda: adopt(fd), fd) == "mount_check_failed"
