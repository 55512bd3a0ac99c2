"""The filesystem perimeter: open bind sources safely, then build and pivot into a new root.

Two halves. :func:`open_sources` runs in the launcher: every bind source is opened as an
``O_PATH`` descriptor with ``openat2(RESOLVE_NO_SYMLINKS)``, so a path that contains a
symlink (or was swapped for one) fails instead of widening the view; a source whose last
component *is* a symlink is recorded as a symlink to recreate. :func:`build_rootfs` runs in
the sandbox's init, in its fresh user and mount namespaces: it mounts a size-limited tmpfs,
creates every mount point by walking descriptors (never following a link, so no target can
point outside the new root), bind-mounts each source *from its descriptor*, checks that the
mounted inode is the one that was opened, applies read-only/nosuid/nodev recursively with
``mount_setattr(AT_RECURSIVE)`` (submounts included), adds ``/proc``, a minimal ``/dev`` and
a private ``/tmp`` (made first, so a host path below it is shown at its own path on top of
it), then ``pivot_root``s and detaches the old root.
"""

# Raw paths and dir fds inside a fresh mount namespace (pathlib adds nothing); /tmp here is
# the staging point in the sandbox's own namespace, not a shared temporary directory.
# ruff: noqa: PTH101, PTH102, PTH116, PTH112, PTH113, PTH114, PTH208, PTH211, S108
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import posixpath
import socket
import stat
import struct
from pathlib import Path
from typing import Final

import msgspec

from glove.container._protect import Shown
from glove.container._resolv import RESOLV_CONF_PATH, resolv_conf
from glove.container._spec import (
    DEFAULT_SCRATCH_BYTES,
    Bind,
    FileProjection,
    SandboxSpec,
    normalize_inside,
)
from glove.container.errors import SandboxSetupError, SpecError
from glove.container.linux import _syscalls as sc

#: Where the new root is assembled inside the sandbox's private mount namespace.
STAGING_DIR: Final = "/tmp"
#: Device nodes bound from the host's /dev.
DEVICE_NODES: Final = ("null", "zero", "full", "random", "urandom", "tty")
#: Mode of the world-writable scratch directories (sticky).
STICKY_WORLD_MODE: Final = 0o1777
#: The scratch tmpfs gets one inode per this many bytes of its size (so inodes are bounded
#: by the disk limit too), and never fewer than MIN_SCRATCH_INODES.
BYTES_PER_SCRATCH_INODE: Final = 4096
MIN_SCRATCH_INODES: Final = 1024
#: Size of the old root's tmpfs the projections' copies are parked on (empty directories).
PARK_TMPFS_BYTES: Final = 64 * 1024

_O_PATH_NOFOLLOW: Final = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_RESOLVE_STRICT: Final = sc.RESOLVE_NO_SYMLINKS | sc.RESOLVE_NO_MAGICLINKS
_SIOCGIFFLAGS: Final = 0x8913
_SIOCSIFFLAGS: Final = 0x8914
#: The per-network-namespace lowest port an unprivileged process may bind.
UNPRIVILEGED_PORT_START: Final = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
#: The port of the egress helper's DNS stub (``proxy`` mode).
DNS_PORT: Final = 53
_IFF_UP: Final = 0x1


class OpenedSource(msgspec.Struct, frozen=True):
    """A bind source checked in the launcher.

    The launcher's descriptor cannot be bind-mounted by the child (it belongs to the
    launcher's mount namespace, and the kernel refuses to copy mounts across namespaces), so
    the child opens the path again the same strict way and checks it is the same inode.

    Attributes:
        source: the host path.
        target: the path inside the sandbox.
        writable: whether the bind is read-write.
        kind: ``dir``, ``file`` or ``symlink``.
        link: the symlink's text, for ``symlink``.
        dev: device of the opened inode, to verify after mounting.
        ino: inode number of the opened inode.
    """

    source: str
    target: str
    writable: bool
    kind: str
    link: str = ""
    dev: int = 0
    ino: int = 0


#: Kernel filesystems never exposed through a bind, by ``statfs`` magic: their files are
#: kernel knobs writable by file mode alone for a root launcher's sandbox (host uid 0).
FORBIDDEN_FS_MAGIC: Final = {
    0x9FA0: "proc",
    0x62656572: "sysfs",
    0x27E0EB: "cgroup",
    0x63677270: "cgroup2",
    0x73636673: "securityfs",
    0x64626720: "debugfs",
    0x74726163: "tracefs",
    0xCAFE4A11: "bpf",
    0x62656570: "configfs",
    0xDE5E81E4: "efivarfs",
    0x6165676C: "pstore",
    0x42494E4D: "binfmt_misc",
}


