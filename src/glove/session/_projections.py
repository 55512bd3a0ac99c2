"""A session's projections: library bundles resolved, verified and frozen for its sandbox.

At prepare gloved resolves each of the plan's projections beneath the library's pinned
root descriptor (``glove.library.open_bundle``: ``openat2`` with ``RESOLVE_BENEATH`` and
no symlinks, type, owner, one link, no group or other write, the size) and verifies its
bytes. A root gloved then freezes the copy itself (a detached tmpfs, before the clone); an
unprivileged one cannot ``fsopen`` in its own user namespace, so the sandbox's init freezes
it in its own, hashing the bytes again while it copies them. In the init each projection
parks its tmpfs in the old root and mounts the copy at its target read-only, nosuid,
nodev, noexec (:class:`SessionProjection` is the ``glove.container.FileProjection`` the
sandbox calls).

Where ``fsopen`` is missing or filtered (:func:`glove.library.freeze_method_here`, probed
once) the copy is frozen by the init with the library's fallback instead, root or not: a
tmpfs ``mount(2)``-ed on the parking directory (0700, in the init's private mount
namespace, in the old root that is detached after ``pivot_root``), bound at the target and
remounted read-only, nosuid, nodev, noexec. The method is decided at prepare, so the launch
binding and the receipt name the one the init uses (it uses no other).

Every refusal is a :class:`ProjectionRefused` with its code; nothing of the projection is
mounted then, and no descriptor of it reaches the command.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from typing import Final, Literal

from glove.container import ProjectionRecord
from glove.library import (
    FREEZE_DETACHED_TMPFS,
    MOUNT_FLAGS,
    FreezeBatch,
    FrozenProjection,
    Library,
    LibraryError,
    OpenedBundle,
    freeze,
    freeze_method_here,
    read_verified,
)
from glove.plan import ResolvedProjection
from glove.records import Projection
from glove.session.errors import ProjectionRefused

#: How the init's one-line setup report carries a projection's refusal code.
_REFUSAL_RE: Final = re.compile(r"ProjectionRefused: \[([a-z0-9_]+)\]")


def refusal_code(error: str | None) -> str | None:
    """The projection refusal code in a sandbox's setup error text, or None."""
    if not error:
        return None
    found = _REFUSAL_RE.search(error)
    return found.group(1) if found else None


