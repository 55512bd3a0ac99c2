"""Cgroup helpers the cgroup tests share: a delegated v2 group for the test user, and a
removal that waits for the kernel to let go of an emptied group."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import Unpriv


def rmdir_when_empty(path: Path) -> None:
    """Remove the cgroup ``path``, retrying for about 2 s while its last tasks exit."""
    for _ in range(100):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


@contextmanager
def delegated_group(unpriv: Unpriv, parent: Path, prefix: str) -> Iterator[Path]:
    """A v2 cgroup under ``parent`` handed to the test user (directory and its procs,
    subtree_control and threads files chowned, as systemd's Delegate= does); killed and
    removed, children first, afterwards."""
    cg = parent / f"{prefix}-{os.getpid()}-{secrets.token_hex(3)}"
    cg.mkdir()
    for entry in (cg, cg / "cgroup.procs", cg / "cgroup.subtree_control", cg / "cgroup.threads"):
        os.chown(entry, unpriv.uid, unpriv.gid)
    try:
        yield cg
    finally:
        (cg / "cgroup.kill").write_text("1")
        for child in sorted((p for p in cg.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            rmdir_when_empty(child)
        rmdir_when_empty(cg)
