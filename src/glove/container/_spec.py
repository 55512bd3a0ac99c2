"""What to run and how to contain it: the launch specification (sans-IO values)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from typing import Final, Literal, Protocol, runtime_checkable

import msgspec

from glove.container._limits import Limits
from glove.container.errors import SpecError

#: Where the workspace appears inside the sandbox unless a profile says otherwise.
DEFAULT_WORKSPACE_TARGET: Final = "/workspace"
#: The hostname the sandbox's UTS namespace gets.
DEFAULT_HOSTNAME: Final = "glove"
#: Trees the sandbox builds itself (a fresh procfs with its knobs masked, a minimal /dev with
#: its own devpts): nothing from the host may land on or under them.
BUILT_TARGETS: Final = ("/proc", "/dev")
#: The sandbox's private /tmp (a directory of its size-limited root tmpfs, never the host's):
#: a host path below it is shown at its own path, mounted into that private /tmp (as
#: ``bwrap --tmpfs /tmp --bind /tmp/x /tmp/x`` does); /tmp itself is never replaced.
PRIVATE_TMP: Final = "/tmp"  # noqa: S108 - a path inside the sandbox
#: Size of the root tmpfs (the writable scratch) when no disk limit is given.
DEFAULT_SCRATCH_BYTES: Final = 1024 * 1024 * 1024
#: Highest fd number a passed fd may take inside (fds stay small and countable).
MAX_PASSED_FD: Final = 255

BindMode = Literal["ro", "rw"]
#: ``none``: loopback only; ``proxy``: loopback only, plus what the egress helper needs.
NetworkMode = Literal["none", "proxy"]


def normalize_inside(path: str) -> str:
    """Normalize an absolute sandbox path, collapsing the leading ``//`` POSIX keeps."""
    return "/" + posixpath.normpath(path).lstrip("/")


def projection_conflict(spec: SandboxSpec, target: str) -> str | None:
    """Why a projection at ``target`` cannot be mounted in ``spec``'s sandbox, or None.

    A projection is a file on the sandbox's own root tmpfs: never on or under a bind, a
    retained copy or the workspace (mounting there would create its mount point in a host
    directory), never above one, and never in a tree the sandbox owns.
    """
    target = normalize_inside(target)
    if sandbox_owned(target) is not None or target.startswith("/sys/") or target == "/sys":
        return f"{target} is in a tree the sandbox builds itself"
    shown = [(f"bind {b.destination}", b.destination) for b in spec.binds]
    shown += [(f"retained copy {r.target}", normalize_inside(r.target)) for r in spec.retained]
    if spec.workspace is not None:
        workspace = normalize_inside(spec.workspace_target)
        shown.append((f"workspace {workspace}", workspace))
    for what, inside in shown:
        if target == inside or target.startswith(inside.rstrip("/") + "/"):
            return f"{target} is inside the {what} (a host path)"
        if inside.startswith(target + "/"):
            return f"{target} is above the {what}"
    return None


def sandbox_owned(inside: str) -> str | None:
    """The part of the sandbox's own tree that the path ``inside`` would cover, or None.

    ``/proc`` or ``/dev`` for a path on or under them (the sandbox builds those trees),
    ``/tmp`` for the private /tmp itself, ``/`` for the root. A path *below* /tmp is not
    the sandbox's: it is shown at its own path inside the private /tmp.
    """
    inside = normalize_inside(inside)
    if inside in ("/", PRIVATE_TMP):
        return inside
    for built in BUILT_TARGETS:
        if inside == built or inside.startswith(built + "/"):
            return built
    return None


