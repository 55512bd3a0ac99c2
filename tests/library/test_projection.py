"""Projections in real namespaces, as root and as the unprivileged test user: the verified
copy mounted read-only, locked against a nested namespace and a capability-less child, the
attacks refused with their codes and nothing mounted, a racing writer never seen."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from glove.library import FREEZE_BIND_REMOUNT, FREEZE_DETACHED_TMPFS, MOUNT_FLAGS
from tests.conftest import Unpriv
from tests.library.conftest import (
    Owner,
    digest,
    make_store,
    owner_of,
    put,
    root_only,
    run_probe,
    writable_dir,
)

pytestmark = root_only

WHO = ("root", "unpriv")
SKILL = b"# a skill\n" + bytes(range(256)) * 4096  # 1 MiB + 10 bytes
FLAG_SET = set(MOUNT_FLAGS)


def _mount_options(line: str) -> set[str]:
    """The per-mount options (mountinfo field 6) of a mountinfo line."""
    assert line, "nothing is mounted at the target"
    return set(line.split()[5].split(","))


def _assert_locked(report: dict[str, Any]) -> None:
    """What a process in a nested user namespace (uid 0 there) gets against the mount."""
    assert report["write"] == errno.EROFS
    assert report["remount_rw"] == errno.EPERM
    assert report["remount_sb_rw"] == errno.EPERM
    assert report["clear_rdonly"] == errno.EPERM
    assert report["clear_noexec"] == errno.EPERM
    assert report["umount"] == errno.EINVAL  # a locked mount: "not a mount you may unmount"
    assert report["umount_detach"] == errno.EINVAL
    assert report["mount_cmd"] != 0
    assert report["umount_cmd"] != 0
    assert _mount_options(report["mountinfo_after"]) >= FLAG_SET
    assert report["still_readable"]


def _assert_no_privilege(report: dict[str, Any]) -> None:
    """What the agent of a real sandbox (no capabilities) gets against the mount."""
    assert report["write"] == errno.EROFS
    for attempt in ("remount_rw", "remount_sb_rw", "clear_rdonly", "clear_noexec", "umount"):
        assert report[attempt] == errno.EPERM, attempt
    assert report["umount_detach"] == errno.EPERM
    assert report["mount_cmd"] != 0
    assert report["umount_cmd"] != 0
    assert _mount_options(report["mountinfo_after"]) >= FLAG_SET


def _store_with_skill(base: Path, owner: Owner) -> tuple[Path, str, int]:
    root = make_store(base, owner)
    ref, size = put(root, SKILL, owner)
    return root, ref, size


@pytest.mark.parametrize("who", WHO)
def test_attach_mounts_the_verified_copy_read_only_and_locked(
    who: str, base: Path, unpriv: Unpriv
) -> None:
    """The copy is mounted with exactly the bundle's bytes, ro,nosuid,nodev,noexec; writing
    fails with EROFS; from a nested user namespace, and from a child without capabilities,
    remount, umount and mount_setattr all fail; no descriptor is left, none reaches an
    exec'd child."""
    owner = owner_of(who, unpriv)
    root, ref, size = _store_with_skill(base, owner)
    target = writable_dir(base, owner, "sandbox") / "skill.md"
    result = run_probe(
        who,
        "project",
        {
            "root": str(root),
            "digest": ref,
            "size": size,
            "target": str(target),
            "nested": True,
            "dropped": True,
            "private_root": who == "root",
        },
        unpriv,
    )
    assert result["attached"] == {
        "target": str(target),
        "digest": ref,
        "size": size,
        "freeze_method": FREEZE_DETACHED_TMPFS,
        "mount_flags": ["ro", "nosuid", "nodev", "noexec"],
    }
    assert "sha256:" + result["sha256"] == ref
    assert _mount_options(result["mountinfo"]) >= FLAG_SET
    assert " - tmpfs " in result["mountinfo"]  # the private copy, never the stored inode
    assert result["mounts_added"] == 1
    assert result["write_here"] == errno.EROFS
    assert result["held"] >= 3  # root, bundle and tmpfs were held while attaching ...
    assert result["held_cloexec"]  # ... each close-on-exec ...
    assert result["inherited_by_exec"] == []  # ... so an exec'd child gets none of them
    assert result["leftover_fds"] == []  # and after close nothing of the projection is open
    _assert_locked(result["nested"])
    _assert_no_privilege(result["dropped"])


