"""Where ``glove daemon`` writes, and how: layout, executable resolution, manifest, atomic files.

What install writes, and nothing else::

    $XDG_CONFIG_HOME/systemd/user/gloved.service   (Linux; rendered from deploy/systemd/)
    ~/Library/LaunchAgents/org.glove.gloved.plist   (macOS; rendered from deploy/launchd/)
    $XDG_STATE_HOME/glove/daemon-install.json       the manifest: each file's SHA-256 and the
                                                    directories install had to create

Files are written atomically: a temporary file in the same directory, ``fsync``,
``rename`` over the target, ``fsync`` of the directory. The executable is resolved here,
locally, and refused when another user could replace it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import msgspec

from glove.host._service_managers import Launchd, Platform, ServiceManager, SystemdUser
from glove.host._service_units import (
    LAUNCHD_LABEL,
    SYSTEMD_UNIT_NAME,
    render_launchd_plist,
    render_systemd_unit,
)
from glove.host.errors import (
    ExecutableNotFound,
    ManifestError,
    ServiceError,
    UnsafeExecutable,
    UnsupportedPlatform,
)

MANIFEST_NAME: Final = "daemon-install.json"
MANIFEST_VERSION: Final = 1
MAX_MANIFEST_BYTES: Final = 64 * 1024
SERVICE_FILE_MODE: Final = 0o644
MANIFEST_MODE: Final = 0o600
PRIVATE_DIR_MODE: Final = 0o700
PUBLIC_DIR_MODE: Final = 0o755
GLOVED_NAME: Final = "gloved"
GLOVED_TOML_NAME: Final = "gloved.toml"
WANTS_DIR_NAME: Final = "default.target.wants"


# -- where things go -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the service file, the manifest, the runtime directory and the log live."""

    platform: Platform
    service_path: Path
    manifest_path: Path
    runtime_dir: Path
    log_path: Path | None
    uid: int
    #: The gloved.toml the service is bound to (``gloved --config``).
    config_path: Path

    @property
    def manager(self) -> ServiceManager:
        """The service manager for this layout."""
        if self.platform == "systemd":
            return SystemdUser()
        assert self.log_path is not None
        return Launchd(self.uid, self.service_path, self.log_path)


def _xdg_dir(environ: Mapping[str, str], var: str, home: Path, fallback: str) -> Path:
    value = environ.get(var, "")
    # The XDG spec: a relative value is invalid and must be ignored.
    return Path(value) if value.startswith("/") else home / fallback


