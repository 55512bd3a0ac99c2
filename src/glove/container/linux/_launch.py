"""Launching a sandbox: the clone, the parent's side of the handshake, and the init.

Process shape::

    launcher (this process)                      sandbox (new user, pid, mount, net, ipc,
      open the v1 groups' tasks files              uts and cgroup namespaces)
      clone3(CLONE_NEW* | CLONE_PIDFD |  ------->  init (pid 1): writes 0 to each tasks
        CLONE_INTO_CGROUP)                           file (joins its v1 groups), waits on
      write setgroups=deny, uid_map, gid_map         the go pipe, builds the root, pivots,
      write "G" on the go pipe ------------------>   drops every capability, loads
      read status lines <------------------------    seccomp, spawns the command (pid 2):
                                                     setsid, stdio, rlimits, execve

The init is born in its v2 group (``CLONE_INTO_CGROUP``; a kernel that refuses it gets a
move by pid before the go byte) and moves itself into its v1 groups through descriptors the
launcher opened before the clone: a move by pid through ``cgroup.procs`` waits out an RCU
grace period in the kernel (about 12 ms a group here), a thread's own move through
``tasks`` does not (decision 0051). A refused move ends the launch as a setup error before
the go byte is even read, so nothing of the sandbox runs outside its groups.

The init stays as a minimal reaper so the command is never pid 1 (a pid-1 command would be
immune to its own ``kill -9 $$``) and reports the command's fate on the status pipe. When
the init exits the kernel kills everything left in the pid namespace; when the launcher dies
the init exits too: it watches a pidfd of the launcher *process*, before release (beside
the go pipe) and after (``PR_SET_PDEATHSIG`` would fire when the launching *thread* exits,
which kills sandboxes launched from a worker thread that ends before they do). EOF on the go
pipe alone cannot say the launcher died: a fork copies every descriptor, so each child holds
its own copy of the pipe's write end (closed first thing) and, in a multi-threaded launcher,
the copies of concurrent launches' pipes too. Until it has closed them, a child holds every
descriptor of the launcher (gloved's lock and journals, its listening socket), so a child
that outlived a killed launcher would keep the next one from starting.

``clone3`` runs through ``ctypes.PyDLL`` with the GIL held and the interpreter's fork hooks
(one clone instead of two, for the single-threaded ``glove exec`` and gloved's launcher process,
:mod:`glove.container.linux._launcher`). Where clone3 is unavailable
(ENOSYS, e.g. under a container runtime's filter), and whenever the launching process has
more than one thread (gloved, glove run: the window between the raw syscall and the
interpreter's after-fork hook runs bytecode, where a pending GIL drop request deadlocks the
child), the launcher uses fork, unshare, fork instead. ``GLOVE_SANDBOX_LAUNCH=fork`` forces
it (tests use it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import resource
import select
import signal
import socket
import termios
import threading
import time
from typing import Final, NoReturn

import msgspec

from glove.container._limits import (
    MECH_RLIMIT_AS,
    MECH_RLIMIT_CPU,
    MECH_RLIMIT_NPROC_USERNS,
    LimitPlan,
    plan_limits,
)
from glove.container._protect import check_protected
from glove.container._spec import (
    MAX_PASSED_FD,
    FileProjection,
    SandboxSpec,
    projection_conflict,
)
from glove.container._status import (
    MAX_STATUS_LINE_BYTES,
    Disk,
    ExecFailed,
    Exited,
    Ready,
    RetainedUse,
    SetupFailed,
    Signaled,
    Started,
    StatusLineError,
    StatusMessage,
    Unshared,
    Usage,
)
from glove.container._status import decode_line as decode_status_line
from glove.container._status import encode as encode_status
from glove.container.errors import SandboxSetupError, SpecError
from glove.container.linux import _syscalls as sc
from glove.container.linux._cgroup_v2 import probe_v2
from glove.container.linux._cgroups import (
    SandboxCgroups,
    join_own_groups,
    open_sandbox_cgroups,
    probe_host_limits,
)
from glove.container.linux._launch_guard import check_in_process_launch
from glove.container.linux._mounts import (
    OpenedSource,
    build_rootfs,
    forbid_nested_user_namespaces,
    harden_proc,
    open_sources,
    scratch_used_bytes,
    shown_sources,
    used_bytes,
)
from glove.container.linux._pty import DEFAULT_WINSIZE, open_own_terminal
from glove.container.linux._reaper import FORWARDED_SIGNALS, catch_signals, pass_on, reap_until
from glove.container.linux._retained import (
    check_images_outside,
    close_retained,
    prepare_retained,
)
from glove.container.linux._seccomp import seccomp_program
from glove.container.linux._unix_gate import is_unix_datagram, probe_unix_gate
from glove.exits import EXIT_NOT_FOUND, EXIT_SETUP_FAILED

#: Environment variable that forces the fork + unshare + fork launch path.
LAUNCH_MODE_ENV: Final = "GLOVE_SANDBOX_LAUNCH"
#: Highest fd number closed explicitly before exec.
MAX_FD: Final = 1 << 20
#: oom_score_adj given to the command so the OOM killer prefers it over the init.
COMMAND_OOM_SCORE_ADJ: Final = b"1000"
#: What the sandbox init's command line reads as, from inside.
INIT_TITLE: Final = b"glove-init"
#: Bytes of the go message (the launcher's side is done).
GO_BYTE: Final = b"G"

#: Address space an ``RLIMIT_AS`` limit must leave above the init's own size for the init
#: to spawn the command under it (``_spawn_fits``).
SPAWN_AS_SPARE_BYTES: Final = 256 << 20

_GO_DEADLINE_S: Final = 10.0
_PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")
#: Temporary fds used while placing passed fds sit above every allowed target number.
_STAGING_FD_MIN: Final = MAX_PASSED_FD + 1


class LaunchContext(msgspec.Struct, frozen=True):
    """What the child needs, prepared before the clone (the child copies it)."""

    spec: SandboxSpec
    sources: list[OpenedSource]
    plans: dict[str, LimitPlan]
    stdio: tuple[int, int, int]
    seccomp_bpf: bytes
    last_cap: int
    go_read: int
    go_write: int
    status_write: int
    launcher_pidfd: int
    retained: tuple[tuple[str, int], ...] = ()
    notify_channel: int = -1
    seccomp_notify_bpf: bytes | None = None
    #: The notifying filter gates connect(): without its listener the gate would be open.
    unix_gate: bool = False
    pty_channel: int = -1
    terminal_size: tuple[int, int] = DEFAULT_WINSIZE
    #: Verified files the init mounts read-only (``FileProjection``), in order.
    projections: tuple[FileProjection, ...] = ()
    #: Write descriptors of the sandbox's v1 groups' ``tasks`` files: the first process of
    #: the sandbox joins them itself (``join_own_groups``) before anything else.
    cgroup_tasks: tuple[int, ...] = ()


class SandboxProcess:
    """A launched sandbox, from the launcher's side.

    Attributes:
        pid: host pid of the sandbox's init (or of the fork-path intermediate).
        pidfd: a pidfd for ``pid``; readable once it has exited.
        status_fd: read end of the status pipe (lines such as ``exit 3``).
        plans: the mechanism chosen for each requested limit.
        cgroups: the sandbox's cgroup groups, when a limit uses them.
        started: ``time.monotonic()`` at clone.
        released: ``time.monotonic()`` when the child was released.
    """

    def __init__(
        self,
        *,
        pid: int,
        pidfd: int,
        status_fd: int,
        plans: dict[str, LimitPlan],
        cgroups: SandboxCgroups | None,
        started: float,
    ) -> None:
        """Wrap a launched sandbox (use :func:`launch`)."""
        self.pid = pid
        self.pidfd = pidfd
        self.status_fd = status_fd
        self.plans = plans
        self.cgroups = cgroups
        self.started = started
        self.released = started
        self.reaped_status: int | None = None
        #: Launcher end of the socket the init sends its seccomp listener over (-1: none).
        self.notify_channel = -1
        #: Whether the sandbox's filter sends every connect() to that listener (the Unix
        #: socket gate, ``_unix_gate``): the supervisor must perform them.
        self.unix_gate = False
        #: The RLIMIT_NPROC the sandbox's user namespace runs under when the pids mechanism
        #: is ``rlimit-nproc-userns`` (the limit, one more on the fork path for its reaper,
        #: which is inside the count), else None: the supervisors count the tree against it.
        self.nproc_limit: int | None = None
        #: PTY mode: the master of the terminal the init made from the sandbox's own devpts
        #: (-1: none, or setup failed before it was made). The caller owns and closes it.
        self.pty_master = -1
        #: PTY mode, launched by the launcher process: the socket the init sends that
        #: master over (-1: none; :func:`launch` receives the master itself).
        self.pty_channel = -1

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the sandbox init, which passes TERM, USR1 and USR2 on to the
        command, INT, QUIT and HUP to its process group, TSTP (as SIGSTOP) and CONT to the
        whole tree, and ignores the rest."""
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self.pidfd, signum)

    def kill(self) -> None:
        """Kill the whole sandbox tree (SIGKILL to the init of its pid namespace, and
        ``cgroup.kill`` of its v2 group when it has one)."""
        self.send_signal(signal.SIGKILL)
        if self.cgroups is not None:
            self.cgroups.kill()

    def poll(self) -> int | None:
        """Reap the init if it has exited; return its wait status or None."""
        if self.reaped_status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.reaped_status = status
        return self.reaped_status

    def wait(self) -> int:
        """Block until the init exits; return its wait status."""
        if self.reaped_status is None:
            _, self.reaped_status = os.waitpid(self.pid, 0)
        return self.reaped_status

    def close(self) -> None:
        """Kill anything left, reap, remove cgroups and close descriptors (idempotent)."""
        if self.reaped_status is None:
            self.kill()
            with contextlib.suppress(ChildProcessError):
                self.wait()
        if self.cgroups is not None:
            self.cgroups.destroy()
        for fd in (self.pidfd, self.status_fd, self.notify_channel, self.pty_channel):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.pidfd = self.status_fd = self.notify_channel = self.pty_channel = -1