def _resolved(path: str) -> str:
    """``path`` with its symlinks resolved, for a message (it may be changing under us)."""
    try:
        return os.path.realpath(path)
    except OSError:  # swapped between realpath's lstat and readlink
        return f"{path} (changing: it could not be resolved)"


def _refuse_kernel_trees(bind: Bind, fd: int, info: os.stat_result) -> None:
    """Refuse the host root and kernel filesystems, whatever the spelling of the path.

    Checked on the opened inode, not the path text (``//proc``, ``/./sys`` and other
    mounts of the same filesystems all resolve here). Recursive binds carry submounts, so
    the host root (which holds /proc and /sys) is refused as a whole.
    """
    root = os.stat("/")
    if (info.st_dev, info.st_ino) == (root.st_dev, root.st_ino):
        raise SpecError(
            f"refusing to bind {bind.source}: it is the host root (/); run from a project "
            "directory or pass --workspace DIR"
        )
    if stat.S_ISLNK(info.st_mode):
        # Recreated inside as the same link, never mounted. (fstatfs of a link's O_PATH
        # descriptor is ELOOP on some filesystems, 9p among them.)
        return
    magic = sc.filesystem_magic(fd)
    if magic in FORBIDDEN_FS_MAGIC:
        raise SpecError(
            f"refusing to bind {bind.source}: it is on {FORBIDDEN_FS_MAGIC[magic]}, a kernel "
            "filesystem that is never exposed"
        )


def _check_identity(bind: Bind, info: os.stat_result) -> None:
    """Refuse a pinned source that is no longer the directory it was pinned as."""
    if bind.identity is not None and (info.st_dev, info.st_ino) != bind.identity:
        raise SpecError(
            f"bind source {bind.source} is not the directory it was pinned as (it was "
            "replaced after it was checked); nothing was shown"
        )


def _open_one(bind: Bind) -> OpenedSource | None:
    try:
        fd = sc.openat2(bind.source, _O_PATH_NOFOLLOW, _RESOLVE_STRICT)
    except OSError as exc:
        if exc.errno == errno.ENOENT and bind.optional:
            return None
        if exc.errno == errno.ELOOP:
            resolved = _resolved(bind.source)
            raise SpecError(
                f"bind source {bind.source} goes through a symlink (it resolves to "
                f"{resolved}); symlinks on the way are never followed, so bind the resolved "
                f"path: --bind {resolved}:{bind.destination}"
            ) from exc
        raise SpecError(
            f"cannot open bind source {bind.source}: {os.strerror(exc.errno or 0)}"
        ) from exc
    info = os.fstat(fd)
    try:
        _check_identity(bind, info)
        _refuse_kernel_trees(bind, fd, info)
    except BaseException:
        os.close(fd)
        raise
    writable = bind.mode == "rw"
    if stat.S_ISLNK(info.st_mode):
        link = os.readlink("", dir_fd=fd)
        os.close(fd)
        return OpenedSource(
            source=bind.source, target=bind.destination, writable=False, kind="symlink", link=link
        )
    os.close(fd)
    kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
    return OpenedSource(
        source=bind.source,
        target=bind.destination,
        writable=writable,
        kind=kind,
        dev=info.st_dev,
        ino=info.st_ino,
    )


def _kernel_submounts() -> list[tuple[str, str]]:
    """(mount point, fs type) of every kernel-filesystem mount in this mount namespace."""
    names = set(FORBIDDEN_FS_MAGIC.values())
    found: list[tuple[str, str]] = []
    with Path("/proc/self/mountinfo").open("rb") as handle:
        for raw in handle:
            fields = raw.decode(errors="replace").split()
            try:
                fstype = fields[fields.index("-") + 1]
            except (ValueError, IndexError):
                continue
            if fstype in names or fstype.split(".")[0] in names:
                point = fields[4].replace("\\040", " ")
                found.append((point, fstype))
    return found