class SessionProjection:
    """One projection of one session, from prepare to the mount in the sandbox's init.

    Owns the opened bundle's descriptor and, once frozen, the tmpfs's; :meth:`close`
    releases both (idempotent), as :meth:`attach` does in the init.
    """

    def __init__(
        self,
        resolved: ResolvedProjection,
        opened: OpenedBundle | None,
        frozen: FrozenProjection | None,
        method: str = FREEZE_DETACHED_TMPFS,
    ) -> None:
        """Take ownership of ``opened`` and ``frozen``; ``method`` is the freeze method the
        init uses when ``frozen`` is None."""
        self.resolved = resolved
        self.method = frozen.freeze_method if frozen is not None else method
        self._opened: OpenedBundle | None = opened
        self._frozen = frozen
        #: The session's projections, frozen together in one tmpfs by the first to park.
        self.batch: list[SessionProjection] = [self]

    @property
    def target(self) -> str:
        """The absolute file path inside the sandbox."""
        return self.resolved.target

    def _refused(self, exc: LibraryError) -> ProjectionRefused:
        return ProjectionRefused(
            exc.code, f"projection {self.resolved.alias!r}: {exc}", alias=self.resolved.alias
        )

    def park(self, directory: str) -> None:
        """In the init: freeze the copy here if gloved did not, then park its tmpfs.

        Raises:
            ProjectionRefused: the bundle changed, or the freeze or the park failed.
        """
        try:
            if self._frozen is None:
                if self._opened is None:
                    raise ProjectionRefused(
                        "projection_unavailable", "the projection was closed before its launch"
                    )
                _freeze_together(self.batch, directory)
            assert self._frozen is not None
            self._frozen.park(directory)
        except LibraryError as exc:
            self.close()
            raise self._refused(exc) from exc

    def verify(self) -> None:
        """Hash the opened bundle (an unprivileged gloved at prepare; the init hashes again).

        Raises:
            ProjectionRefused: its bytes are refused.
        """
        assert self._opened is not None
        try:
            read_verified(self._opened)
        except LibraryError as exc:
            raise self._refused(exc) from exc

    def attach(self, root_fd: int) -> None:
        """In the init: mount the copy at the target beneath ``root_fd``; close everything.

        Raises:
            ProjectionRefused: the target or the mount was refused (nothing stays mounted).
        """
        try:
            if self._frozen is None:
                raise ProjectionRefused("projection_unavailable", "the copy was never frozen")
            self._frozen.attach(self.resolved.target, dir_fd=root_fd, create=True)
        except LibraryError as exc:
            raise self._refused(exc) from exc
        finally:
            self.close()

    def export(self) -> tuple[ProjectionRecord, int]:
        """Its record and descriptor for gloved's launcher process: the frozen tmpfs once
        frozen here, else the opened bundle (the init freezes it). Both stay owned here.

        Raises:
            ProjectionRefused: ``projection_unavailable`` (it was closed).
        """
        resolved = self.resolved
        if self._frozen is not None and self._frozen.mount_fd >= 0:
            frozen = self._frozen
            kind: Literal["frozen", "bundle"] = "frozen"
            first: tuple[int, ...] = ()
            fd, inode = frozen.mount_fd, frozen.inode
        elif self._opened is not None and self._opened.fd >= 0:
            kind, fd, first = "bundle", self._opened.fd, self._opened.identity
            inode = (self._opened.first.st_dev, self._opened.first.st_ino)
        else:
            raise ProjectionRefused(
                "projection_unavailable",
                "the projection was closed before its launch",
                alias=resolved.alias,
            )
        record = ProjectionRecord(
            alias=resolved.alias,
            target=resolved.target,
            digest=resolved.digest,
            size=resolved.size,
            freeze_method=self.method,
            kind=kind,
            inode=inode,
            identity=first,
        )
        return record, fd

    def close(self) -> None:
        """Close the frozen tmpfs and the bundle (idempotent)."""
        frozen, self._frozen = self._frozen, None
        opened, self._opened = self._opened, None
        if frozen is not None:
            frozen.close()
        if opened is not None:
            opened.close()

    def receipt(self) -> Projection:
        """What the launch binding and the receipt commit to for this projection."""
        return Projection(
            alias=self.resolved.alias,
            target=self.resolved.target,
            digest=self.resolved.digest,
            size=self.resolved.size,
            mount_flags=list(MOUNT_FLAGS),
            freeze_method=self.method,
        )


def _freeze_together(batch: list[SessionProjection], directory: str | None) -> None:
    """Freeze every projection of ``batch`` not frozen yet: with the new mount API all in
    one detached tmpfs (one ``fsopen``/``fsmount``/seal for the session, one superblock to
    tear down), else each with the fallback in ``directory`` (the init's parking one).

    Raises:
        ProjectionRefused: one is refused (nothing frozen is kept then).
    """
    pending = [p for p in batch if p._frozen is None]
    for projection in pending:
        if projection._opened is None:
            raise ProjectionRefused(
                "projection_unavailable", "the projection was closed before its launch"
            )
    if not pending:
        return
    method = pending[0].method
    if method != FREEZE_DETACHED_TMPFS:
        for projection in pending:
            assert projection._opened is not None
            try:
                projection._frozen = freeze(
                    projection._opened, fallback_dir=directory, method=method
                )
            except LibraryError as exc:
                raise projection._refused(exc) from exc
        return
    try:
        together = FreezeBatch([p.resolved.size for p in pending])
    except LibraryError as exc:
        raise pending[0]._refused(exc) from exc
    try:
        for projection in pending:
            assert projection._opened is not None
            try:
                together.add(projection._opened)
            except LibraryError as exc:
                raise projection._refused(exc) from exc
        try:
            frozen = together.seal()
        except LibraryError as exc:
            raise pending[0]._refused(exc) from exc
    finally:
        together.close()
    for projection, copy in zip(pending, frozen, strict=True):
        projection._frozen = copy