def _report(fd: int, message: StatusMessage) -> None:
    """Send one status message to the launcher (the channel's codec: ``_status``)."""
    with contextlib.suppress(OSError):
        os.write(fd, encode_status(message))


def _close_all_except(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, MAX_FD)


def _place_fds(mapping: dict[int, int]) -> None:
    """dup2 ``{target: source}`` safely even when sources and targets overlap."""
    staged = {
        target: fcntl.fcntl(source, fcntl.F_DUPFD_CLOEXEC, _STAGING_FD_MIN)
        for target, source in mapping.items()
    }
    for target, temp in staged.items():
        os.dup2(temp, target, inheritable=True)
    for temp in staged.values():
        if temp not in mapping:
            os.close(temp)


def _above_targets(fd: int) -> int:
    """Move ``fd`` above every fd number the command's stdio and passed fds may take."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _STAGING_FD_MIN)
    os.close(fd)
    return moved


def _apply_rlimits(plans: dict[str, LimitPlan]) -> None:
    for plan in plans.values():
        if plan.mechanism == MECH_RLIMIT_AS:
            resource.setrlimit(resource.RLIMIT_AS, (int(plan.value), int(plan.value)))
        elif plan.mechanism == MECH_RLIMIT_NPROC_USERNS:
            resource.setrlimit(resource.RLIMIT_NPROC, (int(plan.value), int(plan.value)))
        elif plan.mechanism == MECH_RLIMIT_CPU:
            seconds = max(1, int(plan.value + 0.999))
            # SIGXCPU at the soft limit (reported as the limit), SIGKILL a second later.
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))


def _enter_command_context(ctx: LaunchContext) -> None:
    """What the command inherits from its parent: working directory, rlimits, OOM score.

    Runs in the command's own process (fork path) or in the init just before posix_spawn.
    """
    os.chdir(ctx.spec.working_directory)
    _apply_rlimits(ctx.plans)
    with contextlib.suppress(OSError):
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
        os.write(fd, COMMAND_OOM_SCORE_ADJ)
        os.close(fd)


def _exec_command(ctx: LaunchContext, exec_write: int) -> NoReturn:
    """Become the command (pid 2). Never returns."""
    spec = ctx.spec
    try:
        for signum in range(1, signal.NSIG):
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.setsid()
        if spec.pty:
            fcntl.ioctl(ctx.stdio[0], termios.TIOCSCTTY, 0)
        mapping = {0: ctx.stdio[0], 1: ctx.stdio[1], 2: ctx.stdio[2], **spec.pass_fds}
        _place_fds(mapping)
        _close_all_except({*mapping, exec_write})
        _enter_command_context(ctx)
    except BaseException as exc:  # noqa: BLE001 - the forked child must never unwind
        _report(exec_write, SetupFailed(str(exc)))
        os._exit(EXIT_SETUP_FAILED)
    try:
        os.execvpe(spec.argv[0], list(spec.argv), dict(spec.env))  # noqa: S606 - argv is a list, no shell
    except OSError as exc:
        _report(exec_write, ExecFailed(exc.errno or errno.ENOENT))
    except BaseException as exc:  # noqa: BLE001 - the forked child must never unwind
        _report(exec_write, ExecFailed(errno.EINVAL, str(exc)))
    os._exit(EXIT_NOT_FOUND)


def _fork_command(ctx: LaunchContext) -> tuple[int, bytes]:
    """Fork the command (PTY mode needs TIOCSCTTY between fork and exec).

    Returns the pid and, if the exec failed, the encoded failure message to relay.
    """
    exec_read, exec_write = (_above_targets(fd) for fd in os.pipe2(os.O_CLOEXEC))
    command = os.fork()
    if command == 0:
        os.close(exec_read)
        _exec_command(ctx, exec_write)
    os.close(exec_write)
    failure = os.read(exec_read, MAX_STATUS_LINE_BYTES)
    os.close(exec_read)
    return command, failure


def _search_path(name: str, env: dict[str, str]) -> list[str]:
    """The candidates execvp would try for ``name`` under the command's PATH."""
    if "/" in name:
        return [name]
    path = env.get("PATH", os.defpath)
    return [f"{entry or '.'}/{name}" for entry in path.split(":")]


