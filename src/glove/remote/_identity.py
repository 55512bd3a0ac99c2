"""The executor's identity: the administrator's identity file, and measuring ourselves.

``/etc/glove/remote-executor.identity`` is a two-key TOML file written by the administrator::

    executable_digest = "sha256:<64 lowercase hex>"
    image_digest = "sha256:<64 lowercase hex>"

It is trusted only when every directory on its path and the file itself pass the checks a
same-host attacker would have to defeat: each component is opened with ``O_NOFOLLOW`` from
``/`` down (so no symlink anywhere on the path, not only at its end); each directory is owned
by root and not writable by group or others unless it is sticky (``/tmp`` style, where only
an entry's owner may replace it); the file is a regular file with one link, owned by root,
not writable by group or others, non-empty and at most :data:`MAX_IDENTITY_BYTES`. Any
failure is an :class:`IdentityError` naming the fault, and the executor serves nothing.

What "the executable" is for a Python program (see docs/decisions/0012): the interpreter the
kernel is running, opened through ``/proc/self/exe`` (the mapped file, whatever path it was
started by), plus the source of every Glove module the executor's code is made of
(:data:`MEASURED_MODULES`), each opened without following links. The digest is SHA-256 over
a canonical manifest of those files' SHA-256 digests. :func:`measure_executable` computes it;
an administrator runs it with the executor's interpreter to write the identity file.
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import os
import stat
import sys
from pathlib import PurePosixPath
from typing import Final

import msgspec

from glove.remote._config import DIGEST_ALGORITHM, DIGEST_HEX_CHARS
from glove.remote.errors import IdentityError

#: Where the administrator puts the identity. Not configurable by the executor's caller.
IDENTITY_PATH: Final = "/etc/glove/remote-executor.identity"
#: Largest identity file read.
MAX_IDENTITY_BYTES: Final = 4096
#: Bytes hashed per read while measuring.
HASH_CHUNK_BYTES: Final = 1024 * 1024
#: What the kernel says our executable is.
SELF_EXE: Final = "/proc/self/exe"
#: The first line of the measurement manifest (its format version).
MEASUREMENT_FORMAT: Final = "glove-remote-executor-measurement-v1"
#: Every Glove module a fresh ``glove-remote-executor`` process loads (a test pins this list
#: against a real process, so code cannot join the executor without being measured).
MEASURED_MODULES: Final = (
    "glove",
    "glove._lazy",
    "glove._version",
    "glove.errors",
    "glove.exits",
    "glove.protocol",
    "glove.protocol._frames",
    "glove.protocol._json",
    "glove.protocol._limits",
    "glove.protocol.control",
    "glove.protocol.errors",
    "glove.remote",
    "glove.remote._config",
    "glove.remote._executor",
    "glove.remote._identity",
    "glove.remote._runtime",
    "glove.remote._sshconfig",
    "glove.remote._wire",
    "glove.remote.errors",
)

_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class ExecutorIdentity(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The expected digests, as the administrator wrote them.

    Attributes:
        executable_digest: ``sha256:<hex>`` of :func:`measure_executable`'s manifest.
        image_digest: ``sha256:<hex>`` of the container image this host is meant to run.
    """

    executable_digest: str
    image_digest: str


def _check_digest_text(key: str, value: str) -> None:
    algorithm, sep, hexpart = value.partition(":")
    if (
        sep != ":"
        or algorithm != DIGEST_ALGORITHM
        or len(hexpart) != DIGEST_HEX_CHARS
        or any(c not in "0123456789abcdef" for c in hexpart)
    ):
        raise IdentityError("malformed", f"identity {key} must be sha256:<64 lowercase hex>")


def parse_identity(data: bytes) -> ExecutorIdentity:
    """Decode the identity file's bytes.

    Raises:
        IdentityError: ``empty``, ``too_large`` or ``malformed`` (the key is named).
    """
    if not data.strip():
        raise IdentityError("empty", "the identity file is empty")
    if len(data) > MAX_IDENTITY_BYTES:
        raise IdentityError("too_large", f"the identity file exceeds {MAX_IDENTITY_BYTES} bytes")
    try:
        identity = msgspec.toml.decode(data, type=ExecutorIdentity)
    except msgspec.DecodeError as exc:
        raise IdentityError("malformed", f"the identity file is malformed: {exc}") from exc
    _check_digest_text("executable_digest", identity.executable_digest)
    _check_digest_text("image_digest", identity.image_digest)
    return identity


def render_identity(executable_digest: str, image_digest: str) -> bytes:
    """Return identity file bytes for two digests (what an administrator writes).

    Raises:
        IdentityError: a digest is not ``sha256:<64 lowercase hex>``.
    """
    _check_digest_text("executable_digest", executable_digest)
    _check_digest_text("image_digest", image_digest)
    return f'executable_digest = "{executable_digest}"\nimage_digest = "{image_digest}"\n'.encode()