def _refuse_kernel_submounts(sources: list[OpenedSource]) -> None:
    """Refuse a directory source that has a kernel filesystem mounted somewhere below it.

    Binds are recursive (submounts included): binding ``/sys/fs/cgroup`` (a tmpfs) would
    carry the cgroup hierarchies mounted on it.
    """
    dirs = [s for s in sources if s.kind == "dir"]
    if not dirs:
        return
    for point, fstype in _kernel_submounts():
        for source in dirs:
            base = source.source.rstrip("/")
            if point.startswith(base + "/"):
                raise SpecError(
                    f"refusing to bind {source.source}: {fstype} is mounted below it at {point}"
                )


def _link_inside(source: OpenedSource) -> str:
    """Where a recreated symlink points inside the sandbox (its text read from its target)."""
    if source.link.startswith("/"):
        return normalize_inside(source.link)
    return normalize_inside(posixpath.join(posixpath.dirname(source.target), source.link))


def _shown_at(path: str, sources: list[OpenedSource]) -> bool:
    """Whether ``path`` inside lies in (or is) a bound directory or file."""
    for source in sources:
        if source.kind == "symlink":
            continue
        base = source.target.rstrip("/") or "/"
        if path == base or (source.kind == "dir" and path.startswith(base + "/")):
            return True
    return False


def _refuse_dangling_links(sources: list[OpenedSource], required: set[str]) -> None:
    """Refuse a required bind whose source is a symlink that would dangle inside.

    A source whose last component is a symlink is recreated as the same link (its text),
    never followed. When that text points at something the sandbox does not show (a
    relative link bound at another path, such as ``node_modules/.bin/claude`` bound at
    ``/opt/claude``), the command would meet "No such file or directory": say what the
    link resolves to on the host and how to bind that instead. Optional (profile) binds are
    left as they are.
    """
    for source in sources:
        if source.kind != "symlink" or source.target not in required:
            continue
        inside = _link_inside(source)
        if inside == source.target or _shown_at(inside, sources):
            continue
        resolved = _resolved(source.source)
        raise SpecError(
            f"bind source {source.source} is a symlink to {source.link!r}; it is recreated "
            f"as that link, so at {source.target} it would point to {inside}, which the "
            f"sandbox does not show. {source.source} resolves to {resolved}: bind that "
            f"instead: --bind {resolved}:{source.target}"
        )


def open_sources(spec: SandboxSpec) -> list[OpenedSource]:
    """Open every bind source and the workspace (launcher side).

    Raises:
        SpecError: a source is missing (and not optional), unreadable, or passes a symlink.
    """
    # The workspace goes first so that binds may nest inside it (``--bind SRC:/workspace/x``).
    binds = list(spec.binds)
    if spec.workspace is not None:
        binds.insert(
            0, Bind(source=spec.workspace, target=spec.workspace_target, mode=spec.workspace_mode)
        )
    opened: list[OpenedSource] = []
    for bind in binds:
        source = _open_one(bind)
        if source is not None:
            opened.append(source)
    _refuse_kernel_submounts(opened)
    _refuse_dangling_links(opened, {b.destination for b in binds if not b.optional})
    # Parents before children (stable, so a later bind at the same depth still wins): a
    # workspace shown at its own path under /usr must be mounted after /usr, not hidden by it.
    opened.sort(key=lambda item: item.target.rstrip("/").count("/"))
    return opened


def shown_sources(spec: SandboxSpec, sources: list[OpenedSource]) -> list[Shown]:
    """What the sandbox will show of the host, by identity, for :func:`check_protected`.

    Recreated symlinks show nothing (their text resolves inside); a retained seed is copied
    in, so it counts as shown.
    """
    shown: list[Shown] = []
    for source in sources:
        if source.kind == "symlink":
            continue
        is_workspace = source.source == spec.workspace and source.target == normalize_inside(
            spec.workspace_target
        )
        origin = "workspace" if is_workspace else "bind"
        shown.append(Shown(source.source, (source.dev, source.ino), origin, source.writable))
    for item in spec.retained:
        if item.seed is not None:
            with contextlib.suppress(OSError):
                info = os.stat(item.seed)
                shown.append(Shown(item.seed, (info.st_dev, info.st_ino), "seed", writable=True))
    return shown


