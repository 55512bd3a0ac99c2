"""The library store: add, list, remove and verify, its root checks, and a source that
changes while it is read; as root in this process and as the unprivileged test user."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest

from glove.library import (
    BUNDLE_MODE,
    MAX_BUNDLE_BYTES,
    Bundle,
    BundleMismatch,
    BundleMissing,
    BundleNameError,
    Library,
    LibraryRootError,
    SourceError,
)
from tests.conftest import Unpriv
from tests.library.conftest import digest, make_store, owner_of, put, root_only


@pytest.fixture
def library(base: Path) -> Library:
    """An empty store of this user's."""
    return Library.open(base / "lib", create=True)


def _source(base: Path, data: bytes, name: str = "skill.md") -> Path:
    path = base / name
    path.write_bytes(data)
    return path


def test_add_stores_a_read_only_single_link_bundle_named_by_its_digest(
    base: Path, library: Library
) -> None:
    """add returns the digest and size, and leaves a 0400, one-link file of ours named
    sha256-<hex> holding exactly the bytes; nothing else is left in the root."""
    data = b"# skill\n" * 1000
    added = library.add(_source(base, data))
    assert added == Bundle(digest=digest(data), size=len(data))
    assert json.loads(msgspec.json.encode(added)) == {
        "digest": digest(data),
        "size": len(data),
    }
    path = base / "lib" / ("sha256-" + hashlib.sha256(data).hexdigest())
    info = path.lstat()
    assert stat.S_ISREG(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == BUNDLE_MODE
    assert info.st_nlink == 1
    assert info.st_uid == os.geteuid()
    assert path.read_bytes() == data
    assert sorted(os.listdir(base / "lib")) == [path.name]
    assert stat.S_IMODE((base / "lib").stat().st_mode) == 0o700


def test_adding_the_same_bytes_twice_is_a_no_op(base: Path, library: Library) -> None:
    """A second add of the same bytes (from another file) returns the same bundle and leaves
    the stored file untouched: same inode, same times, still one entry."""
    data = b"same bytes\n"
    first = library.add(_source(base, data, "a"))
    path = base / "lib" / ("sha256-" + first.digest.split(":")[1])
    before = path.stat()
    second = library.add(_source(base, data, "b"))
    after = path.stat()
    assert second == first
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_ctime_ns,
    )
    assert library.list() == (first,)


def test_adding_bytes_whose_stored_copy_is_damaged_refuses_and_keeps_the_evidence(
    base: Path, library: Library
) -> None:
    """When the bundle of those bytes exists but was changed, add names the damage
    (projection_digest_mismatch) and does not overwrite it: the owner decides."""
    data = b"original\n"
    added = library.add(_source(base, data))
    path = base / "lib" / ("sha256-" + added.digest.split(":")[1])
    path.chmod(0o600)
    path.write_bytes(b"tampered\n")
    path.chmod(0o400)
    with pytest.raises(BundleMismatch) as caught:
        library.add(_source(base, data, "again"))
    assert caught.value.code == "projection_digest_mismatch"
    assert path.read_bytes() == b"tampered\n"


def test_list_remove_and_missing(base: Path, library: Library) -> None:
    """list shows every bundle by digest (ignoring entries that are not bundles); remove
    takes one away; removing it again, or a malformed digest, is refused by code."""
    one = library.add(_source(base, b"one"))
    two = library.add(_source(base, b"two"))
    (base / "lib" / "stray").write_bytes(b"x")
    assert library.list() == tuple(sorted((one, two), key=lambda b: b.digest))
    library.remove(one.digest)
    assert library.list() == (two,)
    with pytest.raises(BundleMissing) as missing:
        library.remove(one.digest)
    assert missing.value.code == "projection_missing"
    with pytest.raises(BundleNameError) as bad:
        library.remove("sha256:../../etc/passwd")
    assert bad.value.code == "projection_name_traversal"
    assert (base / "lib" / "stray").exists()


