"""Composing the construction-only ``remote_linux_container`` runtime.

:func:`compose_remote_runtime` is what ``gloved`` calls at start when ``[remote_backend]`` is
present. It validates the section, writes ``remote/ssh_config`` and ``remote/known_hosts``
beneath the daemon's owner-only runtime directory, and returns a :class:`RemoteRuntime` that
keeps both image values and says, through :meth:`RemoteRuntime.capabilities`, that it can do
nothing: no lifecycle, no runtime adapter, no resource enforcement, no receipts. It performs
no DNS lookup, network probe, authentication, SSH process launch or Docker operation: the
only system calls are on the runtime directory.

Each file is written the way a crash cannot half-do: created 0600 with ``O_EXCL`` under a
temporary name in the same directory, written, fsynced, renamed over the final name, and the
directory fsynced. Every step goes through a directory descriptor opened with
``O_NOFOLLOW``, so a symlink planted in place of ``remote/`` or a file is refused, not
followed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, NoReturn

import msgspec

from glove.remote._config import RemoteBackendConfig, validate_remote_backend
from glove.remote._sshconfig import SSH_HOST_ALIAS, render_known_hosts, render_ssh_config
from glove.remote.errors import RemoteFilesError, RemoteMethodNotFound

#: The name the runtime reports in ``capabilities``.
BACKEND_NAME: Final = "remote_linux_container"
#: The capabilities schema version of a construction-only runtime.
CAPABILITIES_SCHEMA_VERSION: Final = 0
#: The subdirectory of the runtime directory that holds the SSH files, and their names.
REMOTE_DIR_NAME: Final = "remote"
SSH_CONFIG_NAME: Final = "ssh_config"
KNOWN_HOSTS_NAME: Final = "known_hosts"
DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600
#: The six limits of the Sage contract, as ``capabilities`` lists them.
SIX_LIMITS: Final = ("wall_time", "cpu_time", "memory", "pids", "disk", "output")
#: The mechanism every limit has on this runtime.
MECHANISM_UNAVAILABLE: Final = "unavailable"

Mechanism = Literal["unavailable"]


class RemoteCapabilities(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``capabilities`` reports for the remote runtime: that nothing is operational.

    Attributes:
        schema_version: 0, the construction-only schema.
        backend: ``remote_linux_container``.
        lifecycle_operational: False: no session can be created, started or stopped.
        runtime_adapter: False: no container runtime is driven.
        receipts: False: no terminal receipt can come from this runtime.
        managed_runtimes: the runtimes this backend manages: none.
        resource_mechanisms: each of the six limits mapped to ``unavailable``.
        container_image: the configured image reference (kept, never pulled).
        container_image_digest: its digest (kept, never checked against a registry).
    """

    backend: Literal["remote_linux_container"]
    container_image: str
    container_image_digest: str
    resource_mechanisms: dict[str, Mechanism]
    schema_version: int = CAPABILITIES_SCHEMA_VERSION
    lifecycle_operational: bool = False
    runtime_adapter: bool = False
    receipts: bool = False
    managed_runtimes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RemoteRuntime:
    """The constructed, deliberately non-operational remote runtime.

    Attributes:
        config: the validated ``[remote_backend]`` section.
        container_image: the untagged ``name@sha256:...`` reference.
        container_image_digest: ``sha256:...``, equal to the reference's digest.
        ssh_config_path: the isolated client config (``ssh -F`` this, destination
            :data:`SSH_HOST_ALIAS`).
        known_hosts_path: the pinned known_hosts.
        ssh_destination: the destination name to pass to ``ssh -F``.
        operational_methods: the methods it can serve: none.
    """

    config: RemoteBackendConfig
    container_image: str
    container_image_digest: str
    ssh_config_path: Path
    known_hosts_path: Path
    ssh_destination: str = SSH_HOST_ALIAS
    #: Methods this runtime can serve: none, so every lifecycle method is method_not_found.
    operational_methods: frozenset[str] = frozenset()

    def capabilities(self) -> RemoteCapabilities:
        """Return what ``capabilities`` reports: schema 0, nothing operational."""
        return RemoteCapabilities(
            backend=BACKEND_NAME,
            container_image=self.container_image,
            container_image_digest=self.container_image_digest,
            resource_mechanisms=dict.fromkeys(SIX_LIMITS, MECHANISM_UNAVAILABLE),
        )

    def resolve(self, method: str) -> NoReturn:
        """Refuse a lifecycle method; the control layer answers ``method_not_found``.

        No SSH process is started and nothing is read from ``params``.

        Raises:
            RemoteMethodNotFound: always (its ``code`` is ``method_not_found``).
        """
        raise RemoteMethodNotFound(method)