def _walk_dirs(root_fd: int, parts: list[str]) -> int:
    """Create and open ``parts`` under ``root_fd`` as directories, refusing any symlink."""
    fd = os.dup(root_fd)
    for part in parts:
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o755, dir_fd=fd)
        try:
            child = sc.openat2(part, _O_PATH_NOFOLLOW | os.O_DIRECTORY, _RESOLVE_STRICT, fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def _split(target: str) -> tuple[list[str], str]:
    parts = [part for part in target.split("/") if part and part != "."]
    if not parts or ".." in parts:
        raise SandboxSetupError(f"bad sandbox path {target!r}")
    return parts[:-1], parts[-1]


def _clone_origin(source: OpenedSource) -> int:
    """Open a source again in the sandbox's mount namespace, check it, clone its mounts.

    The clone is a detached copy of the source's mount tree (submounts included) taken
    before the staging tmpfs exists, so it can never contain the staging root itself; its
    flags are tightened before it is attached anywhere.
    """
    if source.kind == "symlink":
        return -1
    origin = sc.openat2(source.source, _O_PATH_NOFOLLOW, _RESOLVE_STRICT)
    try:
        info = os.fstat(origin)
        if (info.st_dev, info.st_ino) != (source.dev, source.ino):
            raise SandboxSetupError(f"bind source {source.source} changed during setup")
        tree = sc.open_tree_clone(origin)
    finally:
        os.close(origin)
    attrs = sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV
    if not source.writable:
        attrs |= sc.MOUNT_ATTR_RDONLY
    try:
        sc.mount_setattr_recursive(tree, attrs)
    except BaseException:
        os.close(tree)
        raise
    return tree


def _bind_source(root_fd: int, source: OpenedSource, origin: int) -> None:
    parents, name = _split(source.target)
    parent_fd = _walk_dirs(root_fd, parents)
    try:
        if source.kind == "symlink":
            with contextlib.suppress(FileExistsError):
                os.symlink(source.link, name, dir_fd=parent_fd)
            return
        if source.kind == "dir":
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=parent_fd)
        else:
            with contextlib.suppress(FileExistsError):
                os.close(
                    os.open(
                        name,
                        os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW,
                        0o644,
                        dir_fd=parent_fd,
                    )
                )
        point = sc.openat2(name, _O_PATH_NOFOLLOW, _RESOLVE_STRICT, parent_fd)
        try:
            sc.move_mount_fd(origin, point)
        finally:
            os.close(point)
        mounted = sc.openat2(name, _O_PATH_NOFOLLOW, _RESOLVE_STRICT, parent_fd)
        try:
            info = os.fstat(mounted)
            if (info.st_dev, info.st_ino) != (source.dev, source.ino):
                raise SandboxSetupError(f"bind {source.target} does not show the opened source")
        finally:
            os.close(mounted)
    finally:
        os.close(parent_fd)


def _write_resolv_conf(root_fd: int, spec: SandboxSpec, sources: list[OpenedSource]) -> None:
    """Write the sandbox's own ``/etc/resolv.conf`` unless a bind already shows one.

    The file lives on the root tmpfs (read-only once the root is remounted), so lookups
    fail at once offline instead of spinning on ``127.0.0.1:53`` (see ``_resolv``).
    """
    if any(source.target == RESOLV_CONF_PATH for source in sources):
        return
    parents, name = _split(RESOLV_CONF_PATH)
    parent_fd = _walk_dirs(root_fd, parents)
    try:
        fd = os.open(
            name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
            dir_fd=parent_fd,
        )  # fmt: skip
        try:
            os.write(fd, resolv_conf(spec.network))
        finally:
            os.close(fd)
    finally:
        os.close(parent_fd)


def _make_dev(root: str) -> None:
    dev = f"{root}/dev"
    for node in DEVICE_NODES:
        path = f"{dev}/{node}"
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o644))
        sc.mount(f"/dev/{node}", path, None, sc.MS_BIND)
        mounted = os.open(path, _O_PATH_NOFOLLOW)
        try:
            sc.mount_setattr_recursive(mounted, sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NOEXEC)
        finally:
            os.close(mounted)
    os.mkdir(f"{dev}/pts", 0o755)
    sc.mount(
        "devpts",
        f"{dev}/pts",
        "devpts",
        sc.MS_NOSUID | sc.MS_NOEXEC,
        "newinstance,ptmxmode=0666,mode=0620",
    )
    os.symlink("pts/ptmx", f"{dev}/ptmx")
    os.mkdir(f"{dev}/shm")
    os.chmod(f"{dev}/shm", STICKY_WORLD_MODE)
    os.symlink("/proc/self/fd", f"{dev}/fd")
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"{dev}/{name}")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _allow_dns_port() -> None:
    """Let the sandbox's unprivileged processes bind ports from 53 up (``proxy`` mode).

    The egress helper serves DNS on 127.0.0.1:53 without any capability. The value is per
    network namespace: only the sandbox's own, route-less one changes (the init still holds
    ``CAP_NET_ADMIN`` there, before it drops every capability), never the host's.
    """
    _write_proc(UNPRIVILEGED_PORT_START, str(DNS_PORT).encode())