def test_verify_reports_every_damaged_entry_by_code(base: Path, library: Library) -> None:
    """verify re-hashes every bundle and reports each bad entry once, with its own code:
    changed bytes, a wrong mode, group write, a second link, a symlink, a FIFO (without
    blocking), a directory, a stray file and an interrupted add's temporary; the good
    bundle passes, and nothing is changed."""
    root = base / "lib"
    good = library.add(_source(base, b"good"))
    changed = library.add(_source(base, b"will change"))
    changed_path = root / ("sha256-" + changed.digest.split(":")[1])
    changed_path.chmod(0o600)
    changed_path.write_bytes(b"has changed")
    changed_path.chmod(0o400)
    loose = library.add(_source(base, b"loose mode"))
    (root / ("sha256-" + loose.digest.split(":")[1])).chmod(0o440)
    open_write = library.add(_source(base, b"group write"))
    (root / ("sha256-" + open_write.digest.split(":")[1])).chmod(0o420)
    linked = library.add(_source(base, b"linked"))
    os.link(root / ("sha256-" + linked.digest.split(":")[1]), base / "second-name")
    link_name = "sha256-" + hashlib.sha256(b"link").hexdigest()
    (root / link_name).symlink_to(root / ("sha256-" + good.digest.split(":")[1]))
    fifo_name = "sha256-" + hashlib.sha256(b"fifo").hexdigest()
    os.mkfifo(root / fifo_name)
    dir_name = "sha256-" + hashlib.sha256(b"dir").hexdigest()
    (root / dir_name).mkdir()
    (root / "README").write_text("not a bundle")
    (root / ".tmp-0123456789abcdef").write_bytes(b"half")
    report = library.verify()
    assert not report.ok
    assert report.bundles == (good,)
    codes = {problem.name: problem.code for problem in report.problems}
    assert codes == {
        "sha256-" + changed.digest.split(":")[1]: "projection_digest_mismatch",
        "sha256-" + loose.digest.split(":")[1]: "library_bundle_mode",
        "sha256-" + open_write.digest.split(":")[1]: "projection_writable",
        "sha256-" + linked.digest.split(":")[1]: "projection_hardlinked",
        link_name: "projection_symlink",
        fifo_name: "projection_not_regular",
        dir_name: "projection_not_regular",
        "README": "library_stray_entry",
        ".tmp-0123456789abcdef": "library_stray_entry",
    }
    assert len(report.problems) == len(codes)
    assert changed_path.read_bytes() == b"has changed"


def test_a_clean_store_verifies(base: Path, library: Library) -> None:
    """A store holding only what add left verifies ok, every bundle listed."""
    added = [library.add(_source(base, bytes([i]) * (i + 1), f"f{i}")) for i in range(5)]
    report = library.verify()
    assert report.ok
    assert report.bundles == tuple(sorted(added, key=lambda b: b.digest))


@root_only
def test_verify_names_a_bundle_of_another_owner(base: Path, unpriv: Unpriv) -> None:
    """A bundle owned by another user in root's store is projection_wrong_owner."""
    library = Library.open(base / "lib", create=True)
    ref, _ = put(base / "lib", b"theirs", owner_of("unpriv", unpriv))
    report = library.verify()
    assert [(p.name, p.code) for p in report.problems] == [
        ("sha256-" + ref.split(":")[1], "projection_wrong_owner")
    ]


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        ("missing", "library_root_missing"),
        ("symlink", "library_root_symlink"),
        ("file", "library_root_not_directory"),
        ("mode", "library_root_mode"),
        ("group", "library_root_mode"),
    ],
)
def test_an_unsafe_root_is_refused_and_never_repaired(base: Path, setup: str, code: str) -> None:
    """A missing root (without create), a symlink to a good directory, a file, mode 0755 or
    0770: each refused with its code, and left exactly as it was."""
    root = base / "lib"
    real = base / "real"
    real.mkdir(mode=0o700)
    if setup == "symlink":
        root.symlink_to(real)
    elif setup == "file":
        root.write_bytes(b"")
    elif setup in {"mode", "group"}:
        root.mkdir()
        root.chmod(0o755 if setup == "mode" else 0o770)
    before = root.lstat() if setup != "missing" else None
    with pytest.raises(LibraryRootError) as caught:
        Library.open(root, create=setup != "missing")
    assert caught.value.code == code
    if before is not None:
        after = root.lstat()
        assert (after.st_mode, after.st_uid) == (before.st_mode, before.st_uid)
    assert stat.S_IMODE(real.stat().st_mode) == 0o700


