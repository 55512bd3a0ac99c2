"""The descriptors a supervisor watches, and what it does when each is ready.

Both supervisors (blocking, :mod:`._supervise`; asyncio, :mod:`._async`) wire the command's
standard streams the same way and service the same descriptors: the init's pidfd, its
status pipe, the seccomp listener it sends over the notify channel, and the output pipes or
PTY master. These are the I/O steps they share; each supervisor only decides *when*.
They also share what a ``ready`` report changes (:func:`note_status`), the task count
behind the ``rlimit-nproc-userns`` pids watchdog (:func:`count_tasks`,
:func:`nproc_reached`), and how the actions of the monitor core
(:mod:`glove.container._monitor`) are carried out on a :class:`SandboxProcess`
(:func:`carry_out`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import stat
from typing import Final, Literal

import msgspec

from glove.container._monitor import (
    SINK_WRITE_BYTES,
    STATUS_READ_BYTES,
    Action,
    GroupFacts,
    Kill,
    Monitor,
    PollLimits,
)
from glove.container._spec import SandboxSpec
from glove.container._status import Ready, StatusMessage
from glove.container.linux import _syscalls as sc
from glove.container.linux._launch import SandboxProcess
from glove.container.linux._seccomp import syscall_name
from glove.container.linux._unix_gate import ConnectGate, is_unix_datagram

#: Bytes read from a pipe or the PTY per call.
READ_CHUNK_BYTES: Final = 64 * 1024
#: Where the launcher reads every process's ``stat`` (its own, host-side procfs).
PROC_ROOT: Final = "/proc"
#: Bytes read of one ``/proc/<pid>/stat`` (one line: comm is at most 64 bytes, then numbers).
STAT_READ_BYTES: Final = 4096
#: What :func:`host_tasks` says when ``/proc/loadavg`` cannot be read: above any limit.
UNKNOWN_HOST_TASKS: Final = 2**62
#: Index of ``ppid`` and ``num_threads`` among the ``stat`` fields after ``comm``'s ")".
_STAT_PPID: Final = 1
_STAT_THREADS: Final = 17

Stream = Literal["stdout", "stderr", "pty"]


def stdin_passes_directly(stdin: int) -> bool:
    """Whether the host stdin can be handed to the command as is.

    Only a pipe or a socket: a terminal, a file or a device could be reopened for writing
    through ``/proc/self/fd/0`` (or written to directly, for a terminal opened read-write),
    which would bypass the output limit and reach the host file. Those are pumped, and so
    is a datagram Unix socket (each of its sends may name any socket path: decision 0034).
    """
    try:
        mode = os.fstat(stdin).st_mode
    except OSError:
        return False
    if stat.S_ISSOCK(mode):
        return not is_unix_datagram(stdin)
    return stat.S_ISFIFO(mode)


class Wiring(msgspec.Struct):
    """The command's standard streams, as created for one sandbox.

    Attributes:
        child: the fds the command gets as 0, 1 and 2.
        child_ends: ours to close once the sandbox has started.
        outputs: read ends (or the PTY master) to drain, and which stream each is.
        stdin_target: where host stdin is pumped (a pipe's write end or a dup of the PTY
            master), or None when stdin is handed over directly.
        close_target_at_eof: close the target when host stdin ends (pipes, not a PTY).
        master: the PTY master, in PTY mode.
    """

    child: tuple[int, int, int]
    child_ends: list[int] = msgspec.field(default_factory=list)
    outputs: dict[int, Stream] = msgspec.field(default_factory=dict)
    stdin_target: int | None = None
    close_target_at_eof: bool = False
    master: int | None = None

    def close_child_ends(self) -> None:
        """Close our copies of the command's ends (idempotent)."""
        for fd in self.child_ends:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.child_ends = []

    def close(self) -> None:
        """Close everything still open (idempotent)."""
        self.close_child_ends()
        for fd in [*self.outputs, *([self.stdin_target] if self.stdin_target is not None else [])]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.outputs = {}
        self.stdin_target = None
        self.master = None  # closed with the outputs: its number may name another file now


def wire_stdio(spec: SandboxSpec, stdin: int | None, winsize_from: int | None = None) -> Wiring:
    """Create the pipes for one sandbox (in PTY mode, nothing yet: see :func:`adopt_terminal`).

    ``stdin`` is the host fd to give the command, or None for an empty stdin (it reads
    end of file at once).

    Raises:
        OSError: no pipe could be made.
    """
    del winsize_from  # the launch sizes the sandbox's own terminal
    if spec.pty:
        return Wiring(child=(-1, -1, -1))  # the init makes the terminal in its own devpts
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    wiring = Wiring(child=(-1, out_w, err_w), child_ends=[out_w, err_w])
    wiring.outputs = {out_r: "stdout", err_r: "stderr"}
    if stdin is not None and stdin_passes_directly(stdin):
        wiring.child = (stdin, out_w, err_w)
        return wiring
    in_r, in_w = os.pipe2(os.O_CLOEXEC)
    wiring.child = (in_r, out_w, err_w)
    wiring.child_ends.append(in_r)
    if stdin is None:
        os.close(in_w)  # an empty stdin: the command reads end of file at once
    else:
        os.set_blocking(in_w, False)
        wiring.stdin_target = in_w
        wiring.close_target_at_eof = True
    return wiring


