"""The Unix socket gate: a sandboxed ``connect()`` never reaches a host socket.

A pathname Unix socket is found by its inode, in any network namespace: a host service
listening on a socket inside a directory the sandbox sees (an exposure, the workspace, a
``--bind``) would be reachable from a sandbox whose network is ``none``. Landlock on this
kernel (ABI 7) has no right for it (``LANDLOCK_ACCESS_FS_RESOLVE_UNIX`` is ABI 9, Linux
7.1), and mount options have none either (decision 0034). So every ``connect()`` of the
sandbox is a seccomp user notification, and the launcher performs it *on the caller's
behalf*; the caller's own call never runs, so nothing it changes in its memory or its
descriptor table after the check can matter::

    sandbox thread: connect(fd, addr, len) --- notify ---> supervisor: dup the listener,
                                                           queue the job (never blocks)
    gate worker (a thread of the launcher):
      copy addr (process_vm_readv, at most 128 bytes: what the kernel itself accepts)
      pidfd_open(tid, PIDFD_THREAD), SECCOMP_IOCTL_NOTIF_ID_VALID: still the caller
      pidfd_getfd(fd): the caller's very socket (the same open file description)
      an AF_UNIX pathname: resolve it as the caller would, from its root
        (openat2(/proc/TID/root, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), a relative
        path from its working directory), pinned O_PATH; it must be a socket on the
        sandbox's own root filesystem (its /tmp, /dev/shm), else EACCES, counted
        and the address becomes /proc/self/fd/PIN: the inode checked is the one connected
      connect(the socket, our copy of the address); answer the caller with its result

Abstract names, socket pairs and IP sockets are connected the same way, unchanged: an
abstract name is looked up in the socket's own network namespace (the sandbox's), and IP
routing is the socket's too. A socket on a bind (even one a sandboxed process made) is
refused; a magic link (``/proc/self/fd/N``, ``/dev/fd/N``) is refused. Datagram Unix
sockets, which can address a path with every ``sendmsg``, are refused at creation by the
filter itself (``_seccomp``), so ``connect`` is the only call that resolves a socket path.

Workers are threads of the launcher with every signal blocked; a blocking ``connect``
blocks a worker, never the supervisor's loop. The filter is loaded with
``SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`` where the kernel has it, so a signal does not
restart a call that is being performed for the caller.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import queue
import signal
import socket
import stat
import struct
import threading
from collections.abc import Sequence
from typing import Final, NamedTuple

from glove.container._socket_gate import MECH_SECCOMP_CONNECT, GateSupport
from glove.container.linux import _syscalls as sc

#: Largest address the kernel accepts (``sizeof(struct sockaddr_storage)``).
MAX_SOCKADDR_BYTES: Final = 128
#: Worker threads per sandbox (each blocking ``connect`` holds one until it returns).
GATE_WORKERS: Final = 4

SECCOMP_GET_ACTION_AVAIL: Final = 2
SECCOMP_RET_USER_NOTIF: Final = 0x7FC00000
#: ``_IOW('!', 2, __u64)``.
SECCOMP_IOCTL_NOTIF_ID_VALID: Final = 0x40082102
#: ``pidfd_open`` flag for a thread (Linux 6.9); the value of O_EXCL.
PIDFD_THREAD: Final = os.O_EXCL
SYS_PIDFD_GETFD: Final = 438
SYS_LANDLOCK_CREATE_RULESET: Final = 444
LANDLOCK_CREATE_RULESET_VERSION: Final = 1
SO_DOMAIN: Final = 39
AF_UNIX: Final = socket.AF_UNIX
_RESOLVE_AS_CALLER: Final = sc.RESOLVE_IN_ROOT | sc.RESOLVE_NO_MAGICLINKS
_SUN_PATH_OFFSET: Final = 2

# connect() may block for as long as the peer takes: this library handle releases the GIL
# (the ``_syscalls`` one is a PyDLL and holds it).
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.connect.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
_libc.process_vm_readv.restype = ctypes.c_ssize_t


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is off or absent."""
    result = int(
        _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    )
    return max(result, 0)


