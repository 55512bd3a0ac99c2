"""``glove library add/list/remove/verify`` as the owner runs them, as root and as the
unprivileged test user: the store in gloved's state directory, owner-only."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Unpriv
from tests.library.conftest import Owner, owner_of, root_only

pytestmark = root_only
WHO = ("root", "unpriv")


def _glove(
    owner: Owner, unpriv: Unpriv, state: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run ``glove ARGS`` as ``owner`` with its state directory under ``state``."""
    if owner.who == "unpriv":  # the test's state home over the user's own test world
        where = [f"XDG_STATE_HOME={state}", f"HOME={state}"]
        argv = unpriv.command("env", *where, unpriv.python, "-m", "glove", *args)
    else:
        argv = [sys.executable, "-m", "glove", *args]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "XDG_STATE_HOME": str(state), "HOME": str(state)},
    )


@pytest.fixture
def state(base: Path, request: pytest.FixtureRequest, unpriv: Unpriv) -> Path:
    """An empty state home the parametrized owner owns."""
    who = request.node.callspec.params["who"]
    owner = owner_of(who, unpriv)
    path = base / "state"
    path.mkdir(mode=0o700)
    os.chown(path, owner.uid, owner.gid)
    return path


@pytest.mark.parametrize("who", WHO)
def test_add_list_verify_remove(who: str, base: Path, state: Path, unpriv: Unpriv) -> None:
    """add prints the digest and size, twice the same (a no-op); the bundle is 0400 with one
    link in an owner-only root; list shows it; verify passes; remove takes it away."""
    owner = owner_of(who, unpriv)
    data = b"# skill\n" + os.urandom(5000)
    source = base / "skill.md"
    source.write_bytes(data)
    source.chmod(0o644)
    want = {"digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}
    first = _glove(owner, unpriv, state, "library", "add", str(source), "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == want
    again = _glove(owner, unpriv, state, "library", "add", str(source), "--json")
    assert json.loads(again.stdout) == want
    root = state / "glove" / "library"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert root.stat().st_uid == owner.uid
    stored = root / ("sha256-" + want["digest"][7:])
    info = stored.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_nlink, info.st_uid) == (0o400, 1, owner.uid)
    assert [p.name for p in root.iterdir()] == [stored.name]
    listed = _glove(owner, unpriv, state, "library", "list", "--json")
    assert json.loads(listed.stdout) == {"bundles": [want]}
    verified = _glove(owner, unpriv, state, "library", "verify")
    assert verified.returncode == 0, verified.stderr
    removed = _glove(owner, unpriv, state, "library", "remove", want["digest"])
    assert removed.returncode == 0, removed.stderr
    assert list(root.iterdir()) == []
    gone = _glove(owner, unpriv, state, "library", "remove", want["digest"])
    assert gone.returncode == 2
    assert "projection_missing" in gone.stderr


@pytest.mark.parametrize("who", WHO)
def test_verify_names_every_bundle_that_differs(
    who: str, base: Path, state: Path, unpriv: Unpriv
) -> None:
    """A stored bundle rewritten behind the store's back fails verify (exit 1) by name."""
    owner = owner_of(who, unpriv)
    names = []
    for text in (b"one\n", b"two\n"):
        source = base / f"f{len(names)}"
        source.write_bytes(text)
        source.chmod(0o644)
        done = _glove(owner, unpriv, state, "library", "add", str(source), "--json")
        names.append("sha256-" + json.loads(done.stdout)["digest"][7:])
    damaged = state / "glove" / "library" / names[1]
    damaged.chmod(0o600)
    damaged.write_bytes(b"owt\n")
    damaged.chmod(0o400)
    done = _glove(owner, unpriv, state, "library", "verify")
    assert done.returncode == 1
    assert f"FAILED {names[1]}" in done.stdout
    assert names[0] not in done.stdout
    assert "projection_digest_mismatch" in done.stdout
    report = json.loads(_glove(owner, unpriv, state, "library", "verify", "--json").stdout)
    assert report["ok"] is False
    assert [p["name"] for p in report["problems"]] == [names[1]]


@pytest.mark.parametrize("who", WHO)
def test_an_unsafe_root_is_refused_never_repaired(
    who: str, base: Path, state: Path, unpriv: Unpriv
) -> None:
    """A library root open to the group is refused with its code and left as it is."""
    owner = owner_of(who, unpriv)
    root = state / "glove" / "library"
    root.mkdir(parents=True)
    for path in (state / "glove", root):
        os.chown(path, owner.uid, owner.gid)
    (state / "glove").chmod(0o700)
    root.chmod(0o770)
    source = base / "f"
    source.write_bytes(b"x")
    source.chmod(0o644)
    done = _glove(owner, unpriv, state, "library", "add", str(source))
    assert done.returncode == 2
    assert "library_root_mode" in done.stderr
    assert "Traceback" not in done.stderr
    assert stat.S_IMODE(root.stat().st_mode) == 0o770
