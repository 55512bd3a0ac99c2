"""A deny-default Seatbelt (SBPL) profile rendered from a :class:`SandboxSpec` (sans-IO).

The profile starts ``(version 1)`` ``(deny default)`` and then allows, rule family by rule
family, only what the spec grants plus the fixed minimum a macOS process needs to start:

* **process**: ``process-fork``; ``process-exec`` and ``file-map-executable`` only beneath
  paths the profile lets the command read (its binds, the workspace, the private temp dir,
  the system libraries); ``process-info*`` and ``signal`` only within the same sandbox (the
  SBPL counterpart of a PID namespace).
* **files**: ``file-read*`` beneath every bind source and the workspace; ``file-write*``
  beneath the workspace when it is ``rw``, ``rw`` binds, and the private temp directory, a
  per-run directory passed as the parameter ``GLOVE_PRIVATE_TMP`` (``sandbox-exec -D``);
  ``file-read-metadata`` on each ancestor of a granted path (so path walks and ``getcwd``
  work) and nothing under them.
* **system baseline** (:data:`SYSTEM_READ_SUBPATHS`, :data:`SYSTEM_DEVICES`): the dyld shared
  cache, ``/System/Library``, ``/usr/lib``, the timezone database, ``/dev/null`` and
  friends, and the three firmlinked roots ``/etc``, ``/tmp``, ``/var`` as metadata only.
* **network**: nothing. No ``network*`` rule is emitted, so sockets cannot connect, bind or
  resolve (``network: none`` on Linux keeps a private loopback; macOS has none to give).
* **IPC and services**: one ``mach-lookup`` (``opendirectoryd.libinfo``: user and group
  lookups) and a short ``sysctl-read`` list (CPU, page size, OS version). Not granted:
  ``kern.hostname`` (the host name stays private; the spec's hostname cannot be applied),
  ``kern.proc.*`` (other processes stay invisible), preferences, notifications, POSIX IPC.
* **terminal**: ``pseudo-tty``, ``/dev/ptmx``, ``/dev/ttys*`` and ``/dev/tty`` only when the
  spec asks for a PTY.

Every path is emitted as an SBPL string literal by :func:`sbpl_string`: ``\\`` and ``"`` are
escaped, newline, tab and carriage return become ``\\n``, ``\\t``, ``\\r``, and any other
control character is refused, so no path (quotes, backslashes, parentheses, semicolons,
newlines) can end its string early or start a form. No path is ever written into a comment
or a regex. Paths are canonicalized the way macOS reports them to the sandbox (``/etc``,
``/tmp``, ``/var`` are links into ``/private``); resolving any other symlink needs the file
system and is the caller's job (:func:`~glove.container.macos.plan_macos_launch` does it).

This module imports no ``os``: it is pure text from a value, so ``glove exec --dry-run
--platform macos`` can print it on any machine.
"""

from __future__ import annotations

import posixpath
from typing import Final

from glove.container._spec import SandboxSpec
from glove.container.errors import SpecError

