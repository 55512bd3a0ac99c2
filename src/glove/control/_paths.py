"""Where the control service lives on disk, and the checks that keep it owner-only.

``$XDG_RUNTIME_DIR/glove/`` (falling back to ``/run/user/<uid>/glove`` and then
``/tmp/glove-<uid>``) is a 0700 directory owned by the invoking user; it holds
``gloved.sock`` (0600), ``bootstrap-secret`` (0600, rewritten at every start) and
``gloved.lock``. A directory that exists with another owner, a
group/other permission bit, or as a symlink is refused, never "fixed".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from glove.control.errors import DaemonAlreadyRunning, UnsafeRuntimeDir

SOCKET_NAME: Final = "gloved.sock"
LOCK_NAME: Final = "gloved.lock"
SECRET_NAME: Final = "bootstrap-secret"  # noqa: S105 - a file name, not a secret
DIR_MODE: Final = 0o700
SOCKET_MODE: Final = 0o600


@dataclass(frozen=True, slots=True)
class RuntimePaths:
    """The runtime directory and the files in it."""

    directory: Path

    @property
    def socket(self) -> Path:
        """The control socket."""
        return self.directory / SOCKET_NAME

    @property
    def secret(self) -> Path:
        """The per-start bootstrap secret a client proves in ``hello``."""
        return self.directory / SECRET_NAME

    @property
    def lock(self) -> Path:
        """The single-instance lock file."""
        return self.directory / LOCK_NAME


def default_runtime_dir() -> Path:
    """Return the runtime directory for this user (not created)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "glove"
    run_user = Path(f"/run/user/{os.getuid()}")
    if run_user.is_dir():
        return run_user / "glove"
    return Path(f"/tmp/glove-{os.getuid()}")  # noqa: S108 - verified owner-only below


def check_owner_only_dir(path: Path) -> None:
    """Verify ``path`` is a real directory owned by us with mode 0700.

    Raises:
        UnsafeRuntimeDir: a symlink, not a directory, another owner, or too open.
    """
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeRuntimeDir(f"{path} is not a directory (a symlink or another file type)")
    if st.st_uid != os.getuid():
        raise UnsafeRuntimeDir(f"{path} is owned by uid {st.st_uid}, not by uid {os.getuid()}")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise UnsafeRuntimeDir(
            f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; it must be 0700 (owner only)"
        )


def prepare_runtime_dir(directory: Path | None = None) -> RuntimePaths:
    """Create (0700) or verify the runtime directory.

    Raises:
        UnsafeRuntimeDir: it exists and is not owner-only.
    """
    path = directory or default_runtime_dir()
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=DIR_MODE)
    check_owner_only_dir(path)
    return RuntimePaths(path)


def acquire_lock(paths: RuntimePaths) -> int:
    """Take the single-instance lock; return its fd (held for the daemon's life).

    Raises:
        DaemonAlreadyRunning: another instance holds it.
    """
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DaemonAlreadyRunning(
            f"another gloved (pid {holder}) holds {paths.lock}; stop it first"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