def test_a_root_loosened_after_it_was_opened_is_refused(base: Path, library: Library) -> None:
    """Every call checks the pinned root again: chmod 0755 after open stops add and list."""
    (base / "lib").chmod(0o755)
    with pytest.raises(LibraryRootError) as caught:
        library.list()
    assert caught.value.code == "library_root_mode"
    with pytest.raises(LibraryRootError):
        library.add(_source(base, b"x"))


@root_only
def test_a_root_of_another_user_is_refused(base: Path, unpriv: Unpriv) -> None:
    """Root does not take over the test user's store directory (library_root_wrong_owner)."""
    make_store(base, owner_of("unpriv", unpriv))
    with pytest.raises(LibraryRootError) as caught:
        Library.open(base / "lib")
    assert caught.value.code == "library_root_wrong_owner"


def test_a_fifo_source_is_refused_without_blocking(base: Path, library: Library) -> None:
    """add of a FIFO nobody writes to returns library_source_not_regular at once (the open
    does not wait for a writer), and a directory is refused the same way."""
    os.mkfifo(base / "fifo")
    with pytest.raises(SourceError) as caught:
        library.add(base / "fifo")
    assert caught.value.code == "library_source_not_regular"
    with pytest.raises(SourceError) as directory:
        library.add(base)
    assert directory.value.code == "library_source_not_regular"
    assert library.list() == ()


def test_a_missing_or_oversized_source_is_refused(base: Path, library: Library) -> None:
    """A missing file is library_source_unreadable; a (sparse) file over MAX_BUNDLE_BYTES is
    library_source_too_large, refused before anything is read."""
    with pytest.raises(SourceError) as missing:
        library.add(base / "nope")
    assert missing.value.code == "library_source_unreadable"
    big = base / "big"
    with big.open("wb") as handle:
        handle.truncate(MAX_BUNDLE_BYTES + 1)
    with pytest.raises(SourceError) as large:
        library.add(big)
    assert large.value.code == "library_source_too_large"
    assert os.listdir(base / "lib") == []


@pytest.mark.parametrize(
    "source",
    ["/proc/self/status", "/sys/kernel/mm/transparent_hugepage/enabled"],
    ids=["grows-past-st_size", "shorter-than-st_size"],
)
def test_a_source_whose_bytes_are_not_its_size_is_refused(
    source: str, library: Library, base: Path
) -> None:
    """A file whose bytes read differ from its st_size (procfs says 0 and has more; sysfs
    says 4096 and has less: what a file growing or shrinking mid-read looks like) is
    library_source_changed and adds nothing, no temporary left."""
    if not Path(source).exists():
        pytest.skip(f"{source} is absent on this kernel")
    with pytest.raises(SourceError) as caught:
        library.add(source)
    assert caught.value.code == "library_source_changed"
    assert os.listdir(base / "lib") == []