def _user_notification_available() -> str | None:
    action = ctypes.c_uint32(SECCOMP_RET_USER_NOTIF)
    number = sc.syscall_number("seccomp")
    if _libc.syscall(number, SECCOMP_GET_ACTION_AVAIL, 0, ctypes.byref(action)) != 0:
        return f"seccomp user notification is unavailable: {os.strerror(ctypes.get_errno())}"
    return None


def _fd_taking_available() -> str | None:
    """pidfd_getfd and process_vm_readv, tried on this process itself."""
    pidfd = os.pidfd_open(os.getpid())
    try:
        taken = int(_libc.syscall(SYS_PIDFD_GETFD, pidfd, pidfd, 0))
        if taken < 0:
            return f"pidfd_getfd is unavailable: {os.strerror(ctypes.get_errno())}"
        os.close(taken)
    finally:
        os.close(pidfd)
    source = ctypes.create_string_buffer(b"glove", 5)
    try:
        _read_memory(os.getpid(), ctypes.addressof(source), 5)
    except OSError as exc:
        return f"process_vm_readv is unavailable: {exc.strerror}"
    return None


@functools.cache
def probe_unix_gate() -> GateSupport:
    """Whether this launcher can gate ``connect()`` (cached: the kernel does not change).

    Every part is tried for real: the user-notification action, ``pidfd_getfd`` and
    ``process_vm_readv`` (on this process), and ``openat2``.
    """
    abi = landlock_abi()
    try:
        reason = _user_notification_available() or _fd_taking_available()
        if reason is None:
            with contextlib.suppress(FileNotFoundError):
                os.close(sc.openat2("/", os.O_PATH | os.O_CLOEXEC, _RESOLVE_AS_CALLER))
    except OSError as exc:
        reason = f"a part of the gate is unavailable: {exc.strerror or exc}"
    if reason is not None:
        return GateSupport(None, reason, abi)
    return GateSupport(
        MECH_SECCOMP_CONNECT,
        "every connect() is performed by the launcher, after it resolved the address in the "
        "caller's view: only a socket on the sandbox's own root filesystem is reachable",
        abi,
    )


def _read_memory(pid: int, address: int, length: int) -> bytes:
    """``length`` bytes of process ``pid`` at ``address``.

    Raises:
        OSError: EFAULT (unmapped), ESRCH (gone), EPERM.
    """
    buffer = ctypes.create_string_buffer(length)
    local = _IoVec(ctypes.addressof(buffer), length)
    remote = _IoVec(address, length)
    got = int(_libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    if got < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    if got != length:
        raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))
    return buffer.raw


def _id_valid(listener: int, ident: int) -> bool:
    try:
        fcntl.ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, struct.pack("=Q", ident))
    except OSError:
        return False
    return True


def _thread_pidfd(tid: int) -> int:
    """A pidfd of thread ``tid`` (its own descriptor table), or of its process where the
    kernel predates PIDFD_THREAD and ``tid`` is the leader.

    Raises:
        OSError: ESRCH when it is gone.
    """
    try:
        return os.pidfd_open(tid, PIDFD_THREAD)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        return os.pidfd_open(tid)


