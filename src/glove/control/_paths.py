"""Where the control service lives on disk, and the checks that keep it owner-only.

The names and the socket address are :mod:`glove.control._address`'s (no pathlib, for the
CLI's one-call commands), re-exported here.

The runtime directory holds ``gloved.sock`` (0600), ``bootstrap-secret`` (0600, rewritten at
every start) and ``gloved.lock``; it is a 0700 directory owned by the invoking user. Every
client and ``gloved`` pick it by the same rule, :func:`glove.config.choose_runtime_dir` (its
docstring has the rule; never a shared directory such as ``/tmp``). A directory that exists
with another owner, a group/other permission bit, or as a symlink is refused, never "fixed".

A Unix socket's path is at most :data:`MAX_SOCKET_PATH_BYTES` (``sun_path`` is 108 bytes with
its NUL on Linux, 104 on macOS). Where ``gloved.sock``'s path is longer, both ends use
``/proc/self/fd/<n>/gloved.sock`` through an ``O_PATH`` descriptor of the directory
(:func:`socket_address`), as Podman's conmon does; without ``/proc`` (macOS) ``gloved`` refuses
to start and says to set a shorter ``XDG_RUNTIME_DIR``.

The lock is an ``flock`` on ``gloved.lock``, which holds the holder's pid. A ``flock`` belongs
to the open file description, so a child that inherited the descriptor (a fork that has not
yet closed it) holds it even after the gloved that took it was killed. :func:`acquire_lock`
therefore tells the two apart: a live recorded holder is refused at once; a lock whose
recorded holder is gone is waited for (:data:`LOCK_STALE_GRACE_S`, the holders named in one
log line) and refused, naming the processes that still hold it, if they do not let go.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from glove.config import choose_runtime_dir, chosen_runtime_dir
from glove.control._address import (
    LOCK_NAME,
    MAX_SOCKET_PATH_BYTES,
    PROC_FD_DIR,
    SECRET_NAME,
    SOCKET_NAME,
    long_socket_route,
)
from glove.control.errors import DaemonAlreadyRunning, SocketPathTooLong, UnsafeRuntimeDir

DIR_MODE: Final = 0o700
SOCKET_MODE: Final = 0o600
PROC_FD: Final = Path(PROC_FD_DIR)

#: How long a start waits for the descendants of a gone gloved to let go of its lock.
LOCK_STALE_GRACE_S: Final = 5.0
#: How often it tries the lock again meanwhile.
LOCK_RETRY_S: Final = 0.05
#: Bytes of a holder's command line shown in a message.
MAX_SHOWN_CMDLINE: Final = 80


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
    """Return the runtime directory for this user (not created): see :func:`choose_runtime_dir`."""
    return Path(chosen_runtime_dir())


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


def _make_parents(path: Path) -> None:
    """Create the missing ancestors of ``path`` owner-only (0700), as the state directory
    ``glove setup`` makes must be; an existing one is left as it is."""
    missing = []
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=DIR_MODE)


def prepare_runtime_dir(directory: Path | None = None) -> RuntimePaths:
    """Create (0700) or verify the runtime directory (default: :func:`default_runtime_dir`).

    Missing ancestors are created 0700. The fallback under the state directory also needs
    the state directory itself to be owner-only, as ``glove setup`` leaves it.

    Raises:
        UnsafeRuntimeDir: it (or, for the fallback, the state directory) exists and is not
            owner-only.
        SocketPathTooLong: ``gloved.sock``'s path is too long for a Unix socket and there is
            no ``/proc`` route around it.
    """
    if directory is None:
        choice = choose_runtime_dir()
        path = choice.directory
        fallback = choice.source == "state"
    else:
        path, fallback = directory, False
    sock = path / SOCKET_NAME
    if len(os.fsencode(sock)) > MAX_SOCKET_PATH_BYTES and not long_socket_route():
        raise SocketPathTooLong(
            f"{sock} is {len(os.fsencode(sock))} bytes, over the {MAX_SOCKET_PATH_BYTES} a "
            "Unix socket path takes: set XDG_RUNTIME_DIR (or pass --runtime-dir) to a shorter "
            "directory of yours"
        )
    _make_parents(path)
    if fallback:
        check_owner_only_dir(path.parent)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=DIR_MODE)
    check_owner_only_dir(path)
    return RuntimePaths(path)


def acquire_lock(paths: RuntimePaths, *, stale_grace_s: float = LOCK_STALE_GRACE_S) -> int:
    """Take the single-instance lock; return its fd (held for the daemon's life).

    A lock whose recorded holder is alive is refused at once. One whose recorded holder is
    gone (or a zombie) is held by a process that inherited its descriptor: the start waits up
    to ``stale_grace_s`` for it, saying so once in the log.

    Raises:
        DaemonAlreadyRunning: another instance holds it, or the holders of a gone one's
            lock did not let go in time (the message names them).
    """
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        _lock_or_wait(fd, paths, stale_grace_s)
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _lock_or_wait(fd: int, paths: RuntimePaths, grace_s: float) -> None:
    deadline: float | None = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            return
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        recorded = int(text) if text.isdecimal() else None
        holders = _holders(fd)
        # The recorded holder is running and (as far as we can see) holds it: a live gloved.
        # A running recorded pid that does not hold it was reused by another process.
        if recorded is not None and _running(recorded) and (recorded in holders or not holders):
            raise DaemonAlreadyRunning(
                f"another gloved (pid {recorded}) holds {paths.lock}; stop it first"
            )
        who = f"gloved (pid {recorded})" if recorded is not None else "the gloved that took it"
        if deadline is None:
            deadline = time.monotonic() + grace_s
            import logging  # only here: a client that imports this module never logs

            logging.getLogger(__name__).warning(
                "%s is gone but its lock %s is still held by %s: waiting up to %.0f s",
                who,
                paths.lock,
                _describe(holders),
                grace_s,
            )
        elif time.monotonic() >= deadline:
            raise DaemonAlreadyRunning(
                f"{who} is gone but its lock {paths.lock} is still held by {_describe(holders)} "
                "(a process that inherited its descriptor); stop it first"
            )
        time.sleep(LOCK_RETRY_S)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie holds no lock)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:
        return True  # it exists; we may not look at it
    # "pid (comm) S ...": the state follows the last ')' (comm may contain one).
    state = stat_line[stat_line.rfind(b")") + 2 : stat_line.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def _holders(fd: int) -> list[int]:
    """Pids of the processes (this user can see) with the lock file open, but us."""
    target = os.fstat(fd)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for link in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    held = link.stat()
                    if (held.st_dev, held.st_ino) == (target.st_dev, target.st_ino):
                        found.append(int(entry.name))
                        break
    return sorted(found)


def _describe(pids: list[int]) -> str:
    """``pid 12 (python -m ...), pid 13 (...)``, or what to say when none can be seen."""
    if not pids:
        return "processes this user cannot see"
    shown = []
    for pid in pids:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            raw = b""
        # One line whatever the holder's argv holds (newlines, escapes: it is another
        # process's text, printed to the operator).
        text = raw.decode(errors="replace")
        cmdline = " ".join("".join(c if c.isprintable() else " " for c in text).split())
        if len(cmdline) > MAX_SHOWN_CMDLINE:
            cmdline = cmdline[: MAX_SHOWN_CMDLINE - 3] + "..."
        shown.append(f"pid {pid} ({cmdline})" if cmdline else f"pid {pid}")
    return ", ".join(shown)