#: The parameter that carries the per-run private temp dir (``sandbox-exec -D NAME=PATH``).
PRIVATE_TMP_PARAM: Final = "GLOVE_PRIVATE_TMP"
#: macOS roots that are symlinks into /private; the sandbox sees the resolved path.
FIRMLINKED_ROOTS: Final = ("/etc", "/tmp", "/var")  # noqa: S108 - macOS layout, not a temp file
#: System trees a process needs to load at all (read and map, never write).
SYSTEM_READ_SUBPATHS: Final = (
    "/System/Library",
    "/System/Volumes/Preboot/Cryptexes/OS",
    "/usr/lib",
    "/private/var/db/dyld",
    "/private/var/db/timezone",
)
#: Single system files every process may read.
SYSTEM_READ_LITERALS: Final = ("/private/etc/localtime",)
#: Devices: read-only ones, and ones that may also be written.
SYSTEM_DEVICES_READ: Final = ("/dev/random", "/dev/urandom")
SYSTEM_DEVICES_RW: Final = ("/dev/null", "/dev/zero")
SYSTEM_DEVICES = SYSTEM_DEVICES_READ + SYSTEM_DEVICES_RW
#: The descriptor directory (``/dev/stdin`` and ``/dev/fd/N`` resolve here).
FD_DIRECTORY: Final = "/dev/fd"
#: The one Mach service granted: user and group lookups (getpwuid, getgrgid).
MACH_SERVICES: Final = ("com.apple.system.opendirectoryd.libinfo",)
#: Sysctls a shell and its tools read; no host name, no process table, no network state.
SYSCTL_NAMES: Final = (
    "hw.activecpu",
    "hw.byteorder",
    "hw.cachelinesize_compat",
    "hw.cpufamily",
    "hw.cputype",
    "hw.logicalcpu",
    "hw.logicalcpu_max",
    "hw.machine",
    "hw.memsize",
    "hw.ncpu",
    "hw.pagesize",
    "hw.pagesize_compat",
    "hw.physicalcpu",
    "hw.physicalcpu_max",
    "kern.argmax",
    "kern.maxfilesperproc",
    "kern.osproductversion",
    "kern.osrelease",
    "kern.ostype",
    "kern.osvariant_status",
    "kern.osversion",
    "kern.secure_kernel",
    "kern.usrstack64",
    "kern.version",
    "sysctl.proc_cputype",
)
SYSCTL_PREFIXES: Final = ("hw.optional.", "hw.perflevel")
#: Terminal devices granted with a PTY.
PTY_LITERALS: Final = ("/dev/ptmx", "/dev/tty")
PTY_REGEX: Final = "^/dev/ttys[0-9]+$"

_ESCAPES: Final = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def sbpl_string(text: str) -> str:
    """Return ``text`` as one SBPL string literal that cannot end early.

    Raises:
        SpecError: ``text`` holds a control character with no safe escape (not newline,
            tab or carriage return), or a NUL.
    """
    out = ['"']
    for char in text:
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            raise SpecError(
                f"path {text!r} holds control character {ord(char):#04x}, which an SBPL "
                "profile cannot carry safely"
            )
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def macos_path(path: str) -> str:
    """Normalize an absolute path and resolve the firmlinked roots into ``/private``.

    Raises:
        SpecError: the path is relative or holds a NUL.
    """
    if not path.startswith("/") or "\0" in path:
        raise SpecError(f"macOS profile paths must be absolute: {path!r}")
    normal = "/" + posixpath.normpath(path).lstrip("/")
    for root in FIRMLINKED_ROOTS:
        if normal == root or normal.startswith(root + "/"):
            return "/private" + normal
    return normal


def _ancestors(path: str) -> list[str]:
    """Every proper ancestor of ``path``, from ``/`` down."""
    parts = path.strip("/").split("/")[:-1]
    return ["/", *("/" + "/".join(parts[: index + 1]) for index in range(len(parts)))]


