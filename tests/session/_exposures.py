"""Owners of a real gloved for the exposure tests: root and the unprivileged user."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import Unpriv

from ._gloved import Gloved, plan_text

#: Where the allow_special test makes its runtime-tmpfs directory.
SHM = Path("/dev/shm")
READ = """
[harnesses.read]
argv = ["/bin/cat", "/workspace/work/note.txt"]
"""


@dataclass
class Owner:
    """One owner's running gloved and the ids a test chowns its directories to."""

    home: Gloved
    uid: int
    gid: int
    other_uid: int
    shm: Path

    def mkdir(self, name: str, mode: int = 0o700, uid: int | None = None) -> Path:
        """A directory under the home, owned by ``uid`` (default: the owner) with ``mode``."""
        path = self.home.base / name
        path.mkdir()
        os.chown(path, self.uid if uid is None else uid, self.gid)
        path.chmod(mode)
        return path

    def init(self, *args: str) -> Any:
        """``glove init ARGS --json`` as the owner."""
        return self.home.glove("init", *args, "--json")

    def run(self, harness: str, exposures: list[str]) -> dict[str, Any]:
        """Create a session of ``harness`` through the CLI and wait; its final view."""
        plan = self.home.base / "plan.json"
        plan.write_text(plan_text(harness, exposures=exposures))
        os.chown(plan, self.uid, self.gid)
        made = self.home.glove("session", "create", str(plan), "--json")
        assert made.returncode == 0, made.stderr
        session_id = json.loads(made.stdout)["session_id"]
        done = self.home.glove("session", "wait", session_id, "--json")
        final: dict[str, Any] = json.loads(done.stdout)
        return final


def owner_home(who: str, unpriv: Unpriv, harnesses: str = READ) -> Iterator[Owner]:
    """A set-up home with gloved running, as root (``who`` "root") or as the unprivileged
    owner ("unpriv"), with ``harnesses``; its gloved.toml lets ``[exposures]
    allow_special`` name one directory under /dev/shm (``Owner.shm / "allowed"``)."""
    base = Path(tempfile.mkdtemp(prefix="glove-expose-", dir="/var/tmp"))
    shm = Path(tempfile.mkdtemp(prefix="glove-expose-", dir=SHM))
    if who == "unpriv":
        uid, gid, other = unpriv.uid, unpriv.gid, 0
        home = Gloved(base, python=unpriv.python, creds=unpriv.credentials())
    else:
        uid, gid, other = os.getuid(), os.getgid(), unpriv.uid
        home = Gloved(base)
    for path in (base, shm):
        os.chown(path, uid, gid)
    special = shm / "allowed"
    special.mkdir(mode=0o700)
    os.chown(special, uid, gid)
    home.setup(harnesses + f"\n[exposures]\nallow_special = [{str(special)!r}]\n")
    home.start()
    try:
        yield Owner(home, uid, gid, other, shm)
    finally:
        home.stop()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
