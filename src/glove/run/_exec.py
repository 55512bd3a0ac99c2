"""``glove exec`` without the CLI framework: options in, sandbox run, exit code out.

Kept apart from the typer module so it can be tested directly and so ``glove --help`` does
not import the sandbox.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
from pathlib import Path
from typing import Final, Literal

import msgspec

from glove.container import (
    Bind,
    Overrides,
    SandboxError,
    SandboxResult,
    SpecError,
    build_spec,
    create_file_no_symlinks,
    load_profile,
    parse_seconds,
    parse_size,
    run,
)
from glove.container._result import setup_failure

#: Largest fd number accepted for ``--json-status FD``.
MAX_STATUS_FD: Final = 1 << 16


class ExecOptions(msgspec.Struct, frozen=True):
    """The parsed ``glove exec`` command line."""

    argv: list[str]
    profile: str | None = None
    workspace: str | None = None
    workspace_mode: Literal["rw", "ro"] | None = None
    binds: list[str] = msgspec.field(default_factory=list)
    env: list[str] = msgspec.field(default_factory=list)
    network: str = "none"
    pty: bool = False
    wall_time: str | None = None
    cpu_time: str | None = None
    memory: str | None = None
    pids: str | None = None
    disk: str | None = None
    output: str | None = None
    accept_weaker: list[str] = msgspec.field(default_factory=list)
    json_status: str | None = None


def parse_bind(text: str, cwd: str) -> Bind:
    """Parse ``SRC[:DST[:ro|rw]]``; a relative SRC is taken from ``cwd`` (links not resolved).

    Raises:
        SpecError: malformed text.
    """
    parts = text.split(":")
    if len(parts) > 3 or not parts[0]:
        raise SpecError(f"--bind wants SRC[:DST[:ro|rw]], got {text!r}")
    # Normalized, never resolved: a symlink on the way must be refused, not followed.
    source = os.path.normpath(Path(cwd, parts[0]))
    target = parts[1] if len(parts) > 1 and parts[1] else source
    mode = parts[2] if len(parts) > 2 else "ro"
    if mode not in ("ro", "rw"):
        raise SpecError(f"--bind mode must be ro or rw, got {mode!r}")
    return Bind(source=source, target=target, mode=mode)  # type: ignore[arg-type]


def _parse_env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(f"--env wants KEY=VALUE, got {item!r}")
        env[key] = value
    return env


def _limit_overrides(opts: ExecOptions) -> dict[str, float | int]:
    limits: dict[str, float | int] = {}
    if opts.wall_time is not None:
        limits["wall_time"] = parse_seconds(opts.wall_time)
    if opts.cpu_time is not None:
        limits["cpu_time"] = parse_seconds(opts.cpu_time)
    for name in ("memory", "disk", "output"):
        raw = getattr(opts, name)
        if raw is not None:
            limits[name] = parse_size(raw)
    if opts.pids is not None:
        try:
            limits["pids"] = int(opts.pids)
        except ValueError as exc:
            raise SpecError(f"--pids wants a count, got {opts.pids!r}") from exc
    return limits


def _open_status(target: str) -> int:
    """Open the ``--json-status`` destination before the sandbox runs.

    A number is an fd the caller already opened (used as is). A path is created without
    following any symlink, and opened *before* the command starts, so neither a link planted
    by an earlier sandbox nor one planted during this run can redirect the write.

    Raises:
        SpecError: the fd number is out of range, or the path cannot be created safely.
    """
    if target.isdigit():
        fd = int(target)
        if fd > MAX_STATUS_FD:
            raise SpecError(f"--json-status fd {fd} is out of range")
        if not _fd_writable(fd):
            raise SpecError(f"--json-status fd {fd} is not open for writing")
        return os.dup(fd)
    try:
        return create_file_no_symlinks(os.path.normpath(Path.cwd() / target))
    except OSError as exc:
        reason = "it goes through a symlink" if exc.errno == errno.ELOOP else exc.strerror
        raise SpecError(f"cannot create --json-status file {target}: {reason}") from exc


def _fd_writable(fd: int) -> bool:
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        return False
    return flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)


def exec_command(opts: ExecOptions) -> int:
    """Run ``glove exec`` and return its exit code (see ``docs/sandbox.md``)."""
    result: SandboxResult
    status_fd = -1
    try:
        if opts.json_status is not None:
            status_fd = _open_status(opts.json_status)
        if opts.network != "none":
            raise SpecError(f"--network {opts.network!r}: only 'none' is available")
        try:
            cwd = str(Path.cwd())
        except OSError as exc:
            raise SpecError(f"the current directory is not usable: {exc.strerror}") from exc
        overrides = Overrides(
            workspace=opts.workspace,
            workspace_mode=opts.workspace_mode,
            binds=tuple(parse_bind(text, cwd) for text in opts.binds),
            env=_parse_env(opts.env),
            pty=opts.pty,
            limits=_limit_overrides(opts),
            accept_weaker=frozenset(opts.accept_weaker),
        )
        profile = load_profile(opts.profile)
        spec = build_spec(
            profile, opts.argv, cwd=cwd, host_env=dict(os.environ), overrides=overrides
        )
        result = run(
            spec, stdin=sys.stdin.fileno(), stdout=sys.stdout.fileno(), stderr=sys.stderr.fileno()
        )
    except SandboxError as exc:
        result = setup_failure(str(exc))
    if result.outcome in ("setup_error", "exec_error", "limit") and result.error:
        sys.stderr.write(f"glove exec: {result.error}\n")
    if status_fd >= 0:
        try:
            os.write(status_fd, result.to_json())
        except OSError as exc:
            sys.stderr.write(f"glove exec: cannot write --json-status: {exc.strerror}\n")
        finally:
            os.close(status_fd)
    return result.exit_code
