"""Applying the Seatbelt profile on macOS: ``sandbox-exec -p``, rlimits, a watchdog, accounting.

The process shape::

    glove (this process: watchdog, output accounting)
      └─ /usr/bin/sandbox-exec -D GLOVE_PRIVATE_TMP=<dir> -p <profile> -- CMD ...
           (applies the profile to itself, then execvp's CMD: the profile is in force
            before the first instruction of CMD, and every descendant inherits it)

The child starts in a new session (so its process group is the unit the watchdog kills) with
the rlimits the limit plan chose set between fork and exec, a complete environment (the
spec's, with ``/tmp`` meaning the per-run private temp dir), and its stdout/stderr on pipes
this process drains, counts and cuts at the output limit. There is no PID namespace: a
descendant that calls ``setsid`` leaves the process group and survives the kill, which is
why the macOS wall-time mechanism is not a whole-sandbox one (see docs/macos.md).

Everything except the ``sandbox-exec`` step is plain POSIX, and :func:`supervise` is tested
on Linux with real processes; the profile itself has not been executed on macOS here.
:func:`run` refuses with :class:`UnsupportedPlatform` anywhere but macOS.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from glove.container._filter import OutputFilter
from glove.container._limits import (
    MECH_RLIMIT_CPU,
    MECH_RLIMIT_FSIZE,
    MECH_RLIMIT_NPROC_USER,
    HostLimitSupport,
    LimitPlan,
    plan_limits,
)
from glove.container._monitor import DRAIN_GRACE_S
from glove.container._result import (
    Durations,
    LimitReport,
    Outcome,
    OutputReport,
    SandboxResult,
    exit_code_for_signal,
    setup_failure,
)
from glove.container._spec import Bind, SandboxSpec, normalize_inside
from glove.container.errors import SpecError, UnsupportedPlatform
from glove.container.macos._sbpl import PRIVATE_TMP_PARAM, render_sbpl

#: Only this sandbox-exec is used (a PATH lookup could find a planted one).
SANDBOX_EXEC: Final = "/usr/bin/sandbox-exec"
#: Bytes read from an output pipe per call.
READ_CHUNK_BYTES: Final = 64 * 1024
#: The poll interval of the supervision loop when no deadline is nearer.
POLL_INTERVAL_S: Final = 0.1
#: Prefix of the per-run private temp dir.
PRIVATE_TMP_PREFIX: Final = "glove-"


def on_macos() -> bool:
    """Whether this process runs on macOS (a call, so type checkers on Linux check ``run``)."""
    return sys.platform == "darwin"


def probe_host_limits() -> HostLimitSupport:
    """What this launcher can use for limits on macOS: rlimits, a watchdog, accounting."""
    return HostLimitSupport(host_uid=os.getuid(), platform="macos")


@dataclass(frozen=True)
class RlimitSetting:
    """One rlimit to set in the child before exec (soft and hard)."""

    resource: int
    soft: int
    hard: int


def rlimits_for(plans: dict[str, LimitPlan]) -> tuple[RlimitSetting, ...]:
    """The rlimits the macOS limit plan asks for (CPU seconds, processes, file size)."""
    settings = [RlimitSetting(resource.RLIMIT_CORE, 0, 0)]  # no core dumps into the workspace
    for plan in plans.values():
        if plan.mechanism == MECH_RLIMIT_CPU:
            seconds = math.ceil(plan.value)
            settings.append(RlimitSetting(resource.RLIMIT_CPU, seconds, seconds + 1))
        elif plan.mechanism == MECH_RLIMIT_NPROC_USER:
            settings.append(RlimitSetting(resource.RLIMIT_NPROC, int(plan.value), int(plan.value)))
        elif plan.mechanism == MECH_RLIMIT_FSIZE:
            settings.append(RlimitSetting(resource.RLIMIT_FSIZE, int(plan.value), int(plan.value)))
    return tuple(settings)


def macos_environment(spec: SandboxSpec, private_tmp: str) -> dict[str, str]:
    """The command's complete environment: the spec's, with ``/tmp`` meaning the private dir.

    ``/tmp`` is shared by every user on macOS and is not granted by the profile; a spec that
    points ``TMPDIR``, ``HOME`` or any other variable exactly at ``/tmp`` gets the per-run
    private temp dir instead, and ``TMPDIR`` is always set to it.
    """
    env = {key: (private_tmp if value == "/tmp" else value) for key, value in spec.env.items()}  # noqa: S108
    env["TMPDIR"] = private_tmp
    return env


def macos_cwd(spec: SandboxSpec) -> str:
    """The host directory the command starts in (the workspace target maps to its source)."""
    wanted = spec.working_directory
    if spec.workspace is not None:
        target = normalize_inside(spec.workspace_target)
        inside = normalize_inside(wanted)
        if inside == target or inside.startswith(target.rstrip("/") + "/"):
            return os.path.normpath(spec.workspace + inside[len(target) :])
    return wanted


def sandbox_exec_argv(profile: str, private_tmp: str, argv: tuple[str, ...]) -> list[str]:
    """The ``sandbox-exec`` command line that applies ``profile`` and runs ``argv``."""
    return [SANDBOX_EXEC, "-D", f"{PRIVATE_TMP_PARAM}={private_tmp}", "-p", profile, "--", *argv]


def resolve_spec_paths(spec: SandboxSpec) -> SandboxSpec:
    """Resolve symlinks in the workspace and bind sources (the sandbox sees real paths).

    Optional binds whose source does not exist are dropped, as on Linux.

    Raises:
        SpecError: a required bind source does not exist.
    """
    binds: list[Bind] = []
    for bind in spec.binds:
        if not os.path.lexists(bind.source):
            if bind.optional:
                continue
            raise SpecError(f"bind source {bind.source} does not exist")
        real = os.path.realpath(bind.source)
        target = None if bind.target in (None, bind.source) else bind.target
        binds.append(msgspec.structs.replace(bind, source=real, target=target))
    workspace = os.path.realpath(spec.workspace) if spec.workspace is not None else None
    return msgspec.structs.replace(spec, binds=tuple(binds), workspace=workspace)


@dataclass
class _Output:
    """Counts bytes passed on and enforces the output cap."""

    cap: int | None
    total: int = 0
    truncated: bool = False

    def admit(self, data: bytes) -> bytes:
        if self.cap is not None and self.total + len(data) > self.cap:
            data = data[: max(0, self.cap - self.total)]
            self.truncated = True
        self.total += len(data)
        return data


@dataclass
class _Verdict:
    limit_hit: str | None = None
    cancelled: bool = False
    reports: dict[str, LimitReport] = field(default_factory=dict)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _deliver(fd: int, data: bytes, flt: OutputFilter | None) -> None:
    """Write ``data`` to ``fd``, through ``flt`` when there is one."""
    if flt is not None and data:
        data = flt.feed(data)
    if data:
        _write_all(fd, data)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _pump(
    proc: subprocess.Popen[bytes],
    sinks: dict[int, int],
    output: _Output,
    verdict: _Verdict,
    *,
    deadline: float | None,
    cancel_fd: int | None,
    clock: Callable[[], float],
    filters: Mapping[int, OutputFilter],
) -> None:
    """Pass output on until both pipes close (or the drain grace ends); enforce the limits.

    Output bound for a host descriptor in ``filters`` passes its filter after it was
    counted (the limit counts what the command wrote), and what a filter still holds is
    written at the end.
    """
    with selectors.DefaultSelector() as selector:
        for source in sinks:
            os.set_blocking(source, False)
            selector.register(source, selectors.EVENT_READ)
        if cancel_fd is not None:
            selector.register(cancel_fd, selectors.EVENT_READ)
        drain_until: float | None = None
        open_sinks = set(sinks)
        while open_sinks:
            now = clock()
            if proc.poll() is not None and drain_until is None:
                drain_until = now + DRAIN_GRACE_S
            if drain_until is not None and now >= drain_until:
                break
            if deadline is not None and now >= deadline and proc.returncode is None:
                verdict.limit_hit = "wall_time"
                _kill_group(proc.pid)
                deadline = None
            limits = [t for t in (deadline, drain_until) if t is not None]
            timeout = min([POLL_INTERVAL_S, *(t - now for t in limits)])
            for key, _events in selector.select(max(timeout, 0.0)):
                fd = int(key.fd)
                if fd == cancel_fd:
                    verdict.cancelled = True
                    _kill_group(proc.pid)
                    selector.unregister(fd)
                    continue
                try:
                    chunk = os.read(fd, READ_CHUNK_BYTES)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(fd)
                    open_sinks.discard(fd)
                    continue
                _deliver(sinks[fd], output.admit(chunk), filters.get(sinks[fd]))
                if output.truncated and verdict.limit_hit is None:
                    verdict.limit_hit = "output"
                    _kill_group(proc.pid)


def supervise(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    plans: dict[str, LimitPlan],
    stdin: int = 0,
    stdout: int = 1,
    stderr: int = 2,
    cancel_fd: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    filters: Mapping[int, OutputFilter] | None = None,
) -> SandboxResult:
    """Run ``argv`` in a new session with the plan's rlimits, watchdog and output accounting.

    Plain POSIX: on macOS ``argv`` is the ``sandbox-exec`` command line; tests on Linux run
    real commands through it directly. Output bound for a descriptor in ``filters`` passes
    its filter (``glove exec`` on a terminal, as on Linux).

    Raises:
        OSError: the command could not be started (not found, not executable).
    """
    settings = rlimits_for(plans)

    def in_child() -> None:  # pragma: no cover - runs between fork and exec
        for setting in settings:
            resource.setrlimit(setting.resource, (setting.soft, setting.hard))

    started = clock()
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=cwd,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=in_child,  # noqa: PLW1509 - rlimits must be set in the child; no threads here
        close_fds=True,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    output = _Output(int(plans["output"].value) if "output" in plans else None)
    wall = plans.get("wall_time")
    deadline = started + float(wall.value) if wall is not None else None
    verdict = _Verdict()
    sinks = {proc.stdout.fileno(): stdout, proc.stderr.fileno(): stderr}
    held = dict(filters or {})
    _pump(
        proc,
        sinks,
        output,
        verdict,
        deadline=deadline,
        cancel_fd=cancel_fd,
        clock=clock,
        filters=held,
    )
    for fd, flt in held.items():
        with contextlib.suppress(OSError):
            _deliver(fd, flt.close(), None)
    _kill_group(proc.pid)  # nothing of the session outlives the run
    returncode = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return _result(plans, verdict, returncode, output, clock() - started)


def _result(
    plans: dict[str, LimitPlan],
    verdict: _Verdict,
    returncode: int,
    output: _Output,
    total_s: float,
) -> SandboxResult:
    signum = -returncode if returncode < 0 else None
    hits = {
        "wall_time": verdict.limit_hit == "wall_time",
        "output": verdict.limit_hit == "output",
        "cpu_time": signum in (signal.SIGXCPU,),
        "disk": signum in (signal.SIGXFSZ,),
    }
    reports = {
        name: LimitReport(value=plan.value, mechanism=plan.mechanism, hit=hits.get(name, False))
        for name, plan in plans.items()
    }
    outcome: Outcome
    if any(report.hit for report in reports.values()):
        outcome = "limit"
    elif signum is not None:
        outcome = "signaled"
    else:
        outcome = "exited"
    exit_code = exit_code_for_signal(signum) if signum is not None else returncode
    return SandboxResult(
        outcome=outcome,
        exit_code=exit_code,
        signal=signum,
        durations=Durations(total_s=total_s),
        limits=reports,
        output=OutputReport(bytes=output.total, truncated=output.truncated),
        error="cancelled" if verdict.cancelled else None,
    )


def _refuse_unsupported(spec: SandboxSpec) -> None:
    if spec.pass_fds:
        raise UnsupportedPlatform("passing descriptors into a macOS sandbox is not built")
    if spec.network != "none":
        raise UnsupportedPlatform("the macOS profile has no network mode but none (no proxy)")


def run(
    spec: SandboxSpec,
    *,
    stdin: int = 0,
    stdout: int = 1,
    stderr: int = 2,
    cancel_fd: int | None = None,
    filters: Mapping[int, OutputFilter] | None = None,
) -> SandboxResult:
    """Run ``spec`` under its deny-default Seatbelt profile (macOS only).

    Output bound for a descriptor in ``filters`` passes its filter first.

    Raises:
        UnsupportedPlatform: not macOS, no ``/usr/bin/sandbox-exec``, or a spec feature the
            macOS backend does not build (passed descriptors).
        LimitRefused: a requested limit has no acceptable macOS mechanism.
        SpecError: the spec cannot be expressed on macOS (relocated binds, retained copies).
    """
    if not on_macos():
        raise UnsupportedPlatform(
            f"the macOS Seatbelt backend runs only on macOS (this is {sys.platform}); "
            "its profile can still be rendered for review with render_sbpl"
        )
    if not os.access(SANDBOX_EXEC, os.X_OK):
        raise UnsupportedPlatform(f"{SANDBOX_EXEC} is missing: Seatbelt is not available")
    _refuse_unsupported(spec)
    plans = plan_limits(spec.limits, probe_host_limits(), spec.accept_weaker)
    resolved = resolve_spec_paths(spec)
    profile = render_sbpl(resolved)
    private_tmp = os.path.realpath(tempfile.mkdtemp(prefix=PRIVATE_TMP_PREFIX))
    try:
        argv = sandbox_exec_argv(profile, private_tmp, resolved.argv)
        try:
            return supervise(
                argv,
                env=macos_environment(resolved, private_tmp),
                cwd=macos_cwd(resolved),
                plans=plans,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                cancel_fd=cancel_fd,
                filters=filters,
            )
        except OSError as exc:
            return setup_failure(f"cannot start {SANDBOX_EXEC}: {exc.strerror}")
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)


class SandboxProcess:
    """Placeholder for the Linux launcher's process handle: detached launch is Linux-only."""

    def __init__(self, *_args: object, **_kwargs: object) -> None:
        raise UnsupportedPlatform("a detached sandbox (launch/SandboxProcess) is Linux-only")


def launch(spec: SandboxSpec, *_args: object, **_kwargs: object) -> SandboxProcess:
    """Refuse: the detached launch the daemon uses exists only on Linux.

    Raises:
        UnsupportedPlatform: always.
    """
    raise UnsupportedPlatform("a detached sandbox (launch/SandboxProcess) is Linux-only")


def create_file_no_symlinks(path: str, mode: int = 0o644) -> int:
    """Create or truncate ``path`` for writing, refusing a symlink at any component.

    The portable counterpart of the Linux ``openat2(RESOLVE_NO_SYMLINKS)`` version: the
    path is walked from ``/`` one component at a time with ``O_NOFOLLOW``.

    Raises:
        OSError: ELOOP (or ENOTDIR) when a symlink is met, or any open error.
    """
    parts = [part for part in str(Path(path).absolute()).split("/") if part]
    directory_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    dir_fd = os.open("/", directory_flags)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, directory_flags, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(parts[-1], flags, mode, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