def _take_fd(pidfd: int, fd: int) -> int:
    result = int(_libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _domain(fd: int) -> int:
    """The socket's family (``SO_DOMAIN``).

    Raises:
        OSError: ENOTSOCK for anything but a socket.
    """
    value = ctypes.c_int(0)
    size = ctypes.c_uint(ctypes.sizeof(value))
    if _libc.getsockopt(fd, socket.SOL_SOCKET, SO_DOMAIN, ctypes.byref(value), ctypes.byref(size)):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return value.value


def is_unix_datagram(fd: int) -> bool:
    """Whether ``fd`` is an ``AF_UNIX`` datagram socket: one that can name any socket path
    as the destination of each send, which the gate cannot see (so none enters a sandbox)."""
    try:
        if _domain(fd) != AF_UNIX:
            return False
        with socket.socket(fileno=os.dup(fd)) as sock:
            return sock.type == socket.SOCK_DGRAM
    except OSError:
        return False


def unix_path(address: bytes) -> bytes | None:
    """The filesystem path an ``AF_UNIX`` address names, or None (abstract, autobind, or
    another family: nothing on a filesystem is looked up for those).

    The kernel reads ``sun_path`` up to its first NUL or the address's end.
    """
    if len(address) <= _SUN_PATH_OFFSET:
        return None
    (family,) = struct.unpack_from("=H", address)
    if family != AF_UNIX or address[_SUN_PATH_OFFSET] == 0:
        return None
    return address[_SUN_PATH_OFFSET:].split(b"\0", 1)[0]


class _Caller(NamedTuple):
    """The caller's view, opened before its notification was checked still valid."""

    root: int  # an O_PATH descriptor of its root directory
    cwd: bytes  # its working directory as it sees it (b"" when not needed)


def _open_caller(tid: int, path: bytes | None) -> _Caller:
    """Open what resolving ``path`` as ``tid`` needs (before the validity check, so that a
    valid notification proves these were the caller's and not a recycled tid's).

    Raises:
        OSError: the caller is gone, or its /proc entry cannot be read.
    """
    root = os.open(f"/proc/{tid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        cwd = b""
        if path is not None and not path.startswith(b"/"):
            # bytes in, bytes out, as seen from the caller's own root (pathlib decodes)
            cwd = os.readlink(f"/proc/{tid}/cwd".encode())  # noqa: PTH115
    except BaseException:
        os.close(root)
        raise
    return _Caller(root, cwd)


def _absolute(caller: _Caller, path: bytes) -> bytes:
    """``path`` made absolute from the caller's working directory, as the kernel would."""
    if path.startswith(b"/"):
        return path
    if not caller.cwd.startswith(b"/"):
        raise PermissionError(errno.EACCES, "the caller's working directory is not reachable")
    return caller.cwd.rstrip(b"/") + b"/" + path


def pin_own_socket(caller: _Caller, path: bytes) -> int:
    """Resolve ``path`` as the caller would and return an O_PATH pin of the socket it
    names, provided that socket lies on the sandbox's own root filesystem.

    Raises:
        PermissionError: the socket is on another filesystem (a bind: the host's), or the
            path goes through a magic link.
        OSError: what the kernel would answer (ENOENT, ECONNREFUSED for a non-socket...).
    """
    try:
        pin = sc.openat2(
            os.fsdecode(_absolute(caller, path)),
            os.O_PATH | os.O_CLOEXEC,
            _RESOLVE_AS_CALLER,
            dir_fd=caller.root,
        )
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            raise PermissionError(errno.EACCES, "a magic link on the way") from exc
        raise
    try:
        _check_own_socket(pin, caller.root)
    except BaseException:
        os.close(pin)
        raise
    return pin


def _check_own_socket(pin: int, root: int) -> None:
    """Raises: OSError ECONNREFUSED for a non-socket (as the kernel answers), or
    PermissionError for a socket on another filesystem than the caller's root."""
    info = os.fstat(pin)
    if not stat.S_ISSOCK(info.st_mode):
        raise OSError(errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED))
    if info.st_dev != os.fstat(root).st_dev:
        raise PermissionError(errno.EACCES, "a socket outside the sandbox's own files")


def _pinned_address(pin: int) -> bytes:
    return struct.pack("=H", AF_UNIX) + f"/proc/self/fd/{pin}".encode() + b"\0"


class Outcome(NamedTuple):
    """What one gated ``connect`` answers: an errno (0: success) and whether it was a
    refusal of a socket outside the sandbox."""

    error: int
    refused: bool


def connect_on_behalf(  # noqa: PLR0911 - each early answer is one way the call can end
    listener: int, ident: int, tid: int, args: Sequence[int]
) -> Outcome | None:
    """Perform notification ``ident``'s ``connect(fd, addr, len)`` for thread ``tid``.

    None when the caller is gone (nothing to answer).
    """
    fd = ctypes.c_int32(args[0] & 0xFFFFFFFF).value
    length = ctypes.c_int32(args[2] & 0xFFFFFFFF).value
    if not 0 <= length <= MAX_SOCKADDR_BYTES:
        return Outcome(errno.EINVAL, refused=False)
    try:
        address = _read_memory(tid, args[1], length) if length else b""
    except OSError as exc:
        return Outcome(exc.errno or errno.EFAULT, refused=False)
    path = unix_path(address)
    try:
        pidfd = _thread_pidfd(tid)
    except OSError:
        return None  # gone
    caller: _Caller | None = None
    try:
        if path is not None:  # only a path is resolved in the caller's view
            with contextlib.suppress(OSError):
                caller = _open_caller(tid, path)
        if not _id_valid(listener, ident):
            return None  # the caller died; tid may already name another task
        if path is not None and caller is None:
            return Outcome(errno.EACCES, refused=True)
        try:
            sock = _take_fd(pidfd, fd)
        except OSError as exc:
            return Outcome(exc.errno or errno.EBADF, refused=False)
        try:
            return _connect(sock, address, path, caller)
        finally:
            os.close(sock)
    finally:
        os.close(pidfd)
        if caller is not None:
            os.close(caller.root)


def _connect(sock: int, address: bytes, path: bytes | None, caller: _Caller | None) -> Outcome:
    pin = -1
    try:
        if path is not None and caller is not None and _domain(sock) == AF_UNIX:
            pin = pin_own_socket(caller, path)
            address = _pinned_address(pin)
        if _libc.connect(sock, address, len(address)) != 0:
            return Outcome(ctypes.get_errno(), refused=False)
        return Outcome(0, refused=False)
    except PermissionError:
        return Outcome(errno.EACCES, refused=True)
    except OSError as exc:
        return Outcome(exc.errno or errno.EACCES, refused=False)
    finally:
        if pin >= 0:
            os.close(pin)


class _Job(NamedTuple):
    ident: int
    tid: int
    args: tuple[int, ...]


class ConnectGate:
    """One sandbox's gate: its workers and the connects it refused (thread-safe).

    It holds one duplicate of the listener, its own, closed once the last worker is done
    after :meth:`close` (so a worker never answers on a descriptor number reused since).
    Workers start on demand, one per job in flight up to ``workers``; a queued job holds no
    descriptor, so a sandbox with every thread in ``connect`` costs memory, not descriptors.
    """

    def __init__(self, workers: int = GATE_WORKERS) -> None:
        """Nothing starts until the first :meth:`submit`."""
        self._workers = workers
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._refused: list[tuple[int, ...]] = []
        self._listener = -1
        self._closed = False

    def submit(self, listener: int, ident: int, tid: int, args: Sequence[int]) -> None:
        """Queue notification ``ident`` of ``listener`` (a ``connect``): a worker performs
        and answers it.

        Raises:
            OSError: the listener could not be duplicated (the first time).
        """
        with self._lock:
            if self._closed:
                return  # torn down: the caller gets ENOSYS once the listener is closed
            if self._listener < 0:
                self._listener = os.dup(listener)
            self._in_flight += 1
            if self._in_flight > self._threads and self._threads < self._workers:
                worker = threading.Thread(target=self._work, name="glove-unix-gate", daemon=True)
                self._threads += 1
                worker.start()
            self._jobs.put(_Job(ident, tid, tuple(args)))

    def take_refused(self) -> list[tuple[int, ...]]:
        """The arguments of every connect refused since the last call."""
        with self._lock:
            refused, self._refused = self._refused, []
        return refused

    def close(self) -> None:
        """Stop the workers (each after its current job); a job still queued is dropped
        unanswered (its caller gets ENOSYS once the listener's last descriptor is closed)."""
        with self._lock:
            self._closed = True
            for _ in range(self._threads):
                self._jobs.put(None)
            self._release_if_idle()

    def _release_if_idle(self) -> None:
        """Close our listener once closed and no worker is left (the lock is held)."""
        if self._closed and self._threads == 0 and self._listener >= 0:
            os.close(self._listener)
            self._listener = -1

    def _work(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            while (job := self._jobs.get()) is not None:
                try:
                    if not self._closed:
                        self._serve(job)
                finally:
                    with self._lock:
                        self._in_flight -= 1
        finally:
            with self._lock:
                self._threads -= 1
                self._release_if_idle()

    def _serve(self, job: _Job) -> None:
        outcome = connect_on_behalf(self._listener, job.ident, job.tid, job.args)
        if outcome is None:
            return
        sc.answer_notification(self._listener, job.ident, outcome.error)
        if outcome.refused:
            with self._lock:
                self._refused.append(job.args)