def _spawn_command(ctx: LaunchContext) -> tuple[int | None, bytes]:
    """Start the command with posix_spawn (vfork: no page-table copy of this interpreter).

    The init applies what posix_spawn cannot to itself first (the command inherits it): the
    working directory, the rlimits and the OOM score. The spawn sets a new session, default
    signal dispositions and an empty mask, and places stdio and passed fds. Every other fd
    of the init is close-on-exec. Returns the pid, or None and the failure line.
    """
    spec = ctx.spec
    _enter_command_context(ctx)
    mapping = {0: ctx.stdio[0], 1: ctx.stdio[1], 2: ctx.stdio[2], **spec.pass_fds}
    staged = {target: _dup_above_targets(source) for target, source in mapping.items()}
    actions = [(os.POSIX_SPAWN_DUP2, temp, target) for target, temp in staged.items()]
    env = dict(spec.env)
    denied: OSError | None = None
    last: OSError | None = None
    try:
        for candidate in _search_path(spec.argv[0], env):
            try:
                command = os.posix_spawn(candidate, list(spec.argv), env, file_actions=actions,
                                         setsid=True, setsigmask=(),
                                         setsigdef=signal.valid_signals())  # fmt: skip
            except OSError as exc:
                if exc.errno == errno.EACCES:
                    denied = exc
                elif exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                    return None, encode_status(ExecFailed(exc.errno or errno.EINVAL))
                last = exc
                continue
            return command, b""
    finally:
        for temp in staged.values():
            os.close(temp)
    failure = denied or last
    number = failure.errno if failure and failure.errno else errno.ENOENT
    return None, encode_status(ExecFailed(number))