def adopt_terminal(wiring: Wiring, process: SandboxProcess, *, pump_stdin: bool) -> None:
    """PTY mode: take the master the sandbox's init made and sent (``process.pty_master``).

    It becomes the one output (``"pty"``) and, when host stdin is pumped, a dup of it the
    target. Nothing happens when the setup failed before the terminal existed (the status
    pipe says why).
    """
    master = process.pty_master
    process.pty_master = -1  # ours now: closed with the outputs
    if master < 0:
        return
    wiring.outputs = {master: "pty"}
    wiring.master = master
    if pump_stdin:
        pump = os.dup(master)
        os.set_blocking(pump, False)
        wiring.stdin_target = pump


def note_status(process: SandboxProcess, messages: list[StatusMessage]) -> None:
    """Act on what the init reported, beyond keeping it for the verdict: its ``ready``
    line's setup CPU is left out of the tree's ``cpu_time`` budget (Glove's own work
    inside the sandbox's groups, before the command existed). Only the first ``ready``
    counts, and never for more than the group has used when it is read."""
    cgroups = process.cgroups
    if cgroups is None or cgroups.setup_reported:
        return
    for message in messages:
        if isinstance(message, Ready):
            cgroups.setup_reported = True
            cgroups.setup_cpu_s = min(message.setup_cpu_s, cgroups.cpu_seconds())
            return


def read_output(fd: int) -> bytes | None:
    """One chunk from an output fd; b"" at end of stream; None when nothing is ready.

    Raises:
        OSError: a read error other than the PTY's EIO (its other side closed: end).
    """
    try:
        return os.read(fd, READ_CHUNK_BYTES)
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno == errno.EIO:  # PTY: the sandbox side is closed
            return b""
        raise


def write_pending(sink: int, pending: bytearray) -> bool | None:
    """Write the head of ``pending`` (at most :data:`SINK_WRITE_BYTES`, so a pipe write never
    blocks) to the writable ``sink`` and drop what was written.

    Returns None when the sink would block after all, False when its reader went away (then
    everything pending is dropped: nobody will read it), True otherwise.
    """
    try:
        written = os.write(sink, pending[:SINK_WRITE_BYTES])
    except BlockingIOError:
        return None
    except OSError:
        pending.clear()
        return False
    del pending[:written]
    return True


def receive_listener(channel: int) -> int | None:
    """Take the seccomp listener the init sends once; None when it sent none (EOF)."""
    with socket.socket(fileno=os.dup(channel)) as chan:
        try:
            _, fds, _, _ = socket.recv_fds(chan, 16, 1)
        except OSError:
            return None
    for extra in fds[1:]:
        os.close(extra)
    return fds[0] if fds else None