def _unique(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def _rule(operations: str, filters: list[str], comment: str = "") -> list[str]:
    lines = [f"; {comment}"] if comment else []
    if not filters:
        return []
    lines.append(f"(allow {operations}")
    lines.extend(f"  {item}" for item in filters)
    lines[-1] += ")"
    return lines


def _subpaths(paths: list[str]) -> list[str]:
    return [f"(subpath {sbpl_string(path)})" for path in paths]


def _literals(paths: list[str]) -> list[str]:
    return [f"(literal {sbpl_string(path)})" for path in paths]


def granted_paths(spec: SandboxSpec) -> tuple[list[str], list[str]]:
    """Return (readable, writable) canonical paths the spec grants, in spec order.

    The workspace appears at its host path (macOS has no mount namespace, so
    ``workspace_target`` cannot relocate it), and so must every bind.

    Raises:
        SpecError: a bind relocates its source, or the spec asks for retained copies.
    """
    if spec.retained:
        raise SpecError("retained writable copies need ext4 images and mounts: Linux only")
    readable: list[str] = []
    writable: list[str] = []
    if spec.workspace is not None:
        workspace = macos_path(spec.workspace)
        readable.append(workspace)
        if spec.workspace_mode == "rw":
            writable.append(workspace)
    for bind in spec.binds:
        source = macos_path(bind.source)
        if bind.target is not None and macos_path(bind.target) != source:
            raise SpecError(
                f"bind {bind.source} -> {bind.target}: macOS has no mount namespace, so a "
                "bind cannot appear at another path; bind it at its own path"
            )
        readable.append(source)
        if bind.mode == "rw":
            writable.append(source)
    return _unique(readable), _unique(writable)


def render_sbpl(spec: SandboxSpec) -> str:
    """Render the deny-default Seatbelt profile for ``spec``.

    The per-run private temp dir is referenced as ``(param "GLOVE_PRIVATE_TMP")``; whoever
    applies the profile passes it with ``sandbox-exec -D``.

    Raises:
        SpecError: a path cannot be carried safely, a bind relocates its source, or the spec
            asks for something the macOS backend cannot do (retained copies).
    """
    readable, writable = granted_paths(spec)
    tmp = f'(subpath (param "{PRIVATE_TMP_PARAM}"))'
    system = list(SYSTEM_READ_SUBPATHS)
    metadata = _unique([ancestor for path in (*readable, *system) for ancestor in _ancestors(path)])
    metadata = [path for path in metadata if path not in readable]
    lines = [
        "(version 1)",
        "(deny default)",
        "; Rendered by glove from a SandboxSpec. Everything not allowed below is denied,",
        "; network included.",
        "",
    ]
    lines += ["; processes: fork, and exec only from trees the command may read"]
    lines += ["(allow process-fork)"]
    lines += _rule("process-exec file-map-executable", [*_subpaths(readable + system), tmp])
    lines += _rule("process-info* signal", ["(target same-sandbox)"])
    lines += [""]
    lines += _rule("file-read*", _subpaths(readable), "files: the spec's binds and workspace")
    lines += _rule("file-write*", _subpaths(writable))
    lines += _rule("file-read* file-write*", [tmp], "the private temp dir (sandbox-exec -D)")
    lines += _rule(
        "file-read-metadata",
        _literals(metadata + [root for root in FIRMLINKED_ROOTS if root not in metadata]),
        "metadata of every ancestor of a granted path, and the firmlinked roots",
    )
    lines += [""]
    lines += _rule(
        "file-read*",
        _subpaths(system) + _literals(list(SYSTEM_READ_LITERALS)),
        "system baseline: the loader, the system libraries, the timezone database",
    )
    lines += _rule("file-read*", _literals(list(SYSTEM_DEVICES_READ)))
    lines += _rule("file-read* file-write-data file-ioctl", _literals(list(SYSTEM_DEVICES_RW)))
    lines += _rule("file-read-data file-write-data", _subpaths([FD_DIRECTORY]))
    lines += [""]
    lines += _rule(
        "mach-lookup",
        [f"(global-name {sbpl_string(name)})" for name in MACH_SERVICES],
        "services: user and group lookups only",
    )
    lines += _rule(
        "sysctl-read",
        [f"(sysctl-name {sbpl_string(name)})" for name in SYSCTL_NAMES]
        + [f"(sysctl-name-prefix {sbpl_string(prefix)})" for prefix in SYSCTL_PREFIXES],
    )
    if spec.pty:
        lines += ["", "; terminal: a fresh pseudo-terminal", "(allow pseudo-tty)"]
        lines += _rule("file-read* file-write* file-ioctl", _literals(list(PTY_LITERALS)))
        lines += _rule("file-read* file-write* file-ioctl", [f'(regex #"{PTY_REGEX}")'])
    return "\n".join(lines) + "\n"
