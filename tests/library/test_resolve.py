"""Resolving a bundle beneath the pinned root and freezing it, in this process: the checks
in order, openat2's own refusals behind the name check, and a frozen copy that is private,
read-only and the exact bytes."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import socket
import threading
from pathlib import Path

import pytest

from glove.library import (
    FREEZE_DETACHED_TMPFS,
    MAX_BUNDLE_BYTES,
    BundleMismatch,
    BundleUnsafe,
    Library,
    LibraryRootError,
    OpenedBundle,
    freeze,
    open_bundle,
    read_verified,
)
from glove.library._resolve import copy_hashing, open_beneath
from tests.library.conftest import Owner, digest, put

ME = Owner("me", os.geteuid(), os.getegid())
DATA = b"resolve me\n" * 100


@pytest.fixture
def store(base: Path) -> tuple[Library, str, int]:
    """A store of ours holding DATA."""
    library = Library.open(base / "lib", create=True)
    ref, size = put(base / "lib", DATA, ME)
    return library, ref, size


def _fds() -> set[int]:
    """This process's open descriptors (the listing's own is closed again before return)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(name))
        except OSError:
            continue
        found.add(int(name))
    return found


def test_open_bundle_pins_a_close_on_exec_read_only_descriptor(
    store: tuple[Library, str, int],
) -> None:
    """open_bundle returns the bundle's name, digest, size and a descriptor that is
    read-only and close-on-exec; reading it verifies; close is idempotent."""
    library, ref, size = store
    bundle = library.open_bundle(ref, size)
    assert isinstance(bundle, OpenedBundle)
    assert (bundle.digest, bundle.size, bundle.name) == (ref, size, ref.replace(":", "-"))
    assert not os.get_inheritable(bundle.fd)
    assert fcntl.fcntl(bundle.fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    read_verified(bundle)
    fd = bundle.fd
    bundle.close()
    bundle.close()
    assert bundle.fd == -1
    with pytest.raises(OSError) as closed:
        os.fstat(fd)
    assert closed.value.errno == errno.EBADF


def test_openat2_refuses_what_the_name_check_would_have(base: Path) -> None:
    """Behind the name check, openat2 itself refuses '..' and absolute paths (EXDEV) and a
    symlink (ELOOP), beneath the root descriptor."""
    library = Library.open(base / "lib", create=True)
    (base / "outside").write_bytes(b"secret")
    (base / "lib" / "link").symlink_to(base / "outside")
    for name, code in (("../outside", errno.EXDEV), ("/etc/passwd", errno.EXDEV)):
        with pytest.raises(OSError) as caught:
            open_beneath(library.root_fd, name)
        assert caught.value.errno == code, name
    with pytest.raises(OSError) as link:
        open_beneath(library.root_fd, "link")
    assert link.value.errno == errno.ELOOP


def test_a_socket_bundle_is_not_regular(base: Path) -> None:
    """A Unix socket bound at a bundle's name (it has no open: ENXIO) is
    projection_not_regular, like a FIFO or a directory."""
    library = Library.open(base / "lib", create=True)
    name = "sha256-" + digest(b"sock").split(":")[1]
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(base / "lib" / name))
        with pytest.raises(BundleUnsafe) as caught:
            library.open_bundle(digest(b"sock"), 4)
    assert caught.value.code == "projection_not_regular"


def test_a_bundle_over_the_size_bound_is_refused_before_reading(base: Path) -> None:
    """A (sparse) bundle over MAX_BUNDLE_BYTES is projection_too_large at open."""
    library = Library.open(base / "lib", create=True)
    name = "sha256-" + "0" * 64
    with (base / "lib" / name).open("wb") as handle:
        handle.truncate(MAX_BUNDLE_BYTES + 1)
    (base / "lib" / name).chmod(0o400)
    with pytest.raises(BundleMismatch) as caught:
        library.open_bundle("sha256:" + "0" * 64, MAX_BUNDLE_BYTES + 1)
    assert caught.value.code == "projection_too_large"


