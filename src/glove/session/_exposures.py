"""Exposures: host directories the owner lets sessions see, by alias, pinned and generational.

``glove init ALIAS PATH`` (over the authenticated socket) asks gloved to open PATH
(``openat2(RESOLVE_NO_SYMLINKS)``, a directory), hold that descriptor for as long as the
exposure lives, and record durably its alias, path, identity (device and inode), mode,
target inside the sandbox and a **generation** number. Revoking or re-creating an alias
bumps its generation (generations are never reused: the registry remembers revoked ones).

Only what the owner owns, and no host service behind it (:mod:`._exposure_checks`): the
directory must be gloved's uid's, not writable by group or others, on no kernel or system
runtime filesystem (unless ``[exposures] allow_special`` lists it), with no FIFO in its
tree (nor a socket, where this host has no Unix socket gate), and its path and target free
of control characters. Every check goes through the pinned descriptor.

A plan names aliases only. A session binds to the generation current when it was created;
at *prepare* the alias must still be that generation, its pinned descriptor must still be
the directory recorded, and the path must still lead to it (re-opened strictly and compared
by identity): a revoked, re-created, replaced or moved exposure fails there, before
anything launches, and so does one that fails a check it passed at creation (a ``chmod
g+w``, a FIFO made since). Holding the descriptor also keeps the inode alive, so its number
cannot be reused by another directory while the exposure exists.

The registry file is JSON, written atomically (temp, fsync, rename, fsync of the directory)
before any change is acknowledged.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal, NamedTuple

import msgspec

from glove.container import Bind, Protected, Shown, check_protected
from glove.container.errors import SpecError
from glove.container.linux import RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, openat2
from glove.session._exposure_checks import check_contents, check_directory, check_text
from glove.session.errors import ExposureError

MAX_REGISTRY_BYTES: Final = 1024 * 1024
MAX_EXPOSURES: Final = 256
REGISTRY_VERSION: Final = 1

_O_PATH_DIR: Final = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RESOLVE_STRICT: Final = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS

Mode = Literal["ro", "rw"]


class Exposure(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One exposure as recorded."""

    alias: str
    path: str
    dev: int
    ino: int
    generation: int
    mode: Mode
    target: str
    revoked: bool = False


class _Registry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    exposures: list[Exposure]


def default_target(alias: str) -> str:
    """Where an exposure appears inside when ``--target`` is not given."""
    return f"/workspace/{alias}"


class Candidate(NamedTuple):
    """A directory that passed every check for ``exposure.create``, pinned, not yet recorded
    (:meth:`ExposureRegistry.commit` records it or closes it)."""

    alias: str
    path: str
    mode: Mode
    target: str
    fd: int
    dev: int
    ino: int


def _open_strict(path: str) -> int:
    try:
        return openat2(path, _O_PATH_DIR, _RESOLVE_STRICT)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ExposureError(f"{path} goes through a symlink; give the resolved path") from exc
        if exc.errno == errno.ENOTDIR:
            raise ExposureError(f"{path} is not a directory") from exc
        raise ExposureError(f"cannot open {path}: {os.strerror(exc.errno or 0)}") from exc


