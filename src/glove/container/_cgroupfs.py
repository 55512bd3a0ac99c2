"""Parsers for the kernel's cgroup interface files and the lines that locate them (sans-IO).

Everything the cgroup v2 code reads goes through here: ``/proc/self/cgroup`` (which group
the launcher is in), ``/proc/self/mountinfo`` (where the cgroup2 filesystem is mounted, and
at which cgroup its root sits), flat-keyed files (``memory.events``, ``pids.events``,
``cgroup.events``, ``cpu.stat``: ``key value`` per line) and space-separated controller
lists (``cgroup.controllers``, ``cgroup.subtree_control``). Each parser returns a value or
raises :class:`~glove.container.errors.CgroupFormatError`; nothing here touches the system.
"""

from __future__ import annotations

import posixpath
import re
from typing import Final, NamedTuple

from glove.container.errors import CgroupFormatError

#: The largest interface file accepted (the longest, ``cpu.stat``, is a few hundred bytes;
#: ``mountinfo`` with thousands of mounts stays well under this).
MAX_CGROUP_FILE_BYTES: Final = 1024 * 1024
#: The largest number of lines a flat-keyed file may have.
MAX_KEYED_LINES: Final = 256
#: Digits accepted in one value (a u64 has 20; more is not the kernel speaking).
MAX_VALUE_DIGITS: Final = 20
#: Controller and key names: lower case, digits, ``_`` and ``.`` (``max.imposed``).
_NAME_RE: Final = re.compile(r"^[a-z0-9_.]{1,64}$")
#: A mountinfo field escapes space, tab, newline and backslash as three octal digits.
_OCTAL_ESCAPE_RE: Final = re.compile(r"\\([0-7]{3})")


class Cgroup2Mount(NamedTuple):
    """One cgroup2 filesystem in the mount table.

    Attributes:
        mount_point: where it is mounted, as an absolute path.
        root: the cgroup at its root, relative to the reader's cgroup namespace (``/`` for a
            mount of the whole hierarchy as seen from that namespace).
    """

    mount_point: str
    root: str


def _check_size(text: str, what: str) -> None:
    if len(text) > MAX_CGROUP_FILE_BYTES:
        raise CgroupFormatError(f"{what}: larger than {MAX_CGROUP_FILE_BYTES} bytes")


def _check_path(path: str, what: str) -> str:
    if not path.startswith("/") or "\0" in path:
        raise CgroupFormatError(f"{what}: not an absolute path: {path!r}")
    normal = posixpath.normpath(path)
    # normpath keeps a leading "//"; a cgroup path never has one.
    return "/" + normal.lstrip("/")


def parse_proc_cgroup(text: str) -> str | None:
    """Return the cgroup v2 path of ``/proc/PID/cgroup`` (the ``0::`` line), or None.

    Raises:
        CgroupFormatError: a line is not ``ID:CONTROLLERS:PATH``.
    """
    _check_size(text, "/proc/self/cgroup")
    found: str | None = None
    for line in text.splitlines():
        if not line:
            continue
        ident, sep1, rest = line.partition(":")
        controllers, sep2, path = rest.partition(":")
        if not sep1 or not sep2 or not ident.isdigit():
            raise CgroupFormatError(f"/proc/self/cgroup: bad line {line!r}")
        if ident == "0" and controllers == "":
            if found is not None:
                raise CgroupFormatError("/proc/self/cgroup: two cgroup v2 lines")
            found = _check_path(path, "/proc/self/cgroup")
    return found


def _is_number(text: str) -> bool:
    return 0 < len(text) <= MAX_VALUE_DIGITS and text.isascii() and text.isdigit()