def _write_proc(path: str, value: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.write(fd, value)
    finally:
        os.close(fd)


def _attach_detached(root_fd: int, target: str, mount_fd: int) -> None:
    """Attach a detached mount (a retained image) at ``target`` under the new root."""
    parents, name = _split(target)
    parent_fd = _walk_dirs(root_fd, parents)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        point = sc.openat2(name, _O_PATH_NOFOLLOW, _RESOLVE_STRICT, parent_fd)
        try:
            sc.move_mount_fd(mount_fd, point)
        finally:
            os.close(point)
    finally:
        os.close(parent_fd)


def _park_projections(projections: tuple[FileProjection, ...]) -> None:
    """Give each projection an empty directory of the *old* root to park its copy on.

    A small owner-only tmpfs is mounted on the staging directory first (the staging tmpfs
    then goes on top of it): it is a mount of the old root, so everything parked there
    leaves with the old root's one detach after ``pivot_root`` and is never in the new root.
    """
    sc.mount(
        "tmpfs",
        STAGING_DIR,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
        # Two directories each: the parking one, and the fallback tmpfs's mount point in it.
        f"size={PARK_TMPFS_BYTES},nr_inodes={2 * len(projections) + 16},mode=0700",
    )
    for index, projection in enumerate(projections):
        directory = f"{STAGING_DIR}/{index}"
        os.mkdir(directory, 0o700)
        projection.park(directory)


def _attach_projections(root_fd: int, projections: tuple[FileProjection, ...]) -> None:
    """Mount each projection at its target beneath the new root (its parents made first)."""
    for projection in projections:
        parents, _ = _split(normalize_inside(projection.target))
        os.close(_walk_dirs(root_fd, parents))
        projection.attach(root_fd)


def build_rootfs(
    spec: SandboxSpec,
    sources: list[OpenedSource],
    detached: tuple[tuple[str, int], ...] = (),
    projections: tuple[FileProjection, ...] = (),
) -> None:
    """Assemble the sandbox root and pivot into it (runs in the sandbox's init).

    ``detached`` holds ``(target, mount fd)`` pairs of mounts made by the launcher (retained
    images), attached after the binds; ``projections`` are verified files mounted read-only
    last (parked in the old root first, see :func:`_park_projections`).

    Raises:
        OSError: a mount step failed.
        SandboxSetupError: a bind did not show the source that was opened.
    """
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    # Open every source before the staging tmpfs covers anything a source may live under.
    origins = [_clone_origin(source) for source in sources]
    if projections:
        _park_projections(projections)
    size = spec.limits.disk if spec.limits.disk is not None else DEFAULT_SCRATCH_BYTES
    root = STAGING_DIR
    inodes = max(MIN_SCRATCH_INODES, size // BYTES_PER_SCRATCH_INODE)
    sc.mount(
        "tmpfs",
        root,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        f"size={size},nr_inodes={inodes},mode=0755",
    )
    for name in ("proc", "dev", "tmp"):
        os.mkdir(f"{root}/{name}", 0o755)
    os.chmod(f"{root}/tmp", STICKY_WORLD_MODE)
    # The private /tmp becomes its own mount (a bind of the root tmpfs's directory: same
    # tmpfs, same size limit) before any bind lands below it, so that it stays writable once
    # / is read-only and a host path shown under it (a checkout in /tmp/x, at its own path)
    # is a mount on top of it, in a parent directory made on the tmpfs. Made later, a
    # non-recursive bind would hide those mounts; nothing else of the host's /tmp is shown.
    sc.mount(f"{root}/tmp", f"{root}/tmp", None, sc.MS_BIND)
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for source, origin in zip(sources, origins, strict=True):
            _bind_source(root_fd, source, origin)
        for target, mount_fd in detached:
            _attach_detached(root_fd, target, mount_fd)
        _attach_projections(root_fd, projections)
        _write_resolv_conf(root_fd, spec, sources)
    finally:
        os.close(root_fd)
        for origin in origins:
            if origin >= 0:
                os.close(origin)
    sc.mount("proc", f"{root}/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC)
    _make_dev(root)
    # /dev/shm stays writable (sharing the root tmpfs and its size) once / is ro, like /tmp.
    sc.mount(f"{root}/dev/shm", f"{root}/dev/shm", None, sc.MS_BIND)
    os.chdir(root)
    sc.pivot_root(".", ".")
    sc.umount2(".", sc.MNT_DETACH)
    os.chdir("/")
    sc.mount(
        None, "/", None, sc.MS_REMOUNT | sc.MS_BIND | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV
    )
    socket.sethostname(spec.hostname)
    _loopback_up()
    if spec.network == "proxy":
        _allow_dns_port()


def forbid_nested_user_namespaces() -> None:
    """Set this user namespace's ``max_user_namespaces`` to 0 (needs the new /proc).

    Raises:
        OSError: the sysctl could not be written.
    """
    fd = os.open("/proc/sys/user/max_user_namespaces", os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)


#: /proc entries made read-only (global kernel knobs a uid-0 mapping could otherwise write).
PROC_READ_ONLY: Final = ("sys", "sysrq-trigger", "irq", "bus", "fs", "asound")
#: /proc files hidden behind /dev/null.
PROC_MASKED_FILES: Final = (
    "kcore",
    "kmsg",
    "keys",
    "timer_list",
    "sched_debug",
    "latency_stats",
    "kallsyms",
    "kpagecount",
    "kpageflags",
)
#: /proc directories hidden behind an empty read-only tmpfs.
PROC_MASKED_DIRS: Final = ("acpi", "scsi", "driver")


_MASK_ATTRS: Final = (
    sc.MOUNT_ATTR_RDONLY | sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV | sc.MOUNT_ATTR_NOEXEC
)


def _root_only_proc_files() -> set[str]:
    """Top-level /proc files nobody but root may read: kernel internals by the kernel's own
    account (slabinfo, vmallocinfo, kpagecgroup, ...), which host uid 0 could otherwise read."""
    found: set[str] = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            continue
        with contextlib.suppress(OSError):
            mode = os.lstat(f"/proc/{name}").st_mode
            if stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                found.add(name)
    return found


def harden_proc() -> None:
    """Make global kernel knobs in the fresh /proc read-only and mask kernel internals.

    A root launcher's sandbox runs as host uid 0 (without capabilities): file-mode checks
    alone would let it write root-owned /proc files such as ``/proc/sys/**`` and
    ``/proc/sysrq-trigger``. The set Docker masks, plus every top-level /proc file that is
    not world-readable, is applied for every launcher.

    Raises:
        OSError: a mount step failed.
    """
    for name in PROC_READ_ONLY:
        path = f"/proc/{name}"
        if not os.path.lexists(path):
            continue
        sc.mount(path, path, None, sc.MS_BIND | sc.MS_REC)
        fd = os.open(path, _O_PATH_NOFOLLOW)
        try:
            sc.mount_setattr_recursive(fd, _MASK_ATTRS)
        finally:
            os.close(fd)
    for name in sorted(set(PROC_MASKED_FILES) | _root_only_proc_files()):
        path = f"/proc/{name}"
        if os.path.isfile(path):
            sc.mount("/dev/null", path, None, sc.MS_BIND)
            fd = os.open(path, _O_PATH_NOFOLLOW)
            try:
                sc.mount_setattr_recursive(fd, _MASK_ATTRS)
            finally:
                os.close(fd)
    for name in PROC_MASKED_DIRS:
        path = f"/proc/{name}"
        if os.path.isdir(path) and not os.path.islink(path):
            sc.mount(
                "tmpfs",
                path,
                "tmpfs",
                sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
                "size=0",
            )


def used_bytes(path: str) -> int:
    """Bytes in use on the filesystem mounted at ``path``."""
    info = os.statvfs(path)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def scratch_used_bytes() -> int:
    """Bytes in use on the root tmpfs (the sandbox's writable scratch)."""
    info = os.statvfs("/tmp")
    return (info.f_blocks - info.f_bfree) * info.f_frsize
