"""The macOS backend's launch pieces: the plan, the limits, and the POSIX supervisor.

``supervise`` is plain POSIX (rlimits between fork and exec, a process-group watchdog,
output accounting); these tests drive it on Linux with real processes. On macOS its argv
is the ``sandbox-exec`` command line, which is not executed here.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from glove.container import (
    Bind,
    LimitRefused,
    Limits,
    SandboxSpec,
    UnsupportedPlatform,
    build_spec,
    load_profile,
    plan_limits,
)
from glove.container.macos import (
    SANDBOX_EXEC,
    create_file_no_symlinks,
    macos_cwd,
    macos_environment,
    probe_host_limits,
    render_sbpl,
    resolve_spec_paths,
    run,
    sandbox_exec_argv,
    supervise,
)

MACOS = probe_host_limits()


def _plans(limits: Limits, accept: frozenset[str] = frozenset({"all"})):  # type: ignore[no-untyped-def]
    return plan_limits(limits, MACOS, accept)


def _sink(tmp_path: Path, name: str) -> int:
    return os.open(tmp_path / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)


def test_run_is_refused_on_linux() -> None:
    """Applying the profile anywhere but macOS is UnsupportedPlatform, before anything runs."""
    with pytest.raises(UnsupportedPlatform, match="only on macOS"):
        run(SandboxSpec(argv=("true",)))


@pytest.mark.parametrize(
    ("limits", "mechanism"),
    [
        (Limits(wall_time=5), "watchdog-process-group"),
        (Limits(cpu_time=5), "rlimit-cpu-per-process"),
        (Limits(pids=64), "rlimit-nproc-per-user"),
        (Limits(disk=1 << 20), "rlimit-fsize-per-file"),
    ],
)
def test_weaker_macos_limits_are_refused_unless_accepted(limits: Limits, mechanism: str) -> None:
    """Per-process or per-group mechanisms need --accept-weaker, exactly as on Linux."""
    name = next(n for n in ("wall_time", "cpu_time", "pids", "disk") if limits.get(n))
    with pytest.raises(LimitRefused, match=f"accept-weaker {name}"):
        plan_limits(limits, MACOS, frozenset())
    plan = plan_limits(limits, MACOS, frozenset({name}))[name]
    assert (plan.mechanism, plan.full) == (mechanism, False)


def test_output_is_enforced_in_full_and_memory_is_refused_outright() -> None:
    """Output accounting bounds everything; memory has no macOS mechanism, even if accepted."""
    assert _plans(Limits(output=10))["output"].full
    with pytest.raises(LimitRefused, match="RLIMIT_AS"):
        plan_limits(Limits(memory=64 << 20), MACOS, frozenset({"all"}))


def test_default_profile_is_refused_on_macos_for_memory() -> None:
    """The embedded default sets all six limits; macOS cannot enforce them and says so."""
    spec = build_spec(load_profile(None), ["sh"], cwd="/Users/dev", host_env={})
    with pytest.raises(LimitRefused) as info:
        plan_limits(spec.limits, MACOS, spec.accept_weaker)
    assert info.value.limit in ("wall_time", "memory", "pids", "disk")
    with pytest.raises(LimitRefused) as info:
        plan_limits(spec.limits, MACOS, frozenset({"all"}))
    assert info.value.limit == "memory"  # no mechanism at all, even with --accept-weaker


def test_sandbox_exec_argv_applies_the_profile_before_the_command() -> None:
    """sandbox-exec is absolute, gets the tmp parameter and the profile, then -- CMD."""
    argv = sandbox_exec_argv("(version 1)", "/private/var/folders/x/glove-1", ("sh", "-c", "x"))
    assert argv == [
        SANDBOX_EXEC, "-D", "GLOVE_PRIVATE_TMP=/private/var/folders/x/glove-1", "-p",
        "(version 1)", "--", "sh", "-c", "x",
    ]  # fmt: skip


def test_environment_maps_tmp_to_the_private_dir() -> None:
    """TMPDIR is always the private dir, and values that were exactly /tmp are moved too."""
    spec = SandboxSpec(argv=("sh",), env={"HOME": "/tmp", "TMPDIR": "/tmp", "X": "/tmpx"})
    env = macos_environment(spec, "/private/var/folders/g/glove-2")
    assert env == {
        "HOME": "/private/var/folders/g/glove-2",
        "TMPDIR": "/private/var/folders/g/glove-2",
        "X": "/tmpx",
    }


def test_working_directory_maps_the_workspace_target_to_its_source() -> None:
    """/workspace (and below) is the workspace's host path; other cwds are kept."""
    spec = SandboxSpec(argv=("sh",), workspace="/Users/dev/p")
    assert macos_cwd(spec) == "/Users/dev/p"
    assert macos_cwd(SandboxSpec(argv=("sh",), workspace="/Users/dev/p", cwd="/workspace/src")) == (
        "/Users/dev/p/src"
    )
    assert macos_cwd(SandboxSpec(argv=("sh",), workspace="/Users/dev/p", cwd="/workspacex")) == (
        "/workspacex"
    )
    assert macos_cwd(SandboxSpec(argv=("sh",))) == "/"