class Bind(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A host path made visible inside the sandbox.

    A source whose last component is a symlink is reproduced inside as the same symlink
    (its target text), never followed: that is how ``/bin -> usr/bin`` style layouts are
    mirrored. Any other symlink on the way makes the launch fail.

    Attributes:
        source: absolute host path.
        target: absolute path inside; defaults to ``source``.
        mode: ``ro`` (default) or ``rw``.
        optional: skip silently when the source does not exist.
        identity: the ``(st_dev, st_ino)`` the source must still be when the sandbox is
            built (an exposure pinned by ``glove init``); a source replaced since then
            fails the launch instead of being shown.
    """

    source: str
    target: str | None = None
    mode: BindMode = "ro"
    optional: bool = False
    identity: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        """Check both paths are absolute and normal.

        Raises:
            SpecError: a path is relative, or the target is reserved.
        """
        for what, path in (("source", self.source), ("target", self.target)):
            if path is None:
                continue
            if not path.startswith("/") or "\0" in path:
                raise SpecError(f"bind {what} must be an absolute path: {path!r}")
        target = self.destination
        owned = sandbox_owned(target)
        if owned == "/":
            raise SpecError("a bind cannot replace the sandbox root")
        if owned is not None:
            suggestion = "/mnt/" + (posixpath.basename(target) or "data")
            where = (
                f"would replace the sandbox's private {owned} (a path below it is shown at "
                "its own path)"
                if owned == PRIVATE_TMP
                else f"is inside the sandbox-owned {owned} (the sandbox makes its own {owned})"
            )
            raise SpecError(
                f"bind target {target!r} {where}; show it at another path, e.g. "
                f"--bind {self.source}:{suggestion}"
            )

    @property
    def destination(self) -> str:
        """The normalized path inside the sandbox (``//proc`` is ``/proc``)."""
        return normalize_inside(self.target or self.source)


class Protected(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A host path the contained process must never see (the mediator's own files).

    :func:`glove.container.launch` refuses to start when a bind source, the workspace or a
    retained seed would show it: a source that is the path, holds it, or (``tree``) lies
    inside it, compared by device and inode along every directory the path resolves
    through (symlinks and bind-mounted aliases included), and a protected file with more
    than one hard link. See ``docs/decisions/0006-the-mediators-files-stay-outside.md``.

    Attributes:
        path: absolute host path (it need not exist yet: an audit log created later).
        what: what it is, for the refusal (``"the mediator's policy file"``).
        tree: a directory whose whole subtree is protected (an upstream's working directory).
        writable_only: it may be seen, read-only, but never through a writable source (a
            host program an upstream runs: reading it is harmless, changing it is code
            execution on the host).
    """

    path: str
    what: str
    tree: bool = False
    writable_only: bool = False

    def __post_init__(self) -> None:
        """Check the path is absolute.

        Raises:
            SpecError: a relative path or one with a NUL byte.
        """
        if not self.path.startswith("/") or "\0" in self.path:
            raise SpecError(f"protected path must be absolute: {self.path!r}")


#: Smallest retained image (ext4 needs room for its metadata and journal).
MIN_RETAINED_BYTES: Final = 8 * 1024 * 1024


class Retained(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A writable copy that persists between runs in a hard-sized ext4 image (root only).

    Attributes:
        image: host path of the image file; created (and seeded) on first use, reused after.
        target: absolute path inside the sandbox.
        size: image size in bytes, the hard limit on what the sandbox can store there.
        seed: host directory copied into the image when it is first created.
    """

    image: str
    target: str
    size: int
    seed: str | None = None

    def __post_init__(self) -> None:
        """Check paths and size.

        Raises:
            SpecError: a relative path, a reserved target or a too-small size.
        """
        for what, path in (("image", self.image), ("target", self.target), ("seed", self.seed)):
            if path is not None and (not path.startswith("/") or "\0" in path):
                raise SpecError(f"retained {what} must be an absolute path: {path!r}")
        Bind(source=self.image, target=self.target)  # same target rules as a bind
        if self.size < MIN_RETAINED_BYTES:
            raise SpecError(f"retained size must be at least {MIN_RETAINED_BYTES} bytes")


class SandboxSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Everything :func:`glove.container.launch` needs to start one sandbox.

    Attributes:
        argv: the command and its arguments; ``argv[0]`` is searched in the sandbox ``PATH``.
        binds: host paths to expose, applied in order after the workspace (later ones may
            nest in earlier ones and in the workspace).
        workspace: host directory bound at ``workspace_target``, or None for no workspace.
        workspace_target: where the workspace appears inside.
        workspace_mode: ``rw`` or ``ro``.
        cwd: working directory inside; defaults to the workspace target, else ``/``.
        env: the complete environment of the command (nothing else is inherited).
        network: ``none`` (loopback only) or ``proxy`` (the same route-less namespace, with
            unprivileged ports from 53 up, so the egress helper can serve DNS on
            127.0.0.1:53, and a ``resolv.conf`` naming it; see ``docs/egress.md``).
        pty: give the command a fresh pseudo-terminal as its controlling terminal.
        limits: the six limits.
        accept_weaker: limit names (or ``all``) for which a per-process mechanism is fine.
        pass_fds: fds to pass in, as ``{fd number inside: fd number in this process}``.
        hostname: the sandbox's hostname.
        retained: persistent hard-sized writable copies (root launchers only).
        protected: host paths that must stay invisible inside (see :class:`Protected`).
    """

    argv: tuple[str, ...]
    binds: tuple[Bind, ...] = ()
    workspace: str | None = None
    workspace_target: str = DEFAULT_WORKSPACE_TARGET
    workspace_mode: BindMode = "rw"
    cwd: str | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    network: NetworkMode = "none"
    pty: bool = False
    limits: Limits = msgspec.field(default_factory=Limits)
    accept_weaker: frozenset[str] = frozenset()
    pass_fds: dict[int, int] = msgspec.field(default_factory=dict)
    hostname: str = DEFAULT_HOSTNAME
    retained: tuple[Retained, ...] = ()
    protected: tuple[Protected, ...] = ()

    def __post_init__(self) -> None:
        """Check the parts that do not need the system.

        Raises:
            SpecError: an empty command, a bad path, or a passed fd that clashes with stdio.
        """
        if not self.argv or not self.argv[0]:
            raise SpecError("no command given")
        if any("\0" in arg for arg in self.argv):
            raise SpecError("command arguments must not contain NUL bytes")
        if self.workspace is not None and not self.workspace.startswith("/"):
            raise SpecError(f"workspace must be an absolute path: {self.workspace!r}")
        target = normalize_inside(self.workspace_target)
        if not self.workspace_target.startswith("/") or target == "/":
            raise SpecError(f"bad workspace target: {self.workspace_target!r}")
        owned = sandbox_owned(target)
        if owned is not None:
            where = "is" if owned == target else "is inside"
            raise SpecError(
                f"workspace target {target!r} {where} the sandbox-owned {owned}; set the "
                f"profile's [workspace] target to another path (default "
                f"{DEFAULT_WORKSPACE_TARGET})"
            )
        if self.cwd is not None and not self.cwd.startswith("/"):
            raise SpecError(f"cwd must be an absolute path inside: {self.cwd!r}")
        for key, value in self.env.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise SpecError(f"bad environment entry: {key!r}")
        for inside in self.pass_fds:
            if inside < 3 or inside > MAX_PASSED_FD:
                raise SpecError(f"passed fd number must be within 3..{MAX_PASSED_FD}: {inside}")

    @property
    def working_directory(self) -> str:
        """The directory the command starts in."""
        if self.cwd is not None:
            return self.cwd
        return self.workspace_target if self.workspace is not None else "/"


@runtime_checkable
class FileProjection(Protocol):
    """A verified file the sandbox's init mounts read-only at :attr:`target` (one file).

    Built by a layer above (gloved's sessions, with ``glove.library``) and passed to
    :func:`glove.container.launch` beside the spec; the sandbox only calls it, in this
    order: :meth:`park` and :meth:`attach` in the init (its own user and mount namespace,
    before ``pivot_root``), :meth:`close` in the launcher once the sandbox was cloned. A
    refusal in the init is raised as an exception; the launch then fails, nothing runs.
    """

    @property
    def target(self) -> str:
        """The absolute file path inside the sandbox."""
        ...

    def park(self, directory: str) -> None:
        """In the init: make the private read-only copy ready, keeping what must outlive
        the root's construction on ``directory`` (an empty directory of the old root,
        detached with it after ``pivot_root``)."""
        ...

    def attach(self, root_fd: int) -> None:
        """In the init: mount the copy at :attr:`target` beneath ``root_fd`` (the new root
        being built; the target's parent directories exist), read-only, nosuid, nodev,
        noexec, and close every descriptor of the projection."""
        ...

    def close(self) -> None:
        """In the launcher, after the clone: close its own descriptors (idempotent)."""
        ...


class ProjectionRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A projection as it crosses to another process (gloved's launcher) with one
    descriptor: what the receiving side needs to rebuild it and to check that the
    descriptor is the file described (a :class:`ProjectionLoader` does both).

    Attributes:
        alias, target, digest, size: the projection (``target`` is where it is mounted).
        freeze_method: the method the copy was, or will be, frozen with.
        kind: ``frozen``: the descriptor is the detached read-only tmpfs holding the copy;
            ``bundle``: it is the opened, checked bundle (the sandbox's init freezes it).
        inode: ``(st_dev, st_ino)`` of the frozen copy (``frozen``) or of the bundle.
        identity: the bundle's identity at its first ``fstat`` (``bundle``; size and times
            included), which the descriptor must still show.
    """

    alias: str
    target: str
    digest: str
    size: int
    freeze_method: str
    kind: Literal["frozen", "bundle"]
    inode: tuple[int, int]
    identity: tuple[int, ...] = ()


@runtime_checkable
class PortableProjection(FileProjection, Protocol):
    """A :class:`FileProjection` that can cross to gloved's launcher process."""

    def export(self) -> tuple[ProjectionRecord, int]:
        """Its record and the one descriptor that goes with it (still owned here)."""
        ...


#: Rebuilds exported projections in the launcher, taking ownership of their descriptors
#: (closing them all when it raises); it raises when one does not match its record.
ProjectionLoader = Callable[[Sequence[tuple[ProjectionRecord, int]]], tuple[FileProjection, ...]]