def _unescape(field: str) -> str:
    return _OCTAL_ESCAPE_RE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_cgroup2_mounts(text: str) -> list[Cgroup2Mount]:
    """Return every cgroup2 mount of a ``/proc/PID/mountinfo`` text, in table order.

    Raises:
        CgroupFormatError: a line lacks the fields mountinfo(5) defines.
    """
    _check_size(text, "mountinfo")
    mounts: list[Cgroup2Mount] = []
    for line in text.splitlines():
        if not line:
            continue
        fields = line.split(" ")
        try:
            dash = fields.index("-", 6)
        except ValueError:
            raise CgroupFormatError(f"mountinfo: no separator in {line[:200]!r}") from None
        if len(fields) < dash + 3:
            raise CgroupFormatError(f"mountinfo: short line {line[:200]!r}")
        if fields[dash + 1] != "cgroup2":
            continue
        root = _check_path(_unescape(fields[3]), "mountinfo root")
        point = _check_path(_unescape(fields[4]), "mountinfo mount point")
        mounts.append(Cgroup2Mount(mount_point=point, root=root))
    return mounts


def cgroup_dir(mount: Cgroup2Mount, cgroup: str) -> str | None:
    """Return the directory of ``cgroup`` under ``mount``, or None if the mount cannot reach it.

    ``cgroup`` is a path as ``/proc/self/cgroup`` gives it (relative to the reader's cgroup
    namespace, like the mount's root).
    """
    root = mount.root.rstrip("/")
    if cgroup != mount.root and not cgroup.startswith(root + "/"):
        return None
    below = cgroup[len(root) :].lstrip("/")
    return posixpath.join(mount.mount_point, below) if below else mount.mount_point


def parse_keyed(text: str, what: str = "cgroup file") -> dict[str, int]:
    """Parse a flat-keyed file (``key value`` per line, values non-negative integers).

    Raises:
        CgroupFormatError: a line is not ``key value``, a key repeats, or a value is not a
            non-negative integer.
    """
    _check_size(text, what)
    values: dict[str, int] = {}
    lines = text.splitlines()
    if len(lines) > MAX_KEYED_LINES:
        raise CgroupFormatError(f"{what}: more than {MAX_KEYED_LINES} lines")
    for line in lines:
        if not line:
            continue
        key, sep, value = line.partition(" ")
        if not sep or not _NAME_RE.match(key) or not _is_number(value):
            raise CgroupFormatError(f"{what}: bad line {line[:200]!r}")
        if key in values:
            raise CgroupFormatError(f"{what}: key {key!r} twice")
        values[key] = int(value)
    return values


def parse_controllers(text: str, what: str = "cgroup.controllers") -> frozenset[str]:
    """Parse a space-separated controller list (``cgroup.controllers``, ``subtree_control``).

    Raises:
        CgroupFormatError: a name is not a controller name.
    """
    _check_size(text, what)
    names = text.split()
    for name in names:
        if not _NAME_RE.match(name):
            raise CgroupFormatError(f"{what}: bad controller name {name[:64]!r}")
    return frozenset(names)


def parse_pid_list(text: str, what: str = "cgroup.procs") -> list[int]:
    """Parse ``cgroup.procs`` (one pid per line).

    Raises:
        CgroupFormatError: a line is not a positive integer.
    """
    _check_size(text, what)
    pids: list[int] = []
    for line in text.splitlines():
        if not line:
            continue
        if not _is_number(line) or int(line) <= 0:
            raise CgroupFormatError(f"{what}: bad pid {line[:32]!r}")
        pids.append(int(line))
    return pids


def parse_proc_cgroups(text: str) -> dict[str, int]:
    """Parse ``/proc/cgroups``: each enabled controller's v1 hierarchy id (0: not on v1).

    Raises:
        CgroupFormatError: a line is not ``name hierarchy num_cgroups enabled``.
    """
    _check_size(text, "/proc/cgroups")
    bound: dict[str, int] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        well_formed = len(fields) == 4 and _NAME_RE.match(fields[0])
        if not well_formed or not all(map(_is_number, fields[1:])):
            raise CgroupFormatError(f"/proc/cgroups: bad line {line[:200]!r}")
        if fields[3] != "0":
            bound[fields[0]] = int(fields[1])
    return bound