def test_resolve_spec_paths_follows_links_and_drops_missing_optionals() -> None:
    """The profile is written for real paths: links are resolved, absent optionals dropped."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as name:  # a bind may not be in /tmp
        _check_resolution(Path(name))


def _check_resolution(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    spec = SandboxSpec(
        argv=("sh",),
        workspace=str(tmp_path / "link"),
        binds=(Bind(str(tmp_path / "link")), Bind(str(tmp_path / "absent"), optional=True)),
    )
    resolved = resolve_spec_paths(spec)
    assert resolved.workspace == str(real)
    assert [b.source for b in resolved.binds] == [str(real)]
    assert f'(subpath "/private{real}")' in render_sbpl(resolved)  # /var is /private/var


def test_supervise_passes_output_and_exit_status(tmp_path: Path) -> None:
    """A command's stdout and stderr are passed on and counted; its exit code is the result."""
    out, err = _sink(tmp_path, "out"), _sink(tmp_path, "err")
    try:
        result = supervise(
            ["/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"],
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            plans=_plans(Limits(output=1000)),
            stdout=out,
            stderr=err,
        )
    finally:
        os.close(out)
        os.close(err)
    assert (result.outcome, result.exit_code) == ("exited", 3)
    assert (tmp_path / "out").read_text() == "hello\n"
    assert (tmp_path / "err").read_text() == "oops\n"
    assert result.output.bytes == 11
    assert not result.output.truncated


def test_supervise_passes_a_terminals_output_through_its_filter(tmp_path: Path) -> None:
    """Output bound for a descriptor with a filter (glove exec on a terminal) loses its
    clipboard write, keeps its text and colour and the byte the filter held to the end,
    and the output limit counts what the command wrote."""
    from glove.session import TerminalFilter

    out, err = _sink(tmp_path, "out"), _sink(tmp_path, "err")
    flt = TerminalFilter("pty")
    written = b"a\033[1mb\033]52;c;cHduZWQ=\007c\303"  # ends inside a UTF-8 character
    try:
        result = supervise(
            ["/bin/sh", "-c", r"printf 'a\033[1mb\033]52;c;cHduZWQ=\007c\303'; printf m >&2"],
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            plans=_plans(Limits(output=1000)),
            stdout=out,
            stderr=err,
            filters={out: flt},
        )
    finally:
        os.close(out)
        os.close(err)
    assert (result.outcome, result.exit_code) == ("exited", 0)
    assert (tmp_path / "out").read_bytes() == b"a\033[1mbc\303"
    assert (tmp_path / "err").read_bytes() == b"m"
    assert flt.dropped >= 1
    assert result.output.bytes == len(written) + 1


def test_output_limit_cuts_exactly_and_kills(tmp_path: Path) -> None:
    """Output is cut at the cap and the command is killed: outcome limit, output hit."""
    out = _sink(tmp_path, "out")
    try:
        result = supervise(
            ["/usr/bin/yes"],
            env={},
            cwd="/",
            plans=_plans(Limits(output=1000, wall_time=30)),
            stdout=out,
        )
    finally:
        os.close(out)
    assert result.outcome == "limit"
    assert result.limits["output"].hit
    assert result.output.bytes == 1000
    assert len((tmp_path / "out").read_bytes()) == 1000
    assert result.exit_code == 128 + signal.SIGKILL


def test_wall_time_watchdog_kills_the_process_group(tmp_path: Path) -> None:
    """The watchdog kills the whole process group (a background child too) at the deadline."""
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    result = supervise(
        ["/bin/sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"],
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        plans=_plans(Limits(wall_time=0.5)),
    )
    assert time.monotonic() - started < 60  # the 0.5 s limit, not the child's 300 s
    assert result.outcome == "limit"
    assert result.limits["wall_time"].hit
    assert result.limits["wall_time"].mechanism == "watchdog-process-group"
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{child}/stat").read_text().split()
        if stat[2] == "Z":
            break
        time.sleep(0.05)
    assert (
        not Path(f"/proc/{child}").exists()
        or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"
    )


def test_cpu_rlimit_ends_a_busy_loop(tmp_path: Path) -> None:
    """RLIMIT_CPU (per process, accepted as weaker) stops a spinning command: cpu_time hit."""
    result = supervise(
        [sys.executable, "-c", "while True: pass"],
        env={},
        cwd="/",
        plans=_plans(Limits(cpu_time=1, wall_time=30)),
    )
    assert result.outcome == "limit"
    assert result.limits["cpu_time"].hit
    assert result.signal in (signal.SIGXCPU, signal.SIGKILL)


def test_file_size_rlimit_stops_a_large_write(tmp_path: Path) -> None:
    """RLIMIT_FSIZE (per file, accepted as weaker) stops a file past the disk value: SIGXFSZ."""
    target = tmp_path / "big"
    result = supervise(
        ["/bin/sh", "-c", f"exec head -c 200000 /dev/zero > {target}"],
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        plans=_plans(Limits(disk=64 * 1024, wall_time=30)),
    )
    assert result.limits["disk"].hit
    assert target.stat().st_size <= 64 * 1024


def test_cancel_fd_kills_the_command() -> None:
    """A byte on cancel_fd kills the process group at once."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"x")
        started = time.monotonic()
        result = supervise(["/bin/sleep", "300"], env={}, cwd="/", plans={}, cancel_fd=read_end)
        assert time.monotonic() - started < 60  # at once, not the command's 300 s
        assert result.error == "cancelled"
        assert result.signal == signal.SIGKILL
    finally:
        os.close(read_end)
        os.close(write_end)


def test_portable_create_file_no_symlinks_refuses_a_linked_parent(tmp_path: Path) -> None:
    """The macOS create_file_no_symlinks walks with O_NOFOLLOW: a linked directory is refused."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(OSError):
        create_file_no_symlinks(str(tmp_path / "link" / "status.json"))
    fd = create_file_no_symlinks(str(real / "status.json"), 0o600)
    os.close(fd)
    assert (real / "status.json").exists()
