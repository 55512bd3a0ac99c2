"""The persistent per-agent home: where it lives, and reading and writing files in it safely.

Each agent gets one home directory that survives between runs, so its onboarding, approvals,
logins and history are kept: ``$XDG_DATA_HOME/glove/agents/NAME`` (``~/.local/share`` when
``XDG_DATA_HOME`` is unset), created owner-only (0700, parents 0700 too). It is bound
read-write into the sandbox at the same path and ``HOME`` points at it.

The sandbox can write anything in the home, including symlinks planted where Glove later
writes the agent's configuration. So every file Glove touches there is reached from a
descriptor of the home with ``O_NOFOLLOW`` at each step, read with a size cap, and replaced
by writing a new file beside it and renaming it over the old one (a rename replaces a
planted link itself, never what it points to). A non-directory where a directory should be,
or a link where a file should be, is refused (:class:`AgentHomeError`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from glove.agents.errors import AgentHomeError

#: Mode of the home and of the directories Glove creates on the way to it.
HOME_MODE: Final = 0o700
#: Mode of the files Glove writes in the home.
FILE_MODE: Final = 0o600
#: Largest agent configuration file read (Claude Code keeps project history in its file).
MAX_CONFIG_BYTES: Final = 32 * 1024 * 1024
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def data_home(env: dict[str, str]) -> Path:
    """``$XDG_DATA_HOME``, or ``~/.local/share`` (the XDG default).

    Raises:
        AgentHomeError: neither ``XDG_DATA_HOME`` (absolute) nor ``HOME`` is set.
    """
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg.startswith("/"):
        return Path(xdg)
    home = env.get("HOME", "")
    if not home.startswith("/"):
        raise AgentHomeError("cannot place the agent's home: neither XDG_DATA_HOME nor HOME set")
    return Path(home) / ".local" / "share"


def agent_home_path(name: str, env: dict[str, str]) -> Path:
    """Where agent ``name``'s home lives (nothing is created).

    Raises:
        AgentHomeError: ``name`` is not a plain identifier, or no data directory is known.
    """
    if not name.replace("-", "_").isidentifier():
        raise AgentHomeError(f"bad agent home name {name!r}")
    return data_home(env) / "glove" / "agents" / name


def ensure_home(path: Path) -> Path:
    """Create ``path`` (and missing parents) owner-only; refuse a home that is not safe.

    Raises:
        AgentHomeError: it is a symlink or not a directory, not owned by this user, or open
            to others.
    """
    try:
        path.mkdir(mode=HOME_MODE, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise AgentHomeError(f"cannot create the agent home {path}: {exc.strerror}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise AgentHomeError(f"the agent home {path} is not a directory (a symlink?)")
    if info.st_uid != os.geteuid():
        raise AgentHomeError(f"the agent home {path} belongs to uid {info.st_uid}, not to you")
    if info.st_mode & 0o077:
        try:
            path.chmod(HOME_MODE)
        except OSError as exc:
            raise AgentHomeError(f"cannot make {path} owner-only: {exc.strerror}") from exc
    return path


@contextlib.contextmanager
def _directory(home: Path, parts: tuple[str, ...], *, create: bool) -> Iterator[int]:
    """A descriptor of ``home/parts...``, each step opened without following a link."""
    try:
        fd = os.open(home, _DIR_FLAGS)
    except OSError as exc:
        raise AgentHomeError(f"cannot open the agent home {home}: {exc.strerror}") from exc
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, HOME_MODE, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise AgentHomeError(
                        f"{home}/{'/'.join(parts)} is not a directory (a link planted by the "
                        "agent?): remove it"
                    ) from exc
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def read_home_file(home: Path, relative: str) -> bytes | None:
    """Read ``home/relative``, never through a link; None when it does not exist.

    Raises:
        AgentHomeError: a link or non-file is in the way, or it cannot be read.
        AgentConfigError: it is larger than :data:`MAX_CONFIG_BYTES`.
    """
    from glove.agents.errors import AgentConfigError

    *parents, name = Path(relative).parts
    try:
        with _directory(home, tuple(parents), create=False) as dir_fd:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError:
                return None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise AgentHomeError(f"{home / relative} is not a regular file: remove it")
                data = b""
                while chunk := os.read(fd, 1 << 20):
                    data += chunk
                    if len(data) > MAX_CONFIG_BYTES:
                        raise AgentConfigError(
                            f"{home / relative} is larger than {MAX_CONFIG_BYTES} bytes"
                        )
                return data
            finally:
                os.close(fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise AgentHomeError(f"{home / relative} is a symlink: remove it") from exc
        raise AgentHomeError(f"cannot read {home / relative}: {exc.strerror}") from exc


def write_home_file(home: Path, relative: str, data: bytes) -> None:
    """Replace ``home/relative`` with ``data`` (0600), creating directories on the way.

    Written to a new file beside it, flushed, then renamed over it: a link planted at the
    name is replaced, never followed.

    Raises:
        AgentHomeError: a directory on the way is a link or not a directory, or the write
            failed.
    """
    *parents, name = Path(relative).parts
    temp = f".{name}.glove-{os.getpid()}"
    try:
        with _directory(home, tuple(parents), create=True) as dir_fd:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dir_fd)
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                FILE_MODE,
                dir_fd=dir_fd,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        raise AgentHomeError(f"cannot write {home / relative}: {exc.strerror}") from exc