@pytest.mark.parametrize("who", WHO)
def test_the_launch_shape_host_prepares_and_the_child_attaches(
    who: str, base: Path, unpriv: Unpriv
) -> None:
    """As the launcher will: the host opens the bundle (a root host also freezes it, before
    the clone); a forked child in a new user and mount namespace (freezes, when the host is
    unprivileged,) parks the frozen tmpfs in its old root and attaches; the host's namespace
    never shows the mount."""
    owner = owner_of(who, unpriv)
    root, ref, size = _store_with_skill(base, owner)
    target = writable_dir(base, owner, "sandbox") / "skill.md"
    park = writable_dir(base, owner, "old-root-park")
    result = run_probe(
        f"{who}-host",
        "launcher",
        {
            "root": str(root),
            "digest": ref,
            "size": size,
            "target": str(target),
            "park": str(park),
            "host_freeze": who == "root",
        },
        unpriv,
    )
    assert "error" not in result, result
    assert result["freeze_method"] == FREEZE_DETACHED_TMPFS
    assert "sha256:" + result["sha256"] == ref
    assert _mount_options(result["mountinfo"]) >= FLAG_SET
    # Parked (as the init does before pivot_root): the whole frozen tmpfs, read-only.
    assert " / " + str(park) + " " in result["park_mountinfo"]
    assert "ro" in _mount_options(result["park_mountinfo"])
    _assert_no_privilege(result["dropped"])
    assert result["host_mountinfo"] == ""


@pytest.mark.parametrize("who", WHO)
def test_targets_beneath_the_new_root_and_the_ones_refused(
    who: str, base: Path, unpriv: Unpriv
) -> None:
    """Attached beneath the new root's descriptor (as build_root attaches binds) the copy
    shows at its path; a symlinked parent, '..' out of the root, a directory and a relative
    path without a root are each mount_target_invalid, with nothing mounted."""
    owner = owner_of(who, unpriv)
    root, ref, size = _store_with_skill(base, owner)
    new_root = writable_dir(base, owner, "new-root")
    (new_root / "etc").mkdir()
    (new_root / "dir").mkdir()
    outside = writable_dir(base, owner, "outside")
    (outside / "sub").mkdir()
    os.chown(outside / "sub", owner.uid, owner.gid)
    (new_root / "linked").symlink_to(outside)
    for path in (new_root / "etc", new_root / "dir", new_root / "linked"):
        os.lchown(path, owner.uid, owner.gid)
    result = run_probe(
        who,
        "targets",
        {
            "root": str(root),
            "digest": ref,
            "size": size,
            "new_root": str(new_root),
            "cases": [
                ["good", "/etc/skill.md", True],
                ["symlinked_parent", "/linked/sub/skill.md", True],
                ["symlinked_parent_absolute", str(new_root / "linked" / "sub" / "skill.md"), False],
                ["dotdot", "../outside/skill.md", True],
                ["directory", "/dir", True],
                ["relative", "etc/other.md", False],
            ],
        },
        unpriv,
    )
    assert "sha256:" + result.pop("good_sha256") == ref
    assert result.pop("good") == {"code": "none", "mounted": True}
    assert result == {
        label: {"code": "mount_target_invalid", "mounted": False}
        for label in (
            "symlinked_parent",
            "symlinked_parent_absolute",
            "dotdot",
            "directory",
            "relative",
        )
    }
    assert list((outside / "sub").iterdir()) == []


