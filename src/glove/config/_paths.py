"""Where Glove keeps its own files (XDG), and the owner-only rule every one of them follows.

::

    $XDG_CONFIG_HOME/glove/       0700  configuration and keys (never in a plan, never shown
      gloved.toml                 0600    to a sandbox)
      journal.key                 0600  the HMAC key of the journals (64 hex digits)
      receipt-signing.key         0600  the Ed25519 key that signs receipt checkpoints
    $XDG_STATE_HOME/glove/        0700  durable state
      receipts/                         the receipt journal (a transparency log)
      sessions/                         the session journal (plans and every transition)
      exposures.json              0600  the exposure registry
      library/                    0700  the library store (glove.library: sha256-<hex>
                                        bundles, 0400)
      sessions-data/<id>/               each session's output
      run/                        0700  the runtime directory when there is no per-user one
    $XDG_RUNTIME_DIR/glove/       0700  gloved.sock, gloved.lock, bootstrap-secret (else
                                        /run/user/<uid>/glove, else the state dir's run/:
                                        glove.config.choose_runtime_dir, never /tmp)

An existing path that is owned by someone else, is open to group or others, or is a
symlink is refused, never repaired: a tool that "fixes" permissions on a path someone else
controls has already lost.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from glove.config._runtime_dir import choose_runtime_dir, glove_state_dir
from glove.config.errors import UnsafePath

DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600


@dataclass(frozen=True, slots=True)
class GlovePaths:
    """Every file and directory of Glove's own, for one user."""

    config_dir: Path
    state_dir: Path
    runtime_dir: Path

    @property
    def gloved_toml(self) -> Path:
        """gloved's configuration."""
        return self.config_dir / "gloved.toml"

    @property
    def hmac_key(self) -> Path:
        """The journals' HMAC key."""
        return self.config_dir / "journal.key"

    @property
    def signing_key(self) -> Path:
        """The receipts' Ed25519 signing key."""
        return self.config_dir / "receipt-signing.key"

    @property
    def receipts_journal(self) -> Path:
        """The receipt journal (its directory)."""
        return self.state_dir / "receipts"

    @property
    def sessions_journal(self) -> Path:
        """The session journal (its directory)."""
        return self.state_dir / "sessions"

    @property
    def exposures_file(self) -> Path:
        """The exposure registry."""
        return self.state_dir / "exposures.json"

    @property
    def library_dir(self) -> Path:
        """The library store (digest-named bundles, ``glove library add``)."""
        return self.state_dir / "library"

    @property
    def sessions_data(self) -> Path:
        """Where each session's output is kept."""
        return self.state_dir / "sessions-data"


def _xdg(environ: Mapping[str, str], var: str, fallback: str) -> Path:
    value = environ.get(var, "")
    if value.startswith("/"):  # the XDG spec: a relative value is ignored
        return Path(value)
    home = environ.get("HOME") or str(Path.home())
    return Path(home) / fallback


def glove_paths(environ: Mapping[str, str] | None = None) -> GlovePaths:
    """The paths for this user (from ``environ``, default the process's environment)."""
    env = os.environ if environ is None else environ
    return GlovePaths(
        config_dir=_xdg(env, "XDG_CONFIG_HOME", ".config") / "glove",
        state_dir=glove_state_dir(env),
        runtime_dir=choose_runtime_dir(env).directory,
    )


def check_private(path: Path, *, directory: bool) -> None:
    """Refuse ``path`` unless it is ours, not a symlink, of the right type and owner-only.

    Raises:
        UnsafePath: it is not (the message says why); nothing is changed.
    """
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(f"{path} is a symlink; refusing it (remove it or point XDG_* elsewhere)")
    wanted = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    if not wanted:
        kind = "a directory" if directory else "a regular file"
        raise UnsafePath(f"{path} is not {kind}; refusing it")
    if info.st_uid != os.getuid():
        raise UnsafePath(f"{path} is owned by uid {info.st_uid}, not by you (uid {os.getuid()})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise UnsafePath(
            f"{path} has mode {stat.S_IMODE(info.st_mode):04o}: group or others can reach it; "
            f"Glove does not repair that: fix it yourself (chmod go= {path}) if it is yours"
        )


def ensure_private_dir(path: Path) -> bool:
    """Create ``path`` (0700, parents as needed) or check it; return whether it was created.

    Raises:
        UnsafePath: it exists and is not an owner-only directory of ours.
        OSError: it cannot be created.
    """
    if path.exists() or path.is_symlink():
        check_private(path, directory=True)
        return False
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    try:
        path.mkdir(mode=DIR_MODE)
    except FileExistsError:
        check_private(path, directory=True)
        return False
    path.chmod(DIR_MODE)  # the umask may have narrowed mkdir's mode; never widened it
    return True


def create_private_file(path: Path, data: bytes) -> bool:
    """Create ``path`` (0600, ``O_EXCL``, no symlink followed) with ``data``, durably, or check
    the file already there; return whether it was created.

    Raises:
        UnsafePath: it exists and is not an owner-only regular file of ours.
        OSError: it cannot be written.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     FILE_MODE)  # fmt: skip
    except FileExistsError:
        check_private(path, directory=False)
        return False
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    os.close(fd)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return True


def read_private_file(path: Path, max_bytes: int) -> bytes:
    """Read an owner-only file of ours (checked first, never through a symlink).

    Raises:
        UnsafePath: it is not an owner-only regular file of ours.
        OSError: it cannot be read (missing included).
    """
    check_private(path, directory=False)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.read(fd, max_bytes + 1)[: max_bytes + 1]
    finally:
        os.close(fd)