def test_the_root_descriptor_is_checked_again(base: Path) -> None:
    """open_bundle re-checks the root it is given: a root loosened to 0755 is refused."""
    library = Library.open(base / "lib", create=True)
    ref, size = put(base / "lib", DATA, ME)
    (base / "lib").chmod(0o755)
    with pytest.raises(LibraryRootError) as caught:
        open_bundle(library.root_fd, ref, size)
    assert caught.value.code == "library_root_mode"


needs_mount_privilege = pytest.mark.skipif(
    os.geteuid() != 0, reason="fsopen needs CAP_SYS_ADMIN (the namespace tests cover the user)"
)


@needs_mount_privilege
def test_freeze_copies_into_a_private_sealed_tmpfs(store: tuple[Library, str, int]) -> None:
    """The frozen copy is the bundle's bytes in a tmpfs that no mount table shows, whose
    superblock and mount are read-only (a new file there fails with EROFS); close releases
    every descriptor."""
    library, ref, size = store
    mounts = Path("/proc/self/mountinfo").read_text()
    before = _fds()
    with library.open_bundle(ref, size) as bundle, freeze(bundle) as frozen:
        assert frozen.freeze_method == FREEZE_DETACHED_TMPFS
        assert (frozen.digest, frozen.size, frozen.name) == (ref, size, bundle.name)
        assert len(frozen.descriptors) == 1
        assert not os.get_inheritable(frozen.mount_fd)
        copy = os.open(frozen.name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=frozen.mount_fd)
        try:
            assert os.read(copy, size + 1) == DATA
            assert (os.fstat(copy).st_dev, os.fstat(copy).st_ino) == frozen.inode
        finally:
            os.close(copy)
        with pytest.raises(OSError) as caught:
            os.open("new", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=frozen.mount_fd)
        assert caught.value.errno == errno.EROFS
        assert Path("/proc/self/mountinfo").read_text() == mounts
    assert frozen.descriptors == ()
    assert _fds() == before | {library.root_fd}


@needs_mount_privilege
def test_freeze_refuses_bytes_changed_after_open_and_keeps_nothing(
    store: tuple[Library, str, int], base: Path
) -> None:
    """Bytes rewritten (same size) between open and freeze: projection_changed, and no
    tmpfs or descriptor is left behind."""
    library, ref, size = store
    with library.open_bundle(ref, size) as bundle:
        before = _fds()
        path = base / "lib" / bundle.name
        path.chmod(0o600)
        with path.open("r+b") as handle:
            handle.write(b"R")
        with pytest.raises(BundleMismatch) as caught:
            freeze(bundle)
        assert caught.value.code == "projection_changed"
        assert _fds() == before


def test_the_copy_is_exactly_the_bytes_hashed_while_the_source_changes(base: Path) -> None:
    """While a writer keeps flipping a 2 MiB source between two contents, the sink of each
    hash-and-copy holds exactly the bytes whose digest was returned (never a second read of
    a source that changed in between), whatever mix of the two it read."""
    one, two = b"\x01" * (2 * 1024 * 1024), b"\x02" * (2 * 1024 * 1024)
    source = base / "source"
    source.write_bytes(one)
    stop = threading.Event()

    def flip() -> None:
        fd = os.open(source, os.O_WRONLY | os.O_CLOEXEC)
        try:
            while not stop.is_set():
                os.pwrite(fd, two, 0)
                os.pwrite(fd, one, 0)
        finally:
            os.close(fd)

    writer = threading.Thread(target=flip)
    writer.start()
    try:
        src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
        try:
            for round_ in range(20):
                sink_path = base / f"sink-{round_}"
                sink = os.open(sink_path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
                try:
                    hexdigest, count = copy_hashing(src, len(one), sink)
                finally:
                    os.close(sink)
                assert count == len(one)
                assert hashlib.sha256(sink_path.read_bytes()).hexdigest() == hexdigest
        finally:
            os.close(src)
    finally:
        stop.set()
        writer.join()