def test_a_source_appended_to_while_it_is_added_is_refused_or_added_whole(
    base: Path, library: Library
) -> None:
    """While a writer appends 8 MiB to the source in 4 KiB writes, add runs again and again:
    each add is either refused with library_source_changed or stores a bundle whose name is
    the digest of its bytes (a size the file really had); the store verifies afterwards."""
    start = 4 * 1024 * 1024
    path = _source(base, b"x" * start)
    appends = 2048

    def append() -> None:
        with path.open("ab") as handle:
            for _ in range(appends):
                handle.write(b"y" * 4096)
                handle.flush()

    writer = threading.Thread(target=append)
    writer.start()
    outcomes: list[str] = []
    try:
        while writer.is_alive():
            try:
                added = library.add(path)
            except SourceError as caught:
                outcomes.append(caught.code)
            else:
                assert start <= added.size <= start + appends * 4096
                outcomes.append("added")
    finally:
        writer.join()
    assert set(outcomes) <= {"added", "library_source_changed"}, outcomes
    report = library.verify()
    assert report.ok, report.problems
    assert os.listdir(base / "lib") == [b.digest.replace(":", "-") for b in report.bundles]


def test_without_o_tmpfile_add_uses_a_named_temporary_and_leaves_none(base: Path) -> None:
    """Where O_TMPFILE fails (EOPNOTSUPP, a seccomp filter standing in for a filesystem
    without it), add writes a .tmp-<random> file, renames it into place without replacing,
    and leaves no temporary behind, on success and on a refused source alike."""
    code = f"""
import errno, json, os, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from _probe import filter_syscalls
filter_syscalls(("openat",), errno.EOPNOTSUPP, tmpfile_only=True)
from glove.library import Library, SourceError
lib = Library.open({str(base / "lib")!r}, create=True)
added = lib.add({str(_source(base, b"named temp"))!r})
try:
    lib.add("/proc/self/status")
except SourceError as e:
    refused = e.code
left = sorted(os.listdir({str(base / "lib")!r}))
ok = lib.verify().ok
print(json.dumps({{"digest": added.digest, "refused": refused, "left": left, "ok": ok}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(done.stdout)
    assert result["digest"] == digest(b"named temp")
    assert result["refused"] == "library_source_changed"
    assert result["left"] == ["sha256-" + hashlib.sha256(b"named temp").hexdigest()]
    assert result["ok"]


UNPRIV_STORE = """
import json, os, sys
from glove.library import Library, LibraryError
base = sys.argv[1]
out = {}
lib = Library.open(base + "/mine", create=True)
path = base + "/mine-src"
with open(path, "wb") as handle:
    handle.write(b"the test user's skill")
added = lib.add(path)
out["added"] = [added.digest, added.size]
out["again"] = lib.add(path) == added
out["mode"] = oct(os.stat(base + "/mine").st_mode & 0o7777)
out["list"] = [b.digest for b in lib.list()]
out["verify_ok"] = lib.verify().ok
try:
    Library.open(base + "/roots")
except LibraryError as e:
    out["roots"] = e.code
out["foreign"] = [(p.name, p.code) for p in Library.open(base + "/planted").verify().problems]
lib.remove(added.digest)
out["after_remove"] = lib.list() == ()
print(json.dumps(out))
"""


@root_only
def test_the_store_as_the_unprivileged_user(base: Path, unpriv: Unpriv) -> None:
    """As the test user: add, the no-op add, list, verify and remove work in its own 0700
    store; root's store is refused (wrong owner), and a root-owned bundle planted in its
    store is reported projection_wrong_owner."""
    base.chmod(0o777)
    make_store(base, owner_of("root", unpriv), "roots")
    planted = make_store(base, owner_of("unpriv", unpriv), "planted")
    ref, _ = put(planted, b"root's file", owner_of("root", unpriv))
    done = subprocess.run(
        unpriv.command(unpriv.python, "-c", UNPRIV_STORE, str(base)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["added"] == [digest(b"the test user's skill"), 21]
    assert out["again"]
    assert out["mode"] == "0o700"
    assert out["list"] == [digest(b"the test user's skill")]
    assert out["verify_ok"]
    assert out["roots"] == "library_root_wrong_owner"
    assert out["foreign"] == [["sha256-" + ref.split(":")[1], "projection_wrong_owner"]]
    assert out["after_remove"]
    assert (base / "mine").stat().st_uid == unpriv.uid