def _dup_above_targets(fd: int) -> int:
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _STAGING_FD_MIN)


def _keep_only_needed_fds(ctx: LaunchContext) -> None:
    """Close every fd the init inherited from the launcher except the ones it still needs."""
    kept = {ctx.status_write, ctx.launcher_pidfd, *ctx.stdio, *ctx.spec.pass_fds.values()}
    if ctx.notify_channel >= 0:
        kept.add(ctx.notify_channel)
    _close_all_except(kept)
    for fd in kept:
        os.set_inheritable(fd, False)  # only what the spawn places reaches the command


def _install_seccomp(ctx: LaunchContext) -> None:
    """Load the filter; in reporting mode hand its listener to the launcher first.

    The notifying variant needs a listener that the launcher services; if the kernel will
    not create one, the plain EPERM variant is loaded instead (denials still hold, they are
    just not itemized), unless the variant carries the Unix socket gate: then the setup
    fails, because the plain variant lets connect() through.

    Raises:
        OSError: the gate's listener could not be made.
    """
    channel = ctx.notify_channel
    if channel < 0 or ctx.seccomp_notify_bpf is None:
        sc.load_seccomp_bpf(ctx.seccomp_bpf)
        return
    try:
        listener = sc.load_seccomp_listener(ctx.seccomp_notify_bpf)
    except OSError:
        if ctx.unix_gate:
            raise
        sc.load_seccomp_bpf(ctx.seccomp_bpf)
        os.close(channel)
        return
    try:
        with socket.socket(fileno=channel) as chan:
            socket.send_fds(chan, [b"L"], [listener])
    finally:
        os.close(listener)


def _report_usage(ctx: LaunchContext) -> None:
    """Report what the tree used once the command is gone: CPU, peak memory, disk.

    ``RUSAGE_CHILDREN`` of the init covers every descendant it or they reaped (the init
    reaps orphans), so it is the whole tree's CPU time and its largest resident set.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    _report(ctx.status_write, Usage(usage.ru_utime, usage.ru_stime, usage.ru_maxrss * 1024))
    with contextlib.suppress(OSError):
        _report(ctx.status_write, Disk(scratch_used_bytes()))
    for target, _ in ctx.retained:
        with contextlib.suppress(OSError):
            _report(ctx.status_write, RetainedUse(used_bytes(target), target))


def _own_terminal(ctx: LaunchContext) -> LaunchContext:
    """PTY mode: make the command's terminal from the sandbox's devpts, send the launcher
    the master, and return the context with the slave as the command's stdio."""
    master, slave = open_own_terminal(ctx.terminal_size)
    try:
        with socket.socket(fileno=ctx.pty_channel) as channel:
            socket.send_fds(channel, [b"T"], [master])
    finally:
        os.close(master)
    return msgspec.structs.replace(ctx, stdio=(slave, slave, slave), pty_channel=-1)