@pytest.mark.parametrize("missing", ["ENOSYS", "EPERM"])
@pytest.mark.parametrize("who", WHO)
def test_fallback_where_the_new_mount_api_is_missing(
    who: str, missing: str, base: Path, unpriv: Unpriv
) -> None:
    """With fsopen, fsmount, fspick, open_tree, move_mount and mount_setattr failing (ENOSYS:
    an old kernel; EPERM: a container runtime's seccomp profile), the copy goes into a tmpfs
    mounted in a private directory and is bound and remounted ro,nosuid,nodev,noexec: the
    same bytes, the same flags, locked the same way, its staging directory gone after."""
    owner = owner_of(who, unpriv)
    root, ref, size = _store_with_skill(base, owner)
    sandbox = writable_dir(base, owner, "sandbox")
    staging = writable_dir(base, owner, "staging")
    spec = {
        "root": str(root),
        "digest": ref,
        "size": size,
        "target": str(sandbox / "skill.md"),
        "filter": missing,
        "fallback_dir": str(staging),
        "nested": True,
        "private_root": who == "root",
    }
    result = run_probe(who, "project", spec, unpriv)
    assert result["attached"]["freeze_method"] == FREEZE_BIND_REMOUNT
    assert "sha256:" + result["sha256"] == ref
    assert _mount_options(result["mountinfo"]) >= FLAG_SET
    assert result["write_here"] == errno.EROFS
    assert result["mounts_added"] == 1  # the bind stays; the staging tmpfs is gone
    assert result["fallback_dir_left"] == []
    assert result["leftover_fds"] == []
    assert result["inherited_by_exec"] == []
    _assert_locked(result["nested"])
    del spec["fallback_dir"]
    refused = run_probe(who, "project", spec, unpriv)
    assert refused == {"refused": "freeze_unavailable", "mounts_added": 0}


def _attack_store(base: Path, owner: Owner, other: Owner) -> tuple[Path, dict[str, Any]]:
    """A store holding one good bundle and one of each attack; the cases to run on it."""
    root = make_store(base, owner)
    sandbox = writable_dir(base, owner, "sandbox")
    good, size = put(root, SKILL, owner)
    good_hex = good.split(":")[1]
    cases: list[dict[str, Any]] = [{"label": "good", "ref": good, "size": size}]

    def case(label: str, ref: str, case_size: int, **extra: Any) -> None:
        cases.append({"label": label, "ref": ref, "size": case_size, **extra})

    # A symlink named like a bundle, pointing at the good one.
    link_data = b"symlinked\n"
    (root / ("sha256-" + digest(link_data).split(":")[1])).symlink_to(root / f"sha256-{good_hex}")
    case("symlink", digest(link_data), len(SKILL))
    case("dotdot", f"sha256:../../{good_hex}", size)
    case("dotdot_name", f"../lib/sha256-{good_hex}", size)
    case("absolute", "/etc/passwd", 10)
    # A bundle with a second link elsewhere in the same filesystem.
    linked, linked_size = put(root, b"hard linked\n", owner)
    os.link(root / ("sha256-" + linked.split(":")[1]), base / "other-name")
    case("hardlink", linked, linked_size)
    fifo = b"fifo\n"
    os.mkfifo(root / ("sha256-" + digest(fifo).split(":")[1]), 0o600)
    os.chown(root / ("sha256-" + digest(fifo).split(":")[1]), owner.uid, owner.gid)
    case("fifo", digest(fifo), 0)
    foreign, foreign_size = put(root, b"someone else's\n", other)
    case("wrong_owner", foreign, foreign_size)
    loose, loose_size = put(root, b"group writable\n", owner, mode=0o420)
    case("group_writable", loose, loose_size)
    case("wrong_size", good, size + 1)
    # The name of one content, the bytes of another of the same size.
    honest = b"A" * 64
    put(root, b"B" * 64, owner, name="sha256-" + digest(honest).split(":")[1])
    case("wrong_digest", digest(honest), 64)
    # Swapped after the first fstat: another file (the very same bytes) renamed over it.
    swapped, swapped_size = put(root, b"swap me\n", owner)
    (root / ".replacement").write_bytes(b"swap me\n")
    os.chown(root / ".replacement", owner.uid, owner.gid)
    case("swapped", swapped, swapped_size, swap=".replacement")
    rewritten, rewritten_size = put(root, b"rewrite me\n", owner)
    case("rewritten", rewritten, rewritten_size, rewrite="REWRITTEN!\n")
    case("missing", digest(b"never stored"), 12)
    # A mount point in the store: a file bound over a bundle's name.
    mounted, mounted_size = put(root, b"covered\n", owner)
    cover = base / "cover"
    cover.write_bytes(b"covered\n")
    os.chown(cover, owner.uid, owner.gid)
    cover.chmod(0o400)
    case(
        "mount_point",
        mounted,
        mounted_size,
        bind=str(cover),
        bind_at="sha256-" + mounted.split(":")[1],
    )
    for index, item in enumerate(cases):
        item["target"] = str(sandbox / f"target-{index}")
    beneath = ["../lib/" + f"sha256-{good_hex}", "/etc/passwd", "sha256-" + digest(link_data)[7:]]
    return root, {"root": str(root), "cases": cases, "beneath": beneath}