def _hung_up(fd: int) -> bool:
    """``fd`` reports POLLHUP and nothing to read: a seccomp listener whose filter has no
    users left (the command and all it started have exited). It stays "ready" for good, so
    a shell that kept watching it would wake for it again and again until the run ends."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    revents = sum(events for _, events in poller.poll(0))
    return bool(revents & select.POLLHUP) and not revents & select.POLLIN


class ListenerGone(Exception):
    """The filter has no users left: stop watching its listener."""


def answer_denial(
    listener: int, gate: ConnectGate | None = None
) -> tuple[str, tuple[int, ...]] | None:
    """Answer one pending seccomp notification with EPERM; return the syscall's name and
    its arguments (to tell an expected probe from a violation).

    A ``connect`` (the filter sends every one when the sandbox has the Unix socket gate) is
    handed to ``gate``, whose worker performs and answers it; without a gate it is refused.
    A denied call blocks until answered, so this must run whenever the listener is
    readable: nobody reading the notify fd would stall the sandbox.

    Raises:
        ListenerGone: no process uses the filter any more (the listener hung up): the
            caller stops watching it at once.
    """
    try:
        notification = sc.receive_notification(listener)
    except OSError as exc:
        raise ListenerGone(str(exc)) from exc
    if notification is None:
        if _hung_up(listener):
            raise ListenerGone("the filter has no users left")
        return None
    ident, pid, number, args = notification
    if gate is not None and number == sc.syscall_number("connect"):
        try:
            gate.submit(listener, ident, pid, args)
        except OSError:
            sc.answer_notification(listener, ident, errno.EAGAIN)  # no descriptor to spare
        return None
    sc.answer_notification(listener, ident, errno.EPERM)
    return syscall_name(number), tuple(args)


def _parents_and_threads(proc: str) -> dict[int, tuple[int, int]]:
    """``{pid: (ppid, threads)}`` for every process visible in ``proc`` (one read each)."""
    table: dict[int, tuple[int, int]] = {}
    with os.scandir(proc) as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                fd = os.open(f"{proc}/{entry.name}/stat", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue  # exited since the listing
            try:
                raw = os.read(fd, STAT_READ_BYTES)
            except OSError:
                continue
            finally:
                os.close(fd)
            fields = raw.rpartition(b")")[2].split()  # comm may hold spaces and ")"
            try:
                table[int(entry.name)] = (int(fields[_STAT_PPID]), int(fields[_STAT_THREADS]))
            except (IndexError, ValueError):
                continue
    return table


def count_tasks(root: int, proc: str = PROC_ROOT) -> int:
    """Tasks (threads included, zombies too) in the process tree rooted at host pid ``root``.

    This is what RLIMIT_NPROC counts for a sandbox: every task of its uid in its user
    namespace, i.e. the init (or the fork path's reaper) and all its descendants; orphans
    are re-parented to the init of the pid namespace, so none leaves the tree. The kernel
    has no per-namespace count and this host's procfs has no ``children`` files, so it is
    one snapshot of ``/proc/*/stat`` (ppid, ``num_threads``): a task whose parent exits
    during the scan may be missed (counted at the next poll), none is counted twice.
    """
    table = _parents_and_threads(proc)
    if root not in table:
        return 0
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, pending, seen = 0, [root], {root}
    while pending:
        pid = pending.pop()
        total += max(1, table[pid][1])
        for child in children.get(pid, ()):
            if child not in seen:
                seen.add(child)
                pending.append(child)
    return total


def nproc_reached(process: SandboxProcess) -> bool:
    """Whether the sandbox's tree is at its RLIMIT_NPROC (the ``rlimit-nproc-userns`` pids
    limit): the kernel refuses the next fork, so the supervisor kills the tree for ``pids``.

    False when that is not the pids mechanism. Below the limit, never true.
    """
    limit = process.nproc_limit
    if limit is None or host_tasks() < limit:
        return False  # one read: the whole host has fewer tasks than the limit
    return count_tasks(process.pid) >= limit


def host_tasks(proc: str = PROC_ROOT) -> int:
    """Every task on the host (``/proc/loadavg``'s total, zombies included), an upper bound
    on any tree's count; a very large number when it cannot be read (then the tree is
    counted)."""
    try:
        fd = os.open(f"{proc}/loadavg", os.O_RDONLY | os.O_CLOEXEC)
        try:
            raw = os.read(fd, STAT_READ_BYTES)
        finally:
            os.close(fd)
        return int(raw.split()[3].partition(b"/")[2])
    except (OSError, IndexError, ValueError):
        return UNKNOWN_HOST_TASKS


def reached_limit(process: SandboxProcess) -> str | None:
    """The limit the sandbox's groups say is reached (memory OOM, a refused fork, the tree's
    CPU time), else ``pids`` when the tree is at its RLIMIT_NPROC (the next fork fails)."""
    reached = process.cgroups.reached() if process.cgroups is not None else None
    if reached is None and nproc_reached(process):
        reached = "pids"
    return reached


def carry_out(monitor: Monitor, process: SandboxProcess, actions: list[Action]) -> bool:
    """Do what the monitor asked (kill the tree, poll the limits); True when one of the
    actions is :class:`~glove.container._monitor.Finish` (the shell's to do)."""
    finish = False
    for action in actions:
        if isinstance(action, Kill):
            process.kill()
        elif isinstance(action, PollLimits):
            reached = reached_limit(process)
            if reached is not None:
                finish |= carry_out(monitor, process, monitor.limit_reached(reached))
        else:
            finish = True
    return finish


def read_status(monitor: Monitor, process: SandboxProcess, fd: int) -> tuple[bool, list[Action]]:
    """Read the status pipe once into the monitor; (False at its end, the actions)."""
    try:
        chunk = os.read(fd, STATUS_READ_BYTES)
    except BlockingIOError:
        return True, []
    except OSError:
        chunk = b""
    messages, actions = monitor.status_bytes(chunk) if chunk else monitor.status_closed()
    note_status(process, messages)
    return bool(chunk), actions


def drain_status(monitor: Monitor, process: SandboxProcess) -> None:
    """At the end: what is left in the status pipe, without waiting."""
    with contextlib.suppress(OSError):
        while chunk := os.read(process.status_fd, STATUS_READ_BYTES):
            monitor.status_bytes(chunk)
    monitor.status_closed()


def group_facts(process: SandboxProcess) -> GroupFacts | None:
    """What the sandbox's cgroups recorded, read at the end (None without cgroups)."""
    groups = process.cgroups
    if groups is None:
        return None
    return GroupFacts(groups.memory_oom_killed(), groups.pids_hit(), groups.cpu_throttled())