def _spawn_fits(plans: dict[str, LimitPlan]) -> bool:
    """Whether the init may spawn the command under the plans' address-space limit.

    posix_spawn makes the init apply the rlimits to itself first: an address-space limit
    too close to the init's own size (a clone of the launcher: gloved's threads and arenas
    are in it) would fail the spawn's stack mapping (ENOMEM) or a later allocation of the
    init. With :data:`SPAWN_AS_SPARE_BYTES` to spare (the default profile's 4 GiB against
    an interpreter of a few hundred MiB) it spawns; the fork path applies the limit in the
    command's process only, and is taken otherwise.
    """
    limit = next((p for p in plans.values() if p.mechanism == MECH_RLIMIT_AS), None)
    if limit is None:
        return True
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = int(os.read(fd, 256).split()[0]) * _PAGE_SIZE
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        return False
    return int(limit.value) - size >= SPAWN_AS_SPARE_BYTES


def _run_command(ctx: LaunchContext) -> None:
    """The init's work once hardened: start the command, pass signals on, reap until it
    exits, and report how it started and ended."""
    status = ctx.status_write
    command: int | None
    signals = catch_signals()
    if ctx.spec.pty or not _spawn_fits(ctx.plans):
        command, failure = _fork_command(ctx)
    else:
        command, failure = _spawn_command(ctx)
    for fd in {*ctx.stdio, *ctx.spec.pass_fds.values()}:
        with contextlib.suppress(OSError):
            os.close(fd)
    if failure or command is None:
        with contextlib.suppress(OSError):
            os.write(status, failure)  # already an encoded message (exec or setup)
        if command is not None:
            reap_until(command, ctx.launcher_pidfd, signals, lambda _signum: None)
        return
    _report(status, Started())
    target = command
    wait_status = reap_until(
        command, ctx.launcher_pidfd, signals, lambda signum: pass_on(target, signum)
    )
    if os.WIFSIGNALED(wait_status):
        _report(status, Signaled(os.WTERMSIG(wait_status)))
    else:
        _report(status, Exited(os.waitstatus_to_exitcode(wait_status)))


def _await_go(ctx: LaunchContext) -> bool:
    """In a child of the launcher: wait for its go byte; False if it died first.

    The child's copy of the go pipe's write end is closed at once (the launcher's own is
    the only one that may release it), and the launcher's pidfd is watched beside the pipe:
    a killed launcher never leaves a child waiting here (holding its descriptors) for ever.
    """
    with contextlib.suppress(OSError):
        os.close(ctx.go_write)
    while True:
        ready, _, _ = select.select([ctx.go_read, ctx.launcher_pidfd], [], [])
        if ctx.go_read in ready:  # first: a launcher that wrote "G" then died still released us
            return os.read(ctx.go_read, 1) == GO_BYTE
        if ctx.launcher_pidfd in ready:
            return False


def _init_main(ctx: LaunchContext, *, handshake: bool, born_placed: bool = False) -> NoReturn:
    """Run as the sandbox's pid 1: build, harden, fork the command, reap, report.

    ``born_placed``: cloned into its v2 group (``CLONE_INTO_CGROUP``), so all its CPU time
    is in the group's count, from zero; else only what follows the go byte.
    """
    status = ctx.status_write
    _join_groups(ctx)
    try:
        for signum in FORWARDED_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        # Out of the operator's foreground process group: a terminal's ^C reaches the
        # launcher alone, which passes it on once (never twice, never past the relay).
        with contextlib.suppress(OSError):
            os.setsid()
        if handshake and not _await_go(ctx):
            os._exit(EXIT_SETUP_FAILED)
        # In its cgroups from here (the go byte follows placing), or from birth.
        placed_cpu_s = 0.0 if born_placed else _own_cpu_s()
        os.close(ctx.go_read)
        build_rootfs(ctx.spec, ctx.sources, ctx.retained, ctx.projections)
        if ctx.spec.pty:
            ctx = _own_terminal(ctx)
        forbid_nested_user_namespaces()
        harden_proc()
        _keep_only_needed_fds(ctx)
        sc.prctl(sc.PR_SET_DUMPABLE, 0)
        sc.set_own_cmdline(INIT_TITLE)
        sc.drop_all_capabilities(ctx.last_cap)
        _install_seccomp(ctx)
        _report(status, Ready(setup_cpu_s=round(max(0.0, _own_cpu_s() - placed_cpu_s), 6)))
        _run_command(ctx)
        _report_usage(ctx)
    except BaseException as exc:  # noqa: BLE001 - the init must never unwind
        _report(status, SetupFailed(f"{type(exc).__name__}: {exc}{_where(exc)}"))
        os._exit(EXIT_SETUP_FAILED)
    os._exit(0)


