"""What may be exposed: the directory itself (owner, mode, filesystem), its contents, its names.

``exposure.create`` runs every check, and a session's *prepare* runs them again, always
through the descriptor the registry pinned (never by resolving the path again):

* **the directory**: owned by gloved's own uid and not writable by group or others; not a
  system runtime directory (``/dev``, ``/proc``, ``/sys``, ``/run`` and everything under
  them); not on a kernel filesystem (proc, sysfs, cgroup, cgroup2, devpts, devtmpfs,
  securityfs, debugfs, tracefs, bpf, ... by ``fstatfs`` magic and by the mount's type in
  ``/proc/self/mountinfo``, found by the descriptor's ``mnt_id``); not on a tmpfs that is
  mounted anywhere under ``/dev`` or ``/run`` (``/dev/shm``, ``/run/user/UID``: where host
  services keep their sockets), whatever path it is reached by. A directory listed in
  ``gloved.toml``'s ``[exposures] allow_special`` is exempt from these rules (the operator
  said so), never from the others.
* **its contents**: no FIFO anywhere in the tree (no kernel mechanism can keep a sandbox
  from opening one a host process reads), and no socket either where this host has no
  Unix socket gate (:func:`glove.container.probe_unix_gate`); every submount on a
  permitted filesystem; every directory readable (what cannot be read cannot be checked).
  The walk is bounded (:data:`MAX_SCAN_ENTRIES`) and runs off the event loop.
* **its names**: the path and the target free of NUL, newlines and other control
  characters.

A FIFO or socket a host process makes *after* the check is not seen by it; what remains
reachable then is written in docs/sessions.md and decision 0034.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final, NamedTuple

from glove.container.linux import filesystem_magic
from glove.session.errors import ExposureError

#: Entries a contents check walks at most before refusing (about 5 s at 5 us an entry).
MAX_SCAN_ENTRIES: Final = 1_000_000
#: Directory levels it descends at most (one descriptor held per level).
MAX_SCAN_DEPTH: Final = 128
#: Directories under which nothing is exposed, whatever their filesystem.
SYSTEM_RUNTIME_DIRS: Final = ("/dev", "/proc", "/sys", "/run")
#: Where a tmpfs is a system runtime filesystem (wherever else it is also mounted).
RUNTIME_TMPFS_UNDER: Final = ("/dev", "/run")
#: Kernel filesystems, by ``statfs.f_type`` magic (``<linux/magic.h>``).
KERNEL_FS_MAGIC: Final = {
    0x9FA0: "proc",
    0x62656572: "sysfs",
    0x27E0EB: "cgroup",
    0x63677270: "cgroup2",
    0x1CD1: "devpts",
    0x73636673: "securityfs",
    0x64626720: "debugfs",
    0x74726163: "tracefs",
    0xCAFE4A11: "bpf",
    0x62656570: "configfs",
    0xDE5E81E4: "efivarfs",
    0x6165676C: "pstore",
    0x42494E4D: "binfmt_misc",
    0x65735543: "fusectl",
    0x19800202: "mqueue",
    0x6E736673: "nsfs",
    0xF97CFF8C: "selinuxfs",
    0x43415D53: "smackfs",
}
#: The same by the mount's type name, plus devtmpfs (its magic is tmpfs's).
KERNEL_FS_TYPES: Final = frozenset({*KERNEL_FS_MAGIC.values(), "devtmpfs"})
#: Filesystems in memory that a system runtime directory may be (judged by where mounted).
MEMORY_FS_TYPES: Final = frozenset({"tmpfs", "ramfs"})
_PROC_SELF: Final = "/proc/self"
_O_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class MountEntry(NamedTuple):
    """One line of ``/proc/self/mountinfo`` (the fields these checks read)."""

    mount_id: int
    device: str  # "major:minor": every mount of one superblock shares it
    mount_point: str
    fstype: str


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as ``\\ooo``."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and all(c in "01234567" for c in code):
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """The mounts of a ``/proc/PID/mountinfo`` text (malformed lines are skipped)."""
    entries = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            entries.append(
                MountEntry(
                    mount_id=int(fields[0]),
                    device=fields[2],
                    mount_point=_unescape(fields[4]),
                    fstype=fields[separator + 1],
                )
            )
        except (ValueError, IndexError):
            continue
    return entries


def under(path: str, tops: Iterable[str]) -> str | None:
    """The first of ``tops`` that ``path`` (normalized, absolute) is or lies under."""
    for top in tops:
        if path == top or path.startswith(top + "/"):
            return top
    return None


def check_text(value: str, what: str) -> None:
    """Refuse a name with a NUL, a newline or any other control character.

    Raises:
        ExposureError: naming the first such character.
    """
    for index, char in enumerate(value):
        code = ord(char)
        if code < 0x20 or 0x7F <= code < 0xA0:
            raise ExposureError(
                f"the {what} {value!r} has a control character (U+{code:04X}) at {index}"
            )


def _mount_id(fd: int) -> int:
    """The mount ``fd`` is on, from ``/proc/self/fdinfo`` (works for O_PATH descriptors).

    Raises:
        ExposureError: the kernel does not say.
    """
    text = Path(f"{_PROC_SELF}/fdinfo/{fd}").read_text()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "mnt_id":
            return int(value)
    raise ExposureError("cannot tell which mount the directory is on (no mnt_id in fdinfo)")


def _mounts() -> list[MountEntry]:
    return parse_mountinfo(Path(f"{_PROC_SELF}/mountinfo").read_text())


def filesystem_refusal(fd: int, mounts: list[MountEntry] | None = None) -> str | None:
    """Why the filesystem ``fd`` is on may not be exposed, or None.

    Raises:
        OSError: ``fstatfs`` or ``/proc/self`` failed.
    """
    magic = filesystem_magic(fd)
    if magic in KERNEL_FS_MAGIC:
        return f"it is on a {KERNEL_FS_MAGIC[magic]} filesystem, the kernel's own"
    mounts = _mounts() if mounts is None else mounts
    mount_id = _mount_id(fd)
    entry = next((m for m in mounts if m.mount_id == mount_id), None)
    if entry is None:
        return "its mount is not in /proc/self/mountinfo"
    if entry.fstype in KERNEL_FS_TYPES:
        return f"it is on a {entry.fstype} filesystem, the kernel's own"
    if entry.fstype in MEMORY_FS_TYPES:
        for other in mounts:
            top = under(other.mount_point, RUNTIME_TMPFS_UNDER)
            if other.device == entry.device and top is not None:
                return (
                    f"it is on the {entry.fstype} mounted at {other.mount_point}, a system "
                    f"runtime filesystem (under {top}), where host services keep sockets"
                )
    return None


def check_directory(fd: int, path: str, *, exempt: bool) -> None:
    """The directory rules (owner, mode, place, filesystem) for the pinned ``fd``.

    Raises:
        ExposureError: a rule is broken; the message says which and how to allow it.
    """
    if exempt:
        return
    hint = f"(an operator may list it in gloved.toml: [exposures] allow_special = [{path!r}])"
    top = under(path, SYSTEM_RUNTIME_DIRS)
    if top is not None:
        raise ExposureError(
            f"refusing to expose {path}: it is under {top}, a system directory {hint}"
        )
    info = os.fstat(fd)
    if info.st_uid != os.geteuid():
        raise ExposureError(
            f"refusing to expose {path}: it is owned by uid {info.st_uid}, not by gloved's "
            f"uid {os.geteuid()} {hint}"
        )
    writers = [who for bit, who in ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "others"))
               if info.st_mode & bit]  # fmt: skip
    if writers:
        raise ExposureError(
            f"refusing to expose {path}: it is writable by {' and '.join(writers)} "
            f"(mode {stat.S_IMODE(info.st_mode):04o}; chmod go-w it) {hint}"
        )
    try:
        reason = filesystem_refusal(fd)
    except OSError as exc:
        raise ExposureError(f"cannot check the filesystem of {path}: {exc.strerror}") from exc
    if reason is not None:
        raise ExposureError(f"refusing to expose {path}: {reason} {hint}")


class _Walk:
    """One bounded walk of a tree from a directory descriptor."""

    def __init__(self, path: str, *, sockets: bool, max_entries: int) -> None:
        self.path = path
        self.sockets = sockets
        self.max_entries = max_entries
        self.entries = 0
        self.mounts: list[MountEntry] | None = None

    def refuse(self, where: str, why: str) -> ExposureError:
        return ExposureError(f"refusing to expose {self.path}: {where} {why}")

    def submount(self, fd: int, where: str) -> None:
        if self.mounts is None:
            self.mounts = _mounts()
        reason = filesystem_refusal(fd, self.mounts)
        if reason is not None:
            raise self.refuse(where, f"is a mount point: {reason}")

    def entry(self, where: str, kind: int) -> None:
        if stat.S_ISFIFO(kind):
            raise self.refuse(
                where,
                "is a FIFO: a host process reading it would be a channel no sandbox rule "
                "covers; remove it",
            )
        if stat.S_ISSOCK(kind) and self.sockets:
            raise self.refuse(
                where,
                "is a Unix socket, and this host has no gate for connect() (glove doctor, "
                "unix_socket_gate); remove it",
            )

    def walk(self, top: int) -> None:
        """Depth first, holding one descriptor per level of the current path only (each
        directory is listed whole, then closed only once its subdirectories are done).

        Raises:
            ExposureError: the first thing refused.
        """
        root = os.open(".", _O_DIR, dir_fd=top)
        top_dev = os.fstat(root).st_dev
        frames: list[tuple[int, str, list[str]]] = []
        try:
            frames.append((root, self.path, self._list(root, self.path)))
            while frames:
                fd, where, subdirs = frames[-1]
                if not subdirs:
                    os.close(fd)
                    frames.pop()
                    continue
                name = subdirs.pop()
                inner = f"{where}/{name}"
                if len(frames) >= MAX_SCAN_DEPTH:
                    raise self.refuse(inner, f"is deeper than {MAX_SCAN_DEPTH} levels to check")
                try:
                    child = os.open(name, _O_DIR | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    raise self.refuse(
                        inner, f"cannot be read to be checked ({exc.strerror})"
                    ) from exc
                frames.append((child, inner, []))
                if os.fstat(child).st_dev != top_dev:
                    self.submount(child, inner)
                frames[-1] = (child, inner, self._list(child, inner))
        finally:
            for fd, _, _ in frames:
                os.close(fd)

    def _list(self, fd: int, where: str) -> list[str]:
        """Check every entry of directory ``fd``; return its subdirectories' names."""
        subdirs = []
        try:
            listing = os.scandir(fd)
        except OSError as exc:
            raise self.refuse(where, f"cannot be read to be checked ({exc.strerror})") from exc
        with listing:
            for item in listing:
                self.entries += 1
                if self.entries > self.max_entries:
                    raise self.refuse(
                        "its tree", f"has more than {self.max_entries} entries to check"
                    )
                if item.is_dir(follow_symlinks=False):
                    subdirs.append(item.name)
                elif not item.is_file(follow_symlinks=False) and not item.is_symlink():
                    self.entry(f"{where}/{item.name}", item.stat(follow_symlinks=False).st_mode)
        return subdirs


def check_contents(
    fd: int, path: str, *, sockets: bool, max_entries: int = MAX_SCAN_ENTRIES
) -> None:
    """Walk the tree under the pinned ``fd``: no FIFO, no socket when ``sockets``, no
    submount of a refused filesystem, nothing unreadable, at most ``max_entries`` entries
    and :data:`MAX_SCAN_DEPTH` levels.

    Blocking (run it off the event loop).

    Raises:
        ExposureError: the first thing refused, by its path.
    """
    walk = _Walk(path, sockets=sockets, max_entries=max_entries)
    try:
        walk.walk(fd)
    except ExposureError:
        raise
    except OSError as exc:
        raise ExposureError(f"cannot check the contents of {path}: {exc.strerror}") from exc