def _check_directory(fd: int, shown: str) -> None:
    st = os.fstat(fd)
    if st.st_uid != 0:
        raise IdentityError("unsafe_directory", f"{shown} is owned by uid {st.st_uid}, not root")
    if stat.S_IMODE(st.st_mode) & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise IdentityError(
            "unsafe_directory",
            f"{shown} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})",
        )


def _open_component(name: str, flags: int, dir_fd: int, shown: str) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise IdentityError("missing", f"{shown} does not exist") from exc
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise IdentityError("link", f"{shown} is a symbolic link") from exc
        if exc.errno == errno.ENOTDIR:
            raise IdentityError("link", f"{shown} is not a directory (or is a link)") from exc
        raise IdentityError("missing", f"cannot open {shown}: {exc.strerror}") from exc


def read_identity_file(path: str = IDENTITY_PATH) -> ExecutorIdentity:
    """Open, check and decode the identity file at the absolute ``path``.

    Raises:
        IdentityError: any fault (``missing``, ``link``, ``unsafe_directory``,
            ``not_regular``, ``not_root``, ``writable``, ``empty``, ``too_large``,
            ``malformed``).
    """
    parts = PurePosixPath(path).parts
    if not path.startswith("/") or len(parts) < 2 or ".." in parts:
        raise IdentityError("missing", f"the identity path must be absolute and plain: {path!r}")
    dir_fd = os.open("/", _DIRECTORY_FLAGS)
    try:
        _check_directory(dir_fd, "/")
        shown = ""
        for component in parts[1:-1]:
            shown += "/" + component
            next_fd = _open_component(component, _DIRECTORY_FLAGS, dir_fd, shown)
            os.close(dir_fd)
            dir_fd = next_fd
            _check_directory(dir_fd, shown)
        fd = _open_component(parts[-1], _FILE_FLAGS, dir_fd, path)
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IdentityError("not_regular", f"{path} is not a regular file")
        if st.st_nlink != 1:
            raise IdentityError("link", f"{path} has {st.st_nlink} hard links; it must have one")
        if st.st_uid != 0:
            raise IdentityError("not_root", f"{path} is owned by uid {st.st_uid}, not root")
        if stat.S_IMODE(st.st_mode) & 0o022:
            raise IdentityError(
                "writable",
                f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})",
            )
        if st.st_size > MAX_IDENTITY_BYTES:
            raise IdentityError("too_large", f"{path} exceeds {MAX_IDENTITY_BYTES} bytes")
        data = b""
        while len(data) <= MAX_IDENTITY_BYTES and (chunk := os.read(fd, MAX_IDENTITY_BYTES + 1)):
            data += chunk
    finally:
        os.close(fd)
    return parse_identity(data)


def _sha256_of(path: str, *, follow: bool) -> str:
    flags = os.O_RDONLY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IdentityError("unmeasurable", f"{path} is not a regular file")
        digest = hashlib.sha256()
        while chunk := os.read(fd, HASH_CHUNK_BYTES):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def measurement_manifest(modules: tuple[str, ...] = MEASURED_MODULES) -> str:
    """Return the manifest that is hashed: the interpreter, then each module's source digest.

    Raises:
        IdentityError: ``unmeasurable``: a file cannot be opened or is not a regular file.
    """
    lines = [MEASUREMENT_FORMAT]
    try:
        lines.append(f"interpreter {_sha256_of(SELF_EXE, follow=True)}")
        for name in sorted(modules):
            module = sys.modules.get(name) or importlib.import_module(name)
            source = getattr(module, "__file__", None)
            if not source:
                raise IdentityError("unmeasurable", f"module {name} has no source file")
            lines.append(f"module {name} {_sha256_of(source, follow=False)}")
    except OSError as exc:
        raise IdentityError("unmeasurable", f"cannot measure the executor: {exc}") from exc
    return "\n".join(lines) + "\n"


def measure_executable() -> str:
    """Return ``sha256:<hex>`` of this process's executor code (see the module docstring).

    Raises:
        IdentityError: ``unmeasurable``.
    """
    return "sha256:" + hashlib.sha256(measurement_manifest().encode()).hexdigest()


def verify_identity(path: str = IDENTITY_PATH) -> ExecutorIdentity:
    """Read the identity file and check it names the executable that is running.

    Raises:
        IdentityError: any fault of :func:`read_identity_file`, ``unmeasurable``, or
            ``mismatch`` when the measured executable differs from the expected one.
    """
    identity = read_identity_file(path)
    measured = measure_executable()
    if measured != identity.executable_digest:
        raise IdentityError(
            "mismatch",
            f"the running executor measures {measured}, but {path} expects "
            f"{identity.executable_digest}",
        )
    return identity
