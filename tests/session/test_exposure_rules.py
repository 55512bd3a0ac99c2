"""Exposures are only what the owner owns: a real gloved refuses the rest, as root and as the
unprivileged owner, at ``glove init`` and again at every launch (issue 20, item 3)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Unpriv

from ._exposures import Owner, owner_home


@pytest.fixture(params=["root", "unpriv"])
def owner(request: pytest.FixtureRequest, unpriv: Unpriv) -> Iterator[Owner]:
    """A running gloved as root or as the unprivileged owner (see ``owner_home``)."""
    yield from owner_home(request.param, unpriv)


def _refused(done: Any, *words: str) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "exposure_error" in done.stderr, done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    return str(done.stderr)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/run", "under /run"),
        ("/dev/shm", "under /dev"),
        ("/dev", "under /dev"),
        ("/dev/pts", "under /dev"),
        ("/proc", "under /proc"),
        ("/sys/fs/cgroup", "under /sys"),
    ],
)
def test_system_runtime_directories_are_refused(owner: Owner, path: str, reason: str) -> None:
    """glove init of /run, /dev/shm, /dev, /dev/pts, /proc or a cgroup tree is an
    exposure_error naming the rule, whoever gloved runs as."""
    _refused(owner.init("x", path), f"refusing to expose {path}", reason)


def test_what_the_owner_does_not_own_alone_is_refused(owner: Owner) -> None:
    """A group-writable, a world-writable and another user's directory are refused with
    the reason; the same directory made private is accepted."""
    shared = owner.mkdir("shared", 0o770)
    _refused(owner.init("x", str(shared)), "writable by its group", "0770")
    world = owner.mkdir("world", 0o757)
    _refused(owner.init("x", str(world)), "writable by others")
    theirs = owner.mkdir("theirs", 0o755, uid=owner.other_uid)
    _refused(owner.init("x", str(theirs)), f"owned by uid {owner.other_uid}")
    shared.chmod(0o750)
    made = owner.init("x", str(shared))
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["generation"] == 1


@pytest.mark.parametrize("bad", ["a\nb", "a\x01b", "a\x7fb", "a\x9bb", "a\tb"])
def test_a_control_character_in_the_target_or_path_is_refused(owner: Owner, bad: str) -> None:
    """The target (and the path) is checked at create: a newline, a C0 or C1 control
    character or DEL is refused before anything is recorded."""
    work = owner.mkdir("work")
    _refused(owner.init("x", str(work), "--target", f"/workspace/{bad}"), "control character")
    odd = owner.mkdir(f"odd{bad}dir")
    _refused(owner.init("y", str(odd)), "control character")
    registry = owner.home.state / "exposures.json"
    recorded = json.loads(registry.read_text())["exposures"] if registry.exists() else []
    assert recorded == []


def test_a_fifo_anywhere_in_the_tree_is_refused(owner: Owner) -> None:
    """A FIFO deep in the tree is refused at glove init, by its path."""
    work = owner.mkdir("work")
    deep = work / "a" / "b"
    deep.mkdir(parents=True)
    os.mkfifo(deep / "pipe")
    _refused(owner.init("x", str(work)), f"{deep}/pipe is a FIFO")


def test_allow_special_is_the_operators_explicit_exception(owner: Owner) -> None:
    """A private directory on /dev/shm is refused, unless gloved.toml's [exposures]
    allow_special lists it exactly: then a session reads it (its neighbour stays refused)."""
    neighbour = owner.shm / "neighbour"
    neighbour.mkdir(mode=0o700)
    os.chown(neighbour, owner.uid, owner.gid)
    _refused(owner.init("x", str(neighbour)), "under /dev")
    allowed = owner.shm / "allowed"
    (allowed / "note.txt").write_text("from /dev/shm\n")
    os.chown(allowed / "note.txt", owner.uid, owner.gid)
    made = owner.init("work", str(allowed))
    assert made.returncode == 0, made.stderr
    final = owner.run("read", ["work"])
    assert final["outcome"]["exit_code"] == 0, final
    out = owner.home.state / "sessions-data" / final["session_id"] / "stdout"
    assert out.read_text() == "from /dev/shm\n"


def test_a_check_broken_after_init_fails_the_launch(owner: Owner) -> None:
    """An exposure made group-writable, then one that gained a FIFO, after glove init:
    each session fails at prepare with the reason and nothing runs; fixed, it runs."""
    work = owner.mkdir("work")
    (work / "note.txt").write_text("ok\n")
    os.chown(work / "note.txt", owner.uid, owner.gid)
    assert owner.init("work", str(work)).returncode == 0
    work.chmod(0o770)
    final = owner.run("read", ["work"])
    assert final["outcome"]["kind"] == "setup_error", final
    assert "writable by its group" in json.dumps(final), final
    work.chmod(0o700)
    os.mkfifo(work / "later.fifo")
    final = owner.run("read", ["work"])
    assert final["outcome"]["kind"] == "setup_error", final
    assert "later.fifo is a FIFO" in json.dumps(final), final
    (work / "later.fifo").unlink()
    final = owner.run("read", ["work"])
    assert final["outcome"]["exit_code"] == 0, final
    assert stat.S_IMODE(work.stat().st_mode) == 0o700
