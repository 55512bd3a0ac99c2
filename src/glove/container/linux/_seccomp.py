"""The sandbox's seccomp filter, built once with pyseccomp and loaded as raw BPF.

The filter is compiled in the launcher (libseccomp is needed only there) and exported as
classic BPF; the sandbox's init loads the bytes with ``prctl`` just before it forks the
command, so the command and everything it starts inherit it.

Policy: default allow; a denylist of kernel surfaces a contained program has no business
touching answers EPERM (so well-behaved programs degrade rather than die); ``clone3``
answers ENOSYS so libc falls back to ``clone``, whose flags the filter can inspect; a syscall
made through another architecture's entry (``int 0x80`` on x86_64) kills the process, which
the result reports as a seccomp violation (SIGSYS). Datagram Unix sockets are refused, and
in the variant with the Unix socket gate every ``connect`` goes to the launcher, which
performs it for the caller (``_unix_gate``, decision 0034).
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import sys
import types
from typing import Any, Final, TypeAlias

from glove.container.errors import UnsupportedPlatform
from glove.container.linux import _syscalls as sc
from glove.container.linux._seccomp_packed import pack, packed_program

#: Syscalls denied outright with EPERM.
DENIED_SYSCALLS: Final = (
    # tracing and reading other processes' memory
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    # the kernel keyring
    "keyctl",
    "add_key",
    "request_key",
    # the mount family, old and new API
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "chroot",
    # namespaces
    "unshare",
    "setns",
    # kernel attack surface
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "quotactl",
    "lookup_dcookie",
    "vhangup",
    "syslog",
    "fanotify_init",
)

#: Upper bound on the exported filter (BPF programs are limited to 4096 instructions).
MAX_BPF_BYTES: Final = 4096 * 8

TIOCSTI: Final = 0x5412
TIOCLINUX: Final = 0x541C
#: Compare only the low 32 bits of an ioctl request (CVE-2019-10063: the kernel truncates).
IOCTL_REQUEST_MASK: Final = 0xFFFFFFFF

AF_UNIX: Final = 1
AF_INET: Final = 2
AF_INET6: Final = 10
#: Highest allowed socket family number (AF_INET6); the lower gaps are listed below.
MAX_ALLOWED_FAMILY: Final = AF_INET6
DENIED_LOW_FAMILIES: Final = tuple(
    family for family in range(MAX_ALLOWED_FAMILY) if family not in (AF_UNIX, AF_INET)
)
AF_NETLINK: Final = 16
#: The one netlink protocol allowed: rtnetlink, to list the sandbox's own interfaces.
NETLINK_ROUTE: Final = 0
#: Families between AF_INET6 and AF_NETLINK, all refused.
DENIED_MID_FAMILIES: Final = tuple(range(MAX_ALLOWED_FAMILY + 1, AF_NETLINK))
SOCK_DGRAM: Final = 2
SOCK_RAW: Final = 3
SOCK_TYPE_MASK: Final = 0xF
_NAMESPACE_FLAGS: Final = (
    sc.CLONE_NEWNS,
    sc.CLONE_NEWCGROUP,
    sc.CLONE_NEWUTS,
    sc.CLONE_NEWIPC,
    sc.CLONE_NEWUSER,
    sc.CLONE_NEWPID,
    sc.CLONE_NEWNET,
)

S_ISUID: Final = 0o4000
S_ISGID: Final = 0o2000
O_CREAT: Final = 0o100
O_TMPFILE: Final = 0o20200000
#: fchmodat2 (Linux 6.6) is newer than this libseccomp's syscall table: use its number.
SYS_FCHMODAT2_X86_64: Final = 452
#: (syscall, index of its mode argument, index of its flags argument or None).
_MODE_SYSCALLS: Final = (
    ("chmod", 1, None), ("fchmod", 1, None), ("fchmodat", 2, None), ("creat", 1, None),
    ("mknod", 1, None), ("mknodat", 2, None), ("open", 2, 1), ("openat", 3, 2),
)  # fmt: skip

#: The sonames pyseccomp's ``find_library`` lookups resolve to on glibc Linux.
_SONAMES: Final = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}

#: One rule: (action, syscall, conditions, optional). ``deny`` is EPERM, or a notification
#: when the filter notifies; ``enosys`` answers ENOSYS; ``notify`` always notifies. Each
#: condition is (argument index, operator name, datum, datum). An optional rule names a
#: syscall this libseccomp or architecture may not know (one that cannot be called either).
Rule: TypeAlias = tuple[str, str | int, tuple[tuple[int, str, int, int], ...], bool]

_cached_programs: dict[tuple[bool, bool], bytes] = {}
_syscall_names: dict[int, str] = {}


def _arg(index: int, op: str, datum: int, datum_b: int = 0) -> tuple[int, str, int, int]:
    return (index, op, datum, datum_b)


def _setuid_rules(deny: str) -> list[Rule]:
    """Refuse to create or chmod a file with the setuid or setgid bit.

    The workspace is a host directory: a setuid file made there by a root launcher's sandbox
    (host uid 0 inside) would be a setuid-root program on the host. ``openat2`` hides its
    mode in a struct the filter cannot read, so it answers ENOSYS and libc falls back.
    """
    calls: list[tuple[str | int, int, int | None]] = list(_MODE_SYSCALLS)
    if platform.machine() == "x86_64":
        calls.append((SYS_FCHMODAT2_X86_64, 2, None))
    rules: list[Rule] = []
    for name, mode_arg, flags_arg in calls:
        for bit in (S_ISUID, S_ISGID):
            mode = _arg(mode_arg, "MASKED_EQ", bit, bit)
            if flags_arg is None:
                rules.append((deny, name, (mode,), True))
                continue
            for create in (O_CREAT, O_TMPFILE):
                flags = _arg(flags_arg, "MASKED_EQ", create, create)
                rules.append((deny, name, (flags, mode), True))
    rules.append(("enosys", "openat2", (), False))
    return rules


def _unix_datagram_rules(deny: str) -> list[Rule]:
    """Refuse datagram Unix sockets, from ``socket`` and ``socketpair`` alike.

    A datagram socket names its destination with every ``sendto``/``sendmsg`` (a
    socketpair's too), in memory the filter cannot read: any of them could address a host
    socket by path. With none in the sandbox, ``connect`` is the only call that resolves a
    socket path, and the gate (``_unix_gate``) performs every one (decision 0034).
    """
    return [
        (
            deny,
            call,
            (_arg(0, "EQ", AF_UNIX), _arg(1, "MASKED_EQ", SOCK_TYPE_MASK, SOCK_DGRAM)),
            False,
        )
        for call in ("socket", "socketpair")
    ]


def filter_rules(*, gate: bool = False) -> tuple[Rule, ...]:
    """The filter's rules, in the order they are added (cheap: no libseccomp)."""
    deny = "deny"
    rules: list[Rule] = [(deny, name, (), True) for name in dict.fromkeys(DENIED_SYSCALLS)]
    rules.append(("enosys", "clone3", (), False))
    rules += [(deny, "clone", (_arg(0, "MASKED_EQ", f, f),), False) for f in _NAMESPACE_FLAGS]
    for request in (TIOCSTI, TIOCLINUX):
        rules.append((deny, "ioctl", (_arg(1, "MASKED_EQ", IOCTL_REQUEST_MASK, request),), False))
    # Socket families: an allowlist of AF_UNIX, AF_INET and AF_INET6, plus netlink's
    # NETLINK_ROUTE for socket(). Everything else is refused: other netlink protocols and
    # packet sockets reach kernel surfaces, and AF_VSOCK is not isolated by the network
    # namespace at all (it reaches the hypervisor host on a VM). NETLINK_ROUTE is harmless
    # here: it reads the sandbox's own network namespace (only `lo`), and changing anything
    # needs CAP_NET_ADMIN, which nothing inside has; glibc's getaddrinfo (AI_ADDRCONFIG),
    # getifaddrs and Node's os.networkInterfaces() open it (see _denials).
    for call in ("socket", "socketpair"):
        rules.append((deny, call, (_arg(0, "GT", AF_NETLINK),), False))
        for family in (*DENIED_LOW_FAMILIES, *DENIED_MID_FAMILIES):
            rules.append((deny, call, (_arg(0, "EQ", family),), False))
    rules.append((deny, "socketpair", (_arg(0, "EQ", AF_NETLINK),), False))
    rules.append((deny, "socket", (_arg(0, "EQ", AF_NETLINK), _arg(2, "NE", NETLINK_ROUTE)), False))
    for family in (AF_INET, AF_INET6):  # no raw IP sockets
        rules.append(
            (
                deny,
                "socket",
                (_arg(0, "EQ", family), _arg(1, "MASKED_EQ", SOCK_TYPE_MASK, SOCK_RAW)),
                False,
            )
        )
    rules += _setuid_rules(deny)
    rules += _unix_datagram_rules(deny)
    if gate:
        # Every connect is performed by the launcher on the caller's behalf (_unix_gate).
        rules.append(("notify", "connect", (), False))
    return tuple(rules)


def _pyseccomp() -> Any:
    """Import pyseccomp, with libc and libseccomp loaded by their sonames if it can be.

    Raises:
        UnsupportedPlatform: pyseccomp or libseccomp cannot be loaded.
    """
    threads = sys.modules.get("threading")
    alone = threads is None or threads.active_count() == 1  # the stand-in is process-wide
    if "pyseccomp" not in sys.modules and alone:
        with contextlib.suppress(ImportError, OSError, RuntimeError):
            _import_by_soname()  # else pyseccomp's own lookup, below
    try:
        import pyseccomp
    except (ImportError, OSError, RuntimeError) as exc:  # RuntimeError: libseccomp not found
        raise UnsupportedPlatform(f"pyseccomp / libseccomp is not usable: {exc}") from exc
    return pyseccomp


def _import_by_soname() -> None:
    """Import pyseccomp with ``ctypes.util.find_library`` answering from :data:`_SONAMES`.

    pyseccomp looks libc and libseccomp up with ``find_library`` as it is imported, which
    runs ``ldconfig -p`` twice, and ``ctypes.util`` itself imports ``subprocess`` and
    ``tempfile``, which nothing else in ``glove exec`` needs. The sonames are fixed by the
    libraries' ABI, so while pyseccomp is imported ``ctypes.util`` is a stand-in (or, if it
    is loaded already, its ``find_library``) that names them; it is removed (restored)
    right after. A soname that does not load fails the import, and the caller imports
    pyseccomp again with the real lookup. The swap is seen by every thread, so the caller
    makes it only while the process has one (gloved's first import runs beside its
    executor threads: there pyseccomp looks the libraries up itself).
    """
    import ctypes

    package: Any = ctypes
    loaded: Any = sys.modules.get("ctypes.util")
    if loaded is not None:
        lookup = loaded.find_library
        loaded.find_library = _SONAMES.get
        try:
            import pyseccomp
        finally:
            loaded.find_library = lookup
        return
    stand_in: Any = types.ModuleType("ctypes.util")
    stand_in.find_library = _SONAMES.get
    sys.modules["ctypes.util"] = stand_in
    package.util = stand_in
    try:
        import pyseccomp  # noqa: F401 - kept in sys.modules for _pyseccomp
    finally:
        del sys.modules["ctypes.util"]
        del package.util


def compile_program(notify: bool, gate: bool) -> bytes:
    """Compile the filter with libseccomp (pyseccomp) and export it as classic BPF."""
    seccomp = _pyseccomp()
    # notify: every denial goes to the launcher, which answers EPERM and records the call.
    actions = {
        "deny": seccomp.NOTIFY if notify else seccomp.ERRNO(errno.EPERM),
        "enosys": seccomp.ERRNO(errno.ENOSYS),
        "notify": seccomp.NOTIFY,
    }
    filt = seccomp.SyscallFilter(seccomp.ALLOW)
    filt.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    for action, call, conditions, optional in filter_rules(gate=gate):
        args = [seccomp.Arg(i, getattr(seccomp, op), a, b) for i, op, a, b in conditions]
        try:
            filt.add_rule(actions[action], call, *args)
        except (ValueError, OSError, RuntimeError):
            if not optional:
                raise
            # A syscall unknown to this libseccomp/arch cannot be called either.
    fd = os.memfd_create("glove-seccomp", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "rb") as handle:
            filt.export_bpf(handle)
        return os.pread(fd, MAX_BPF_BYTES, 0)
    finally:
        os.close(fd)


def seccomp_program(*, notify: bool = False, gate: bool = False) -> bytes:
    """Return the filter as classic BPF bytes, compiling it on first use.

    With ``notify`` every denial is a user notification (the launcher answers EPERM and
    records the call) instead of a plain EPERM from the kernel. With ``gate`` (which needs
    ``notify``) every ``connect`` is a notification too, for the Unix socket gate.

    Raises:
        UnsupportedPlatform: libseccomp cannot be loaded or rejects the rules.
    """
    key = (notify, gate and notify)
    program = _cached_programs.get(key)
    if program is None:
        try:
            program = packed_program(*key, filter_rules(gate=key[1]), MAX_BPF_BYTES)
            if program is None:
                program = compile_program(*key)
        except OSError as exc:
            raise UnsupportedPlatform(f"cannot build the seccomp filter: {exc}") from exc
        _cached_programs[key] = program
    return program


def pack_seccomp_programs() -> bytes:
    """Compile every variant of the filter and return the packed file's bytes (written to
    ``seccomp-programs.json`` when the rules change; a test checks it is current).

    Raises:
        UnsupportedPlatform: libseccomp cannot be loaded or rejects the rules.
    """
    variants = ((False, False), (True, False), (True, True))
    try:
        return pack({key: (filter_rules(gate=key[1]), compile_program(*key)) for key in variants})
    except OSError as exc:
        raise UnsupportedPlatform(f"cannot build the seccomp filter: {exc}") from exc


def syscall_name(number: int) -> str:
    """Name a native syscall number (for violation reports); the number if unknown."""
    name = _syscall_names.get(number)
    if name is None:
        try:
            seccomp = _pyseccomp()
            resolved = seccomp.resolve_syscall(seccomp.system_arch(), number)
            name = resolved.decode() if isinstance(resolved, bytes) else str(resolved)
        except (UnsupportedPlatform, OSError, ValueError, RuntimeError):
            name = str(number)
        _syscall_names[number] = name
    return name