def _join_groups(ctx: LaunchContext) -> None:
    """Join the sandbox's v1 groups (first thing in the sandbox's first process); a refused
    move ends the launch as a setup error before anything else ran (fail closed)."""
    try:
        join_own_groups(ctx.cgroup_tasks)
    except BaseException as exc:  # noqa: BLE001 - the forked child must never unwind
        _report(ctx.status_write, SetupFailed(str(exc)))
        os._exit(EXIT_SETUP_FAILED)


def _own_cpu_s() -> float:
    """CPU time (user plus system) this process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _where(exc: BaseException) -> str:
    """Name the function where setup failed, so a report says which step broke."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    return f" (in {tb.tb_frame.f_code.co_name})"


def _write_file(path: str, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def _write_id_maps(pid: int) -> None:
    uid, gid = os.geteuid(), os.getegid()
    _write_file(f"/proc/{pid}/setgroups", "deny")
    _write_file(f"/proc/{pid}/uid_map", f"{uid} {uid} 1\n")
    _write_file(f"/proc/{pid}/gid_map", f"{gid} {gid} 1\n")


def _with_reaper(plans: dict[str, LimitPlan]) -> dict[str, LimitPlan]:
    """``plans`` with room for the fork path's reaper in the pids limit."""
    pids = plans.get("pids")
    if pids is None:
        return plans
    return {**plans, "pids": msgspec.structs.replace(pids, value=int(pids.value) + 1)}


def _fork_path(ctx: LaunchContext) -> tuple[int, int]:
    """fork, unshare, fork: when clone3 is unavailable or the launcher has threads.

    The first child (the *reaper*) stays outside the new pid namespace, reaps the init,
    forwards the signals the launcher sends it, and takes the init down with it when it dies.
    """
    pid = os.fork()
    if pid == 0:
        _join_groups(ctx)  # the init, forked below, is born in the groups
        ctx = msgspec.structs.replace(ctx, cgroup_tasks=())
        try:
            with contextlib.suppress(OSError):
                os.setsid()  # out of the operator's foreground group, as the init (above)
            sc.unshare(sc.SANDBOX_NAMESPACES)
            _report(ctx.status_write, Unshared())
            if not _await_go(ctx):
                os._exit(EXIT_SETUP_FAILED)
            reaper = os.pidfd_open(os.getpid())
            init = os.fork()
            if init == 0:
                # The init dies with its reaper (a SIGKILL of the sandbox is sent to the
                # reaper, whose pidfd the launcher holds), so nothing outlives a kill. Its
                # parent is outside its pid namespace (getppid() is 0): a pidfd of the reaper
                # says whether it died before the death signal was armed.
                sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
                if select.select([reaper], [], [], 0)[0]:
                    os._exit(EXIT_SETUP_FAILED)
                os.close(reaper)
                _init_main(ctx, handshake=False)
            # The reaper keeps only its lifeline: every other fd it inherited from the
            # launcher (a stdin pipe's write end, the status pipe, the pty channel) would
            # otherwise stay open as long as the sandbox lives, so the command would never
            # see EOF on its stdin and the launcher never on the init's channels.
            _close_all_except({ctx.launcher_pidfd})
            signals = catch_signals()  # TERM, INT, TSTP... reach the init, in order
            # (the init was forked before: it blocks its own once its command is ready)

            def relay(signum: int) -> None:
                with contextlib.suppress(OSError):
                    os.kill(init, signum)

            status = reap_until(init, ctx.launcher_pidfd, signals, relay)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        except BaseException as exc:  # noqa: BLE001 - the forked child must never unwind
            _report(ctx.status_write, SetupFailed(f"{type(exc).__name__}: {exc}"))
        os._exit(EXIT_SETUP_FAILED)
    return pid, os.pidfd_open(pid)


def _clone(cgroups: SandboxCgroups | None) -> tuple[int, int, bool]:
    """clone3 the init, into its v2 group at once when there is one.

    Returns ``(pid, pidfd, in_v2)``: ``(0, -1, _)`` in the child, ``(-1, -1, False)`` where
    clone3 is unavailable (the fork path is taken then). A kernel that refuses
    ``CLONE_INTO_CGROUP`` gets a plain clone3 and the init is moved after.

    Raises:
        SandboxSetupError: the kernel refused the clone.
    """
    into = cgroups.open_v2() if cgroups is not None else -1
    try:
        if into >= 0:
            try:
                pid, pidfd = sc.clone3(sc.SANDBOX_NAMESPACES, cgroup_fd=into)
            except OSError:
                pass  # an older kernel, or a group it will not start us in: move it after
            else:
                return pid, pidfd, True
        try:
            pid, pidfd = sc.clone3(sc.SANDBOX_NAMESPACES)
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.EPERM):
                raise SandboxSetupError(f"cannot create the sandbox: {exc}") from exc
            return -1, -1, False
        return pid, pidfd, False
    finally:
        if into >= 0:
            os.close(into)


