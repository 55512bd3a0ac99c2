"""Stores made by hand (as the test's root would leave them, or an attacker), and the probe
that runs projection scenarios in namespaces as root or as the unprivileged test user."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Unpriv, readable_copy

PROBE = Path(__file__).with_name("_probe.py")
#: How long one probe may run (the race scenario does 10,000 rewrites on a shared machine).
PROBE_TIMEOUT_S = 600

root_only = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: two owners, and namespaces for both users"
)


@dataclass(frozen=True)
class Owner:
    """Who a store belongs to in a test: root, or the unprivileged test user."""

    who: str
    uid: int
    gid: int


def owner_of(who: str, unpriv: Unpriv) -> Owner:
    """The :class:`Owner` named ``root`` or ``unpriv``."""
    if who == "root":
        return Owner("root", 0, 0)
    return Owner("unpriv", unpriv.uid, unpriv.gid)


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every user can traverse (pytest's tmp_path is root's only)."""
    path = Path(tempfile.mkdtemp(prefix="glove-library-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_store(base: Path, owner: Owner, name: str = "lib") -> Path:
    """An empty store root, 0700, owned by ``owner``."""
    root = base / name
    root.mkdir(mode=0o700)
    root.chmod(0o700)
    os.chown(root, owner.uid, owner.gid)
    return root


def digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def put(
    root: Path,
    data: bytes,
    owner: Owner,
    *,
    name: str | None = None,
    mode: int = 0o400,
) -> tuple[str, int]:
    """Write a bundle by hand (named for its digest unless ``name``); return (digest, size)."""
    path = root / (name or "sha256-" + hashlib.sha256(data).hexdigest())
    path.write_bytes(data)
    os.chown(path, owner.uid, owner.gid)
    path.chmod(mode)
    return digest(data), len(data)


def writable_dir(base: Path, owner: Owner, name: str) -> Path:
    """A directory ``owner`` can create mount points in."""
    path = base / name
    path.mkdir()
    os.chown(path, owner.uid, owner.gid)
    return path


def run_probe(how: str, scenario: str, spec: dict[str, Any], unpriv: Unpriv) -> dict[str, Any]:
    """Run the probe's ``scenario`` and return its JSON.

    ``how``: ``root`` (real root in a private mount namespace: a root launcher),
    ``unpriv`` (the test user as root of its own user and mount namespace: the sandbox's
    case), ``root-host`` / ``unpriv-host`` (no namespace: the probe's launcher shape makes
    its own in a forked child).
    """
    probe = PROBE if how.startswith("root") else readable_copy(PROBE)
    argv_tail = [str(probe), scenario, json.dumps(spec)]
    userns = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
    commands = {
        "root": ["unshare", "--mount", "--propagation", "private", sys.executable, *argv_tail],
        "root-host": [sys.executable, *argv_tail],
        "unpriv": unpriv.command(*userns, unpriv.python, *argv_tail),
        "unpriv-host": unpriv.command(unpriv.python, *argv_tail),
    }
    done = subprocess.run(
        commands[how],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result
