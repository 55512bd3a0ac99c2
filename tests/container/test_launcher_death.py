"""A launcher killed at any point of a launch leaves no child holding its descriptors.

gloved holds an ``flock`` on ``gloved.lock`` for its life; a ``flock`` belongs to the open
file description, so any child of the launcher that still has the descriptor keeps the lock
(and every other descriptor: journals, the listening socket) after the launcher is gone, and
the restarted gloved refuses to start. These tests kill a launcher that holds such a lock
between the clone and the go byte, and while its sandbox runs, on both launch paths.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import GloveExec

#: How long the launcher's children may take to notice it died and let go (an event with a
#: deadline: they notice through a pidfd at once; the bound only ends a broken run).
RELEASE_DEADLINE_S = 30.0

LAUNCHER = r"""
import fcntl, os, signal, sys
from glove.container import Bind, SandboxSpec, launch
from glove.container.linux import _launch

lock_path, workspace, point = sys.argv[1:4]
lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as gloved holds gloved.lock

def killed(*_args):
    os.kill(os.getpid(), signal.SIGKILL)

if point == "before-go":  # after the clone (and the fork path's unshare), before "G"
    _launch._write_id_maps = killed
binds = tuple(Bind(p, optional=p != "/usr") for p in ("/usr", "/bin", "/lib", "/lib64"))
spec = SandboxSpec(argv=("sleep", "300"), binds=binds, workspace=workspace,
                   env={"PATH": "/usr/bin:/bin"})
launch(spec, (0, 1, 2))
killed()  # "running": the sandbox runs its command
"""


def _lock_is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def _openers(path: Path) -> list[int]:
    """Pids with ``path`` open (as far as we can see: root sees everyone)."""
    target = path.stat()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal():
            continue
        try:
            links = list((entry / "fd").iterdir())
        except OSError:
            continue
        for link in links:
            try:
                held = link.stat()
            except OSError:
                continue
            if (held.st_dev, held.st_ino) == (target.st_dev, target.st_ino):
                found.append(int(entry.name))
                break
    return found


@pytest.mark.parametrize("point", ["before-go", "running"])
@pytest.mark.parametrize("mode", ["fork", "clone3"])
def test_a_killed_launchers_lock_is_free_once_it_is_gone(
    glove_exec: GloveExec, mode: str, point: str
) -> None:
    """SIGKILL of a launcher holding an flock'd file, before the go byte or while its
    sandbox runs: the lock is free and no process has the file open soon after (once a
    child waited for the go byte for ever, holding the lock and the go pipe's write end)."""
    lock = glove_exec.workspace.parent / "gloved.lock"
    argv = [
        *glove_exec.wrap,
        "env",
        f"GLOVE_SANDBOX_LAUNCH={mode}",
        glove_exec.python,
        "-c",
        LAUNCHER,
        str(lock),
        str(glove_exec.workspace),
        point,
    ]
    # No pipes: a child that kept the launcher's descriptors would keep them open too.
    errors = glove_exec.workspace.parent / "launcher.err"
    with errors.open("wb") as err:
        code = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=err, timeout=120).returncode
    assert code in (-9, 137), errors.read_text()  # it killed itself (137: through runuser)
    deadline = time.monotonic() + RELEASE_DEADLINE_S
    while not _lock_is_free(lock) or _openers(lock):
        if time.monotonic() > deadline:
            holders = _openers(lock)
            for pid in holders:  # leave nothing behind a failing run
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the lock is still held after its launcher died: by {holders}")
        time.sleep(0.05)
