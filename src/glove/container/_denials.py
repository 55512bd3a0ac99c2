"""Expected seccomp denials: the probes well-behaved programs make, told apart from violations.

Pure (sans-IO): the supervisor hands each refused call's name and arguments to
:func:`classify_denial` in one place and counts the answer. A refusal that matches an entry
of :data:`EXPECTED_PROBES` is counted under ``expected_denials`` (by the probe's name); every
other refusal is a violation, counted in ``denied_syscalls`` and named by ``violation``.

The list is short on purpose, and documented in ``docs/sandbox.md`` ("Expected denials"):

* ``userns_probe``: ``clone`` or ``unshare`` asking for a new user namespace. Runtimes probe
  for it at start (Chromium and Electron zygotes, bubblewrap-based sandboxes such as Codex's,
  Bun and Node tools checking for sandbox support) and fall back when it is refused. The
  refusal is kept (nested user namespaces are a large kernel surface, and ``max_user_namespaces``
  is 0 inside anyway).
* ``namespace_probe``: ``clone`` or ``unshare`` asking for any other new namespace (mount,
  pid, net, ipc, uts, cgroup) without a user namespace. Without capabilities the kernel
  would refuse it too; tools such as ``bwrap`` and ``unshare`` try it first.
* ``io_uring_probe``: ``io_uring_setup``. libuv (Node.js) and tokio-uring probe for io_uring
  and fall back to epoll and threads when it is refused.
* ``unix_datagram``: ``socket`` or ``socketpair`` asking for an ``AF_UNIX`` datagram socket.
  Such a socket names a destination path with every send, where no filter can read it, so
  none is allowed (decision 0034); glibc's ``syslog()`` and Python's ``SysLogHandler`` try
  one for ``/dev/log``, which the sandbox does not have, and carry on without it.

Not on the list, because they are allowed where harmless instead: ``socket(AF_NETLINK,
..., NETLINK_ROUTE)``. glibc's ``getaddrinfo`` (``AI_ADDRCONFIG``), ``getifaddrs`` and
Node's ``os.networkInterfaces()`` open it to list interfaces; inside the sandbox it can
only read its own network namespace (``lo``) and change nothing (no capabilities), so the
filter lets it through (see ``_seccomp``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

#: Namespace flags of ``clone``/``unshare`` (``<linux/sched.h>``).
CLONE_NEWNS: Final = 0x00020000
CLONE_NEWCGROUP: Final = 0x02000000
CLONE_NEWUTS: Final = 0x04000000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWPID: Final = 0x20000000
CLONE_NEWNET: Final = 0x40000000
NAMESPACE_FLAGS: Final = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
)

USERNS_PROBE: Final = "userns_probe"
NAMESPACE_PROBE: Final = "namespace_probe"
IO_URING_PROBE: Final = "io_uring_probe"
UNIX_DATAGRAM: Final = "unix_datagram"
#: ``socket``'s family and type for a datagram Unix socket; the type's low bits hold it.
AF_UNIX: Final = 1
SOCK_DGRAM: Final = 2
SOCK_TYPE_MASK: Final = 0xF

#: Every expected probe, with what it is (for ``docs/sandbox.md`` and the tests).
EXPECTED_PROBES: Final = {
    USERNS_PROBE: "clone/unshare with CLONE_NEWUSER (runtime sandbox-support probes)",
    NAMESPACE_PROBE: "clone/unshare with another CLONE_NEW* flag and no CLONE_NEWUSER",
    IO_URING_PROBE: "io_uring_setup (libuv and tokio probe for io_uring, then fall back)",
    UNIX_DATAGRAM: "socket/socketpair(AF_UNIX, SOCK_DGRAM) (syslog() and friends fall back)",
}

#: The syscall whose first argument holds the namespace flags.
_FLAG_SYSCALLS: Final = frozenset({"clone", "unshare"})


def classify_denial(name: str, args: Sequence[int]) -> str | None:
    """Name the expected probe a refused call is, or None when it is a violation.

    ``name`` is the syscall's name (as :func:`~glove.container.linux._seccomp.syscall_name`
    gives it) and ``args`` its raw arguments (as the seccomp notification carries them).
    """
    if name in _FLAG_SYSCALLS and args:
        flags = args[0] & 0xFFFFFFFF  # the flags are an int (unshare) or the low word (clone)
        if flags & CLONE_NEWUSER:
            return USERNS_PROBE
        if flags & NAMESPACE_FLAGS:
            return NAMESPACE_PROBE
        return None
    if name == "io_uring_setup":
        return IO_URING_PROBE
    datagram = len(args) > 1 and args[1] & SOCK_TYPE_MASK == SOCK_DGRAM
    if name in ("socket", "socketpair") and datagram and args[0] & 0xFFFFFFFF == AF_UNIX:
        return UNIX_DATAGRAM
    return None