def default_layout(
    platform: Platform | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Layout:
    """The layout for this user on this platform (or on ``platform``, for a dry run).

    Raises:
        UnsupportedPlatform: neither Linux (systemd) nor macOS (launchd).
    """
    from glove.control import choose_runtime_dir

    env = os.environ if environ is None else environ
    if platform is None:
        if sys.platform.startswith("linux"):
            platform = "systemd"
        elif sys.platform == "darwin":
            platform = "launchd"
        else:
            raise UnsupportedPlatform(f"glove daemon supports Linux and macOS, not {sys.platform}")
    base = Path(env["HOME"]) if home is None and env.get("HOME") else (home or Path.home())
    state = _xdg_dir(env, "XDG_STATE_HOME", base, ".local/state") / "glove" / MANIFEST_NAME
    config = _xdg_dir(env, "XDG_CONFIG_HOME", base, ".config")
    gloved_toml = config / "glove" / GLOVED_TOML_NAME
    if platform == "systemd":
        return Layout(
            platform,
            config / "systemd" / "user" / SYSTEMD_UNIT_NAME,
            state,
            choose_runtime_dir(env).directory,
            None,
            os.getuid(),
            gloved_toml,
        )
    return Layout(
        platform,
        base / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist",
        state,
        choose_runtime_dir(env).directory,
        base / "Library" / "Logs" / "gloved.log",
        os.getuid(),
        gloved_toml,
    )


def resolve_gloved(*, interpreter: str | None = None, search_path: str | None = None) -> Path:
    """Find the local ``gloved``: beside the running interpreter, else on ``PATH``.

    The interpreter's directory is taken as is (a virtualenv's ``bin/python`` is a link
    whose target lives elsewhere); the executable found is resolved to an absolute path.

    Raises:
        ExecutableNotFound: neither place has one.
    """
    beside = Path(interpreter or sys.executable).absolute().parent / GLOVED_NAME
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside.resolve()
    found = shutil.which(GLOVED_NAME, path=search_path)
    if found is None:
        raise ExecutableNotFound(
            f"no {GLOVED_NAME} beside {interpreter or sys.executable} or on PATH; install glove "
            "(pip install glove) into the environment you run `glove daemon install` from"
        )
    return Path(found).resolve()


def check_executable(path: Path, uid: int | None = None) -> None:
    """Refuse an executable that another user could replace.

    The file and every directory above it must be owned by this user or root and not be
    writable by group or others (a sticky directory, like ``/tmp``, may be: nobody else can
    rename what we own in it).

    Raises:
        UnsafeExecutable: a file or directory on the way fails the rule.
    """
    me = os.getuid() if uid is None else uid
    for i, node in enumerate([path, *path.parents]):
        st = node.stat()
        writable = st.st_mode & 0o022
        sticky = bool(st.st_mode & 0o1000) and i > 0
        if st.st_uid not in (me, 0) or (writable and not sticky):
            raise UnsafeExecutable(
                f"{node} (on the way to {path}) is owned by uid {st.st_uid} with mode "
                f"{st.st_mode & 0o7777:04o}: another user could replace gloved"
            )


# -- the manifest and the files ------------------------------------------------------------------


class ManifestEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One file install wrote, and the hash of what it wrote."""

    path: str
    sha256: str


class Manifest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What install wrote: files with their hashes, directories it created (parents first)."""

    version: int
    platform: str
    service: str
    executable: str
    files: list[ManifestEntry]
    directories: list[str]


class ServiceFile(msgspec.Struct, frozen=True):
    """A file install writes: its path and its content."""

    path: str
    content: str


def sha256(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def read_manifest(path: Path) -> Manifest | None:
    """Read the manifest, or None when there is none.

    Raises:
        ManifestError: it exists but is not a regular file of this user, is too large, or
            does not decode strictly.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ManifestError(f"cannot open the install manifest {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise ManifestError(f"{path} is not an owner-only file of uid {os.getuid()}")
        data = f.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{path} is over {MAX_MANIFEST_BYTES} bytes")
    try:
        manifest = msgspec.json.decode(data, type=Manifest)
    except msgspec.DecodeError as exc:
        raise ManifestError(f"{path} is not a glove install manifest: {exc}") from exc
    if manifest.version != MANIFEST_VERSION:
        raise ManifestError(f"{path} has manifest version {manifest.version}")
    return manifest


def encode_manifest(manifest: Manifest) -> bytes:
    """The manifest's bytes on disk (deterministic: equal manifests, equal bytes)."""
    return msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n"


FileKind = Literal["absent", "same", "ours", "foreign"]


def classify(path: Path, wanted: bytes | None, recorded_sha: str | None) -> tuple[FileKind, str]:
    """What is at ``path``: nothing, exactly ``wanted``, what install last wrote, or not ours.

    Returns the kind and, for ``foreign``, why.
    """
    try:
        st = path.lstat()
    except FileNotFoundError:
        return "absent", ""
    why = ""
    if not stat.S_ISREG(st.st_mode):
        why = "it is not a regular file"
    elif st.st_uid != os.getuid():
        why = f"it is owned by uid {st.st_uid}"
    else:
        data = path.read_bytes()
        if wanted is not None and data == wanted:
            return "same", ""
        if recorded_sha is not None and sha256(data) == recorded_sha:
            return "ours", ""
        why = "install has no record of it" if recorded_sha is None else "edited since install"
    return "foreign", why


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` atomically: temp file, fsync, rename, fsync the directory.

    Raises:
        OSError: the write failed (the target is untouched and the temp file removed).
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)  # the umask must not narrow a unit launchd or systemd has to read
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def missing_dirs(directory: Path) -> list[Path]:
    """``directory`` and those of its parents that do not exist, parents first."""
    missing = []
    node = directory
    while not node.exists():
        missing.append(node)
        node = node.parent
    return missing[::-1]


def make_dirs(directory: Path, mode: int) -> list[Path]:
    """Create ``directory`` and its missing parents; return those created, parents first."""
    created = []
    for path in missing_dirs(directory):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=mode)
            created.append(path)
            fsync_dir(path.parent)
    return created


def remove_empty_dirs(directories: Sequence[str]) -> list[str]:
    """Remove the recorded directories that are empty, children first; return those removed."""
    removed = []
    for name in reversed(directories):
        try:
            Path(name).rmdir()
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue
            raise
        removed.append(name)
        fsync_dir(Path(name).parent)
    return removed


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` (no second install or uninstall meanwhile).

    Raises:
        ServiceError: another install or uninstall holds it.
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ServiceError(
                f"another glove daemon install or uninstall holds {directory}"
            ) from None
        yield
    finally:
        os.close(fd)


def check_state_dir(directory: Path) -> None:
    """Refuse a manifest directory another user owns or can write.

    Raises:
        ManifestError: it is a symlink, not a directory, not ours, or open to others.
    """
    from glove.control import ControlError, check_owner_only_dir

    try:
        check_owner_only_dir(directory)
    except ControlError as exc:
        raise ManifestError(f"the state directory is unsafe: {exc}") from exc


def render_files(layout: Layout, executable: Path) -> str:
    """The service definition install writes for ``executable`` on ``layout``.

    Raises:
        TemplateError: a template is missing or renders wrongly.
        UnsafeExecutable: the path cannot be carried into the definition safely.
    """
    if layout.platform == "systemd":
        return render_systemd_unit(executable, layout.config_path)
    assert layout.log_path is not None
    return render_launchd_plist(
        executable, layout.runtime_dir, layout.log_path, layout.config_path
    ).decode()