def _await_unshared(status_fd: int) -> None:
    deadline = time.monotonic() + _GO_DEADLINE_S
    buffer = b""
    while not buffer.endswith(b"\n"):
        if time.monotonic() > deadline:
            raise SandboxSetupError("the sandbox did not create its namespaces in time")
        chunk = os.read(status_fd, 1)
        if not chunk:
            raise SandboxSetupError("the sandbox died while creating its namespaces")
        buffer += chunk
    try:
        message = decode_status_line(buffer.rstrip(b"\n"))
    except StatusLineError as exc:
        raise SandboxSetupError(f"the sandbox sent {exc}") from exc
    if isinstance(message, SetupFailed):
        raise SandboxSetupError(message.message)
    if not isinstance(message, Unshared):
        raise SandboxSetupError(f"the sandbox sent {message!r} before its namespaces")


def receive_terminal(channel: socket.socket) -> int:
    """The pty master the init sends once its root is built; -1 if it sent none in time
    (its setup failed: the status pipe says why)."""
    ready, _, _ = select.select([channel], [], [], _GO_DEADLINE_S)
    if not ready:
        return -1
    try:
        _, fds, _, _ = socket.recv_fds(channel, 1, 1)
    except OSError:
        return -1
    for extra in fds[1:]:
        os.close(extra)
    return fds[0] if fds else -1


def launch(
    spec: SandboxSpec,
    stdio: tuple[int, int, int] = (0, 1, 2),
    *,
    report_violations: bool = False,
    terminal_size: tuple[int, int] = DEFAULT_WINSIZE,
    projections: tuple[FileProjection, ...] = (),
) -> SandboxProcess:
    """Start ``spec`` in a new sandbox and return once the child is released.

    ``projections`` are verified files the init mounts read-only at their targets (see
    :class:`~glove.container.FileProjection`); each is closed here once the sandbox was
    cloned (or the launch failed), whatever happens.

    PTY mode (``spec.pty``): the init makes the command's terminal from the sandbox's own
    devpts instance (``terminal_size`` rows and columns) and ``stdio`` is not used; the
    returned process's ``pty_master`` is its master (the caller closes it), or -1 when the
    setup failed before the terminal existed.

    With ``report_violations`` every seccomp denial is sent to the launcher, which must
    service ``SandboxProcess.notify_channel`` (``run`` does): until answered, the denied call
    blocks. Where this host has the Unix socket gate (``probe_unix_gate``), every
    ``connect`` is sent too, and must be performed by a :class:`ConnectGate`
    (``SandboxProcess.unix_gate``). Without it denials are plain EPERM from the kernel and
    ``connect`` is not gated.

    ``stdio`` gives the descriptors the command receives as 0, 1 and 2; ``spec.pass_fds``
    adds more. The caller keeps its own copies of all of them and must close them itself.

    Raises:
        LimitRefused: a requested limit cannot be enforced as asked.
        SpecError: a bind source is missing or goes through a symlink.
        UnsupportedPlatform: no seccomp or no namespaces here.
        SandboxSetupError: the launcher's side of the setup failed (nothing ran).
        InProcessLaunchForbidden: this is gloved, whose launcher process clones (nothing
            ran; the projections are closed).
    """
    try:
        check_in_process_launch()
        return _launch(
            spec,
            stdio,
            report_violations=report_violations,
            terminal_size=terminal_size,
            projections=projections,
        )
    finally:
        for projection in projections:
            projection.close()