def _open_owner_only_dir(path: Path | str, *, dir_fd: int | None = None) -> int:
    """Open a directory without following a link and check it is ours and 0700."""
    try:
        fd = os.open(
            path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError as exc:
        raise RemoteFilesError(f"cannot open {path} as a directory: {exc.strerror}") from exc
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise RemoteFilesError(
            f"{path} must be owned by uid {os.geteuid()} with mode 0700, has uid {st.st_uid} "
            f"mode {stat.S_IMODE(st.st_mode):04o}"
        )
    return fd


def write_private_file(dir_fd: int, name: str, data: bytes) -> None:
    """Atomically replace ``name`` in the directory ``dir_fd`` with a 0600 file of ``data``.

    Raises:
        RemoteFilesError: a step failed; the old file, if any, is left in place.
    """
    temp = f".{name}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temp, flags, FILE_MODE, dir_fd=dir_fd)
    except OSError as exc:
        raise RemoteFilesError(f"cannot create {name}: {exc.strerror}") from exc
    try:
        try:
            os.fchmod(fd, FILE_MODE)  # the umask may have cleared nothing we need, but be exact
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise RemoteFilesError(f"cannot write {name}: {exc.strerror}") from exc


def compose_remote_runtime(
    section: RemoteBackendConfig,
    runtime_dir: Path,
    *,
    local_materialization: bool,
    apple_container: bool,
) -> RemoteRuntime:
    """Validate ``[remote_backend]``, write the SSH files, and return the runtime.

    ``runtime_dir`` is the daemon's runtime directory, already verified owner-only; it is
    checked again through the descriptor the files are written with.

    Raises:
        RemoteConfigError: the section is invalid or collides with local materialization or
            Apple Container configuration (the field is named; ``gloved`` must not start).
        RemoteFilesError: the files could not be written safely.
    """
    validate_remote_backend(
        section, local_materialization=local_materialization, apple_container=apple_container
    )
    remote_dir = runtime_dir / REMOTE_DIR_NAME
    known_hosts_path = remote_dir / KNOWN_HOSTS_NAME
    ssh_config = render_ssh_config(section, str(known_hosts_path)).encode()
    known_hosts = render_known_hosts(section).encode()
    root_fd = _open_owner_only_dir(runtime_dir)
    try:
        try:
            os.mkdir(REMOTE_DIR_NAME, DIR_MODE, dir_fd=root_fd)
        except FileExistsError:
            pass  # an earlier start made it: it is checked below exactly like a new one
        except OSError as exc:
            raise RemoteFilesError(f"cannot create {remote_dir}: {exc.strerror}") from exc
        remote_fd = _open_owner_only_dir(REMOTE_DIR_NAME, dir_fd=root_fd)
        try:
            write_private_file(remote_fd, KNOWN_HOSTS_NAME, known_hosts)
            write_private_file(remote_fd, SSH_CONFIG_NAME, ssh_config)
        finally:
            os.close(remote_fd)
        os.fsync(root_fd)
    finally:
        os.close(root_fd)
    _name, _, digest = section.container_image.rpartition("@")
    return RemoteRuntime(
        config=section,
        container_image=section.container_image,
        container_image_digest=digest,
        ssh_config_path=remote_dir / SSH_CONFIG_NAME,
        known_hosts_path=known_hosts_path,
    )