EXPECTED_CODES = {
    "good": "none",
    "symlink": "projection_symlink",
    "dotdot": "projection_name_traversal",
    "dotdot_name": "projection_name_traversal",
    "absolute": "projection_name_absolute",
    "hardlink": "projection_hardlinked",
    "fifo": "projection_not_regular",
    "wrong_owner": "projection_wrong_owner",
    "group_writable": "projection_writable",
    "wrong_size": "projection_size_mismatch",
    "wrong_digest": "projection_digest_mismatch",
    "swapped": "projection_changed",
    "rewritten": "projection_changed",
    "missing": "projection_missing",
    "mount_point": "projection_cross_device",
}


@pytest.mark.parametrize("openat2", ["openat2", "no-openat2"])
@pytest.mark.parametrize("who", WHO)
def test_every_attack_has_its_own_code_and_mounts_nothing(
    who: str, openat2: str, base: Path, unpriv: Unpriv
) -> None:
    """A symlink, '..', an absolute name, a hard link, a FIFO (which must not block), a file
    of the other user (root's in the test user's store, the test user's in root's), group
    write, a wrong size, a wrong digest, a file swapped or rewritten after the first fstat,
    a missing bundle and a mount point: each its own code, nothing mounted, no descriptor
    left, the target never created, while the good bundle beside them mounts; without
    openat2 (ENOSYS: Linux < 5.6) the flat-name fallback refuses the same way."""
    owner = owner_of(who, unpriv)
    other = owner_of("unpriv" if who == "root" else "root", unpriv)
    _, spec = _attack_store(base, owner, other)
    spec["filter_openat2"] = openat2 == "no-openat2"
    results = run_probe(who, "attacks", spec, unpriv)
    beneath = results.pop("beneath")
    assert {label: r["code"] for label, r in results.items()} == EXPECTED_CODES
    for label, outcome in results.items():
        if label == "good":
            assert outcome["mounts_changed"]
            assert outcome["target_exists"]
            continue
        assert not outcome["mounts_changed"], label
        assert not outcome["target_exists"], label
        assert outcome["fds_left"] == [], label
    if openat2 == "openat2":  # the second line: openat2 itself refuses what the names did
        assert list(beneath.values()) == [errno.EXDEV, errno.EXDEV, errno.ELOOP]


@pytest.mark.parametrize("who", WHO)
def test_a_racing_writer_is_never_seen_in_a_mounted_copy(
    who: str, base: Path, unpriv: Unpriv
) -> None:
    """A writer rewrites the stored bundle 10,000 times (wrong and right bytes in turn)
    during repeated freeze + mount cycles: every mounted copy has exactly the verified
    digest, the copy mounted before the writer started never changes, every refusal is a
    digest mismatch or a change seen by fstat, and a cycle after the writer stops mounts."""
    owner = owner_of(who, unpriv)
    good = bytes(range(256)) * 256  # 64 KiB
    root = make_store(base, owner)
    ref, size = put(root, good, owner)
    (base / "good").write_bytes(good)
    (base / "good").chmod(0o644)
    result = run_probe(
        who,
        "race",
        {
            "root": str(root),
            "digest": ref,
            "size": size,
            "good_path": str(base / "good"),
            "target_dir": str(writable_dir(base, owner, "sandbox")),
            "rewrites": 10_000,
        },
        unpriv,
    )
    assert result["rewrites_done"] == 10_000
    assert result["cycles"] >= 1
    assert result["wrong_mounts"] == []
    assert result["first_changed"] == 0
    assert set(result["outcomes"]) <= {
        "mounted",
        "projection_digest_mismatch",
        "projection_changed",
    }, result["outcomes"]
    assert result["after"] == "mounted"
    assert "sha256:" + result["after_sha256"] == ref