def _launch(  # noqa: PLR0912, PLR0915 - one linear, commented sequence with its unwinding
    spec: SandboxSpec,
    stdio: tuple[int, int, int],
    *,
    report_violations: bool,
    terminal_size: tuple[int, int],
    projections: tuple[FileProjection, ...],
    keep_terminal_channel: bool = False,
) -> SandboxProcess:
    targets: set[str] = set()
    for projection in projections:
        conflict = projection_conflict(spec, projection.target)
        if conflict is None and projection.target in targets:
            conflict = f"{projection.target} is the target of another projection"
        if conflict is not None:
            raise SpecError(f"projection target {conflict}")
        targets.add(projection.target)
    v2 = probe_v2()  # once per launch: the plans and the groups follow the same probe
    plans = plan_limits(spec.limits, probe_host_limits(v2), spec.accept_weaker)
    bpf = seccomp_program()
    gate = report_violations and probe_unix_gate().mechanism is not None
    notify_bpf = seccomp_program(notify=True, gate=gate) if report_violations else None
    for target, fd in spec.pass_fds.items():
        if is_unix_datagram(fd):
            raise SpecError(
                f"descriptor {target} is a datagram Unix socket: each send could name any "
                "host socket by path; pass a stream or seqpacket socket"
            )
    sources = open_sources(spec)
    check_protected(shown_sources(spec, sources), spec.protected)
    writable = [b.source for b in spec.binds if b.mode == "rw"]
    if spec.workspace is not None and spec.workspace_mode == "rw":
        writable.append(spec.workspace)
    check_images_outside(spec.retained, writable)
    retained = prepare_retained(spec.retained)
    parent_channel, child_channel = (
        socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if report_violations
        else (None, None)
    )
    pty_parent, pty_child = (
        socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if spec.pty else (None, None)
    )
    # clone3 goes through ctypes, so Python bytecode runs in the child between the syscall
    # and PyOS_AfterFork_Child. If another thread of this process was waiting for the GIL,
    # the copied "drop the GIL" request makes the child hand the GIL to a thread that does
    # not exist in it, and wait forever (seen under gloved). os.fork() keeps that window in
    # C, so a multi-threaded launcher takes the fork path. There, the reaper between the
    # launcher and the init is Glove's own process inside the sandbox's group and user
    # namespace: the pids limit enforced is one more, so the sandbox keeps every task asked.
    use_fork = os.environ.get(LAUNCH_MODE_ENV) == "fork" or threading.active_count() > 1
    enforced = _with_reaper(plans) if use_fork else plans
    cgroups: SandboxCgroups | None = None
    launcher_pidfd = os.pidfd_open(os.getpid())  # the init's lifeline to this process
    go_read, go_write = os.pipe2(os.O_CLOEXEC)
    status_read, status_write = os.pipe2(os.O_CLOEXEC)
    ctx = LaunchContext(
        retained=tuple((item.target, item.mount_fd) for item in retained),
        spec=spec,
        sources=sources,
        plans=enforced,
        stdio=stdio,
        seccomp_bpf=bpf,
        seccomp_notify_bpf=notify_bpf,
        unix_gate=gate,
        notify_channel=child_channel.fileno() if child_channel is not None else -1,
        last_cap=sc.cap_last_cap(),
        go_read=go_read,
        go_write=go_write,
        status_write=status_write,
        launcher_pidfd=launcher_pidfd,
        pty_channel=pty_child.fileno() if pty_child is not None else -1,
        terminal_size=terminal_size,
        projections=projections,
    )
    pid = pidfd = -1
    in_v2 = False
    tasks: tuple[int, ...] = ()
    started = time.monotonic()
    try:
        cgroups = open_sandbox_cgroups(enforced, v2)
        if cgroups is not None:
            tasks = cgroups.open_v1_tasks()
            ctx = msgspec.structs.replace(ctx, cgroup_tasks=tasks)
        if not use_fork:
            pid, pidfd, in_v2 = _clone(cgroups)
            use_fork = pid < 0
            if pid == 0:
                _init_main(ctx, handshake=True, born_placed=in_v2)
        if use_fork:
            pid, pidfd = _fork_path(ctx)
        os.close(status_write)
        status_write = -1
        if use_fork:
            _await_unshared(status_read)
        _write_id_maps(pid)
        if cgroups is not None and not in_v2:
            cgroups.place(pid)  # the v2 group; the init joins its v1 groups itself
        os.write(go_write, GO_BYTE)
    except BaseException as exc:
        if pid > 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            os.close(pidfd)
        if cgroups is not None:
            cgroups.destroy()
        os.close(status_read)
        if parent_channel is not None:
            parent_channel.close()
        if pty_parent is not None:
            pty_parent.close()
        if isinstance(exc, OSError):
            raise SandboxSetupError(f"cannot set up the sandbox: {exc}") from exc
        raise
    finally:
        for fd in (go_read, go_write, status_write, launcher_pidfd, *tasks):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        close_retained(retained)
        if child_channel is not None:
            child_channel.close()
        if pty_child is not None:
            pty_child.close()
    process = SandboxProcess(
        pid=pid, pidfd=pidfd, status_fd=status_read, plans=plans, cgroups=cgroups, started=started
    )
    process.released = time.monotonic()
    nproc = enforced.get("pids")
    if nproc is not None and nproc.mechanism == MECH_RLIMIT_NPROC_USERNS:
        process.nproc_limit = int(nproc.value)
    if parent_channel is not None:
        process.notify_channel = parent_channel.detach()
        process.unix_gate = gate
    if pty_parent is not None and keep_terminal_channel:
        process.pty_channel = pty_parent.detach()  # the launcher's caller receives it
    elif pty_parent is not None:
        with pty_parent:
            process.pty_master = receive_terminal(pty_parent)
    return process