class ExposureRegistry:
    """The exposures of one daemon (owned by it; not thread-safe, call from its loop)."""

    def __init__(
        self,
        file: Path,
        *,
        protected_root: str | None = None,
        own_paths: tuple[Path, ...] = (),
        allow_special: tuple[str, ...] = (),
        sockets_gated: bool = False,
    ) -> None:
        """``own_paths`` are Glove's own directories (config, state, runtime): never exposed.
        ``allow_special`` lists the directories exempt from the owner, mode and filesystem
        rules; ``sockets_gated`` says the sandboxes' connect() is gated (then a socket in
        an exposure is no refusal: no sandbox can reach it)."""
        self._file = file
        self._root = protected_root
        self._own = own_paths
        self._allow_special = frozenset(os.path.normpath(p) for p in allow_special)
        self._sockets_gated = sockets_gated
        self._by_alias: dict[str, Exposure] = {}
        self._fds: dict[str, int] = {}

    # -- persistence --------------------------------------------------------------------------

    def load(self) -> None:
        """Read the registry and re-pin every live exposure (a missing file is empty).

        An exposure whose directory is gone or changed is kept, unpinned: it is not current,
        and a session that names it fails at prepare.

        Raises:
            ExposureError: the file is unreadable or malformed.
        """
        try:
            data = self._file.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ExposureError(f"cannot read {self._file}: {exc.strerror}") from exc
        if len(data) > MAX_REGISTRY_BYTES:
            raise ExposureError(f"{self._file} is larger than {MAX_REGISTRY_BYTES} bytes")
        try:
            registry = msgspec.json.decode(data, type=_Registry)
        except msgspec.DecodeError as exc:
            raise ExposureError(f"{self._file} is not an exposure registry: {exc}") from exc
        for exposure in registry.exposures:
            self._by_alias[exposure.alias] = exposure
            if not exposure.revoked:
                with contextlib.suppress(ExposureError):
                    self._pin(exposure)

    def _save(self) -> None:
        registry = _Registry(
            REGISTRY_VERSION, sorted(self._by_alias.values(), key=lambda e: e.alias)
        )
        data = json.dumps(msgspec.to_builtins(registry), indent=1).encode() + b"\n"
        tmp = self._file.with_name(f".{self._file.name}.tmp")
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(self._file)
        dir_fd = os.open(self._file.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # -- pinning ------------------------------------------------------------------------------

    def _pin(self, exposure: Exposure) -> None:
        fd = _open_strict(exposure.path)
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != (exposure.dev, exposure.ino):
            os.close(fd)
            raise ExposureError(
                f"exposure {exposure.alias!r}: {exposure.path} is another directory now"
            )
        self._unpin(exposure.alias)
        self._fds[exposure.alias] = fd

    def _unpin(self, alias: str) -> None:
        fd = self._fds.pop(alias, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """Release every pinned descriptor."""
        for alias in list(self._fds):
            self._unpin(alias)

    # -- operations ---------------------------------------------------------------------------

    def _check_allowed(self, path: str, fd: int) -> None:
        if self._root is not None:
            root = os.path.normpath(self._root)
            if path != root and not path.startswith(root.rstrip("/") + "/"):
                raise ExposureError(f"{path} is outside the protected root {root} (gloved.toml)")
        info = os.fstat(fd)
        shown = [Shown(path, (info.st_dev, info.st_ino), "exposure", True)]
        own = [Protected(str(p), "Glove's own directory", tree=True) for p in self._own]
        try:
            check_protected(shown, own)
        except SpecError as exc:
            raise ExposureError(f"refusing to expose {path}: {exc}") from exc

    def inspect(
        self, alias: str, path: str, *, mode: Mode = "ro", target: str | None = None
    ) -> Candidate:
        """Open ``path`` strictly and run every check on it, its contents included.

        Touches no registry state, so it may run off the loop (the contents walk blocks).

        Raises:
            ExposureError: a bad path or target; a path outside the protected root, through
                a symlink, not a directory, holding Glove's own files, not the owner's,
                writable by others, on a refused filesystem, or holding a FIFO.
        """
        from glove.container import normalize_inside, sandbox_owned

        check_text(path, "path")
        if target is not None:
            check_text(target, "target")
        if not path.startswith("/"):
            raise ExposureError(f"the path must be absolute: {path!r}")
        path = os.path.normpath(path)
        inside = normalize_inside(target or default_target(alias))
        if sandbox_owned(inside) is not None:
            raise ExposureError(f"target {inside!r} is the sandbox's own; choose another --target")
        fd = _open_strict(path)
        try:  # O_DIRECTORY: it is a directory
            self._check_allowed(path, fd)
            self._check(fd, path)
            info = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        return Candidate(alias, path, mode, inside, fd, info.st_dev, info.st_ino)

    def _check(self, fd: int, path: str) -> None:
        check_directory(fd, path, exempt=path in self._allow_special)
        check_contents(fd, path, sockets=not self._sockets_gated)

    def commit(self, candidate: Candidate) -> Exposure:
        """Record an inspected ``candidate`` as a new generation of its alias (its
        descriptor becomes the pin; on failure it is closed).

        Raises:
            ExposureError: too many exposures.
            OSError: the registry file could not be written.
        """
        alias = candidate.alias
        live = [e for e in self._by_alias.values() if not e.revoked and e.alias != alias]
        if len(live) >= MAX_EXPOSURES:
            os.close(candidate.fd)
            raise ExposureError(f"at most {MAX_EXPOSURES} exposures")
        previous = self._by_alias.get(alias)
        exposure = Exposure(
            alias=alias,
            path=candidate.path,
            dev=candidate.dev,
            ino=candidate.ino,
            generation=(previous.generation if previous else 0) + 1,
            mode=candidate.mode,
            target=candidate.target,
        )
        self._by_alias[alias] = exposure
        try:
            self._save()
        except BaseException:
            os.close(candidate.fd)
            if previous is None:
                self._by_alias.pop(alias)
            else:
                self._by_alias[alias] = previous
            raise
        self._unpin(alias)
        self._fds[alias] = candidate.fd
        return exposure

    def create(
        self, alias: str, path: str, *, mode: Mode = "ro", target: str | None = None
    ) -> Exposure:
        """Pin ``path`` as ``alias`` (a new generation if the alias existed) and record it:
        :meth:`inspect` then :meth:`commit`, blocking.

        Raises:
            ExposureError: see :meth:`inspect`; too many exposures.
        """
        return self.commit(self.inspect(alias, path, mode=mode, target=target))

    def revoke(self, alias: str) -> Exposure:
        """Revoke ``alias`` (its generation is bumped, so no session can still use it).

        Raises:
            ExposureError: no live exposure has that alias.
        """
        current = self._by_alias.get(alias)
        if current is None or current.revoked:
            raise ExposureError(f"no exposure named {alias!r}")
        revoked = msgspec.structs.replace(current, revoked=True, generation=current.generation + 1)
        self._by_alias[alias] = revoked
        try:
            self._save()
        except BaseException:
            self._by_alias[alias] = current
            raise
        self._unpin(alias)
        return revoked

    def contents_check(self, alias: str) -> Callable[[], None]:
        """A blocking check of a pinned exposure's contents, for a thread (the check holds
        its own descriptor, so a revoke meanwhile closes nothing under it).

        Raises:
            ExposureError: the exposure is not pinned.
        """
        pinned = self._fds.get(alias)
        exposure = self._by_alias.get(alias)
        if pinned is None or exposure is None:
            raise ExposureError(f"exposure {alias!r}: its directory is gone or changed")
        fd = os.dup(pinned)
        path, sockets = exposure.path, not self._sockets_gated

        def check() -> None:
            try:
                check_contents(fd, path, sockets=sockets)
            except ExposureError as exc:
                raise ExposureError(f"exposure {alias!r}: {exc}") from exc
            finally:
                os.close(fd)

        return check

    def get(self, alias: str) -> Exposure | None:
        """The recorded exposure ``alias`` (revoked ones included)."""
        return self._by_alias.get(alias)

    def live(self) -> list[Exposure]:
        """Every exposure not revoked, by alias."""
        return sorted((e for e in self._by_alias.values() if not e.revoked), key=lambda e: e.alias)

    def is_current(self, exposure: Exposure) -> bool:
        """Whether a live exposure is pinned (its directory still the recorded one)."""
        return not exposure.revoked and exposure.alias in self._fds

    def resolve(self, alias: str, generation: int) -> Bind:
        """The bind of ``alias`` for a session bound to ``generation`` (at prepare).

        Raises:
            ExposureError: revoked, re-created (another generation), not pinned, or the
                path no longer leads to the pinned directory.
        """
        exposure = self._by_alias.get(alias)
        if exposure is None or exposure.revoked:
            raise ExposureError(f"exposure {alias!r} was revoked")
        if exposure.generation != generation:
            raise ExposureError(
                f"exposure {alias!r} is generation {exposure.generation}, not {generation}: "
                "it was re-created after the plan was validated"
            )
        pinned = self._fds.get(alias)
        if pinned is None:
            raise ExposureError(f"exposure {alias!r}: its directory is gone or changed")
        held = os.fstat(pinned)
        fd = _open_strict(exposure.path)
        try:
            now = os.fstat(fd)
        finally:
            os.close(fd)
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino) or (
            held.st_dev,
            held.st_ino,
        ) != (exposure.dev, exposure.ino):
            raise ExposureError(f"exposure {alias!r}: {exposure.path} is another directory now")
        try:
            check_directory(pinned, exposure.path, exempt=exposure.path in self._allow_special)
        except ExposureError as exc:
            raise ExposureError(f"exposure {alias!r}: {exc}") from exc
        # The launcher checks the identity again on what it mounts: a directory swapped in
        # between now and the launch is refused, never shown.
        return Bind(
            source=exposure.path,
            target=exposure.target,
            mode=exposure.mode,
            identity=(exposure.dev, exposure.ino),
        )