def prepare_projections(
    library: Library | None, resolved: tuple[ResolvedProjection, ...]
) -> list[SessionProjection]:
    """Resolve and verify every projection (blocking: run it off the loop); freeze each
    copy too when this process may (root, with the new mount API; else the init does).

    Raises:
        ProjectionRefused: one is refused (its code says why); none is left open.
    """
    if not resolved:
        return []
    if library is None:
        raise ProjectionRefused(
            "projection_unavailable", "this gloved has no library store", alias=resolved[0].alias
        )
    method = freeze_method_here()
    made: list[SessionProjection] = []
    try:
        for item in resolved:
            try:
                opened = library.open_bundle(item.digest, item.size)
            except LibraryError as exc:
                raise ProjectionRefused(
                    exc.code, f"projection {item.alias!r}: {exc}", alias=item.alias
                ) from exc
            made.append(SessionProjection(item, opened, None, method))
        for projection in made:
            projection.batch = made
        if os.geteuid() == 0 and method == FREEZE_DETACHED_TMPFS:
            _freeze_together(made, None)
        else:
            for projection in made:
                projection.verify()  # refused here, with its code; the init hashes again
    except BaseException:
        for projection in made:
            projection.close()
        raise
    return made


def load_projections(
    exported: Sequence[tuple[ProjectionRecord, int]],
) -> tuple[SessionProjection, ...]:
    """In gloved's launcher process: the projections :meth:`SessionProjection.export`
    sent, rebuilt from their records and descriptors, each checked again on the way in
    (``OpenedBundle.adopt``, ``FrozenProjection.adopt``: inode, size and identity). The
    descriptors are owned from here (all closed when one is refused).

    Raises:
        ProjectionRefused: one descriptor is not what its record says (its code says how).
    """
    made: list[SessionProjection] = []
    #: Copies frozen together in one tmpfs (one ``st_dev``) share its parked flag.
    shared: dict[int, list[bool]] = {}
    pending = [fd for _, fd in exported]
    try:
        for record, fd in exported:
            pending.remove(fd)
            made.append(_adopt(record, fd, shared))
    except BaseException:
        for projection in made:
            projection.close()
        for fd in pending:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    for projection in made:
        projection.batch = made
    return tuple(made)


def _adopt(record: ProjectionRecord, fd: int, shared: dict[int, list[bool]]) -> SessionProjection:
    """One exported projection, checked (``fd`` is closed when it is refused)."""
    resolved = ResolvedProjection(
        alias=record.alias, target=record.target, digest=record.digest, size=record.size
    )
    try:
        if record.kind == "frozen":
            frozen = FrozenProjection.adopt(
                name=record.digest,
                size=record.size,
                method=record.freeze_method,
                mount_fd=fd,
                inode=record.inode,
                shared=shared.setdefault(record.inode[0], [False]),
            )
            return SessionProjection(resolved, None, frozen)
        opened = OpenedBundle.adopt(record.digest, fd, record.size, record.identity)
    except LibraryError as exc:
        raise ProjectionRefused(
            exc.code, f"projection {record.alias!r}: {exc}", alias=record.alias
        ) from exc
    if (opened.first.st_dev, opened.first.st_ino) != tuple(record.inode):
        opened.close()
        raise ProjectionRefused(
            "projection_changed",
            f"projection {record.alias!r}: the bundle is not the file that was opened",
            alias=record.alias,
        )
    return SessionProjection(resolved, opened, None, record.freeze_method)
