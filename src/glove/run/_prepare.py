"""From parsed options to a :class:`~glove.container.SandboxSpec` (``glove exec`` and ``run``).

One path for both commands: the profile, the flags, and what the caller adds (``glove
run``'s guest directory, channel and the mediator's protected files) become one spec.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

from glove.container import (
    Bind,
    NetworkMode,
    Overrides,
    Profile,
    Protected,
    SandboxSpec,
    SpecError,
    build_spec,
    create_file_no_symlinks,
    load_profile,
    parse_cpus,
    parse_seconds,
    parse_size,
)
from glove.run._options import SandboxOptions

if TYPE_CHECKING:
    from glove.agents import AgentLaunch
    from glove.session import GuestParts

#: Largest fd number accepted for ``--json-status FD``.
MAX_STATUS_FD: Final = 1 << 16


class Additions(NamedTuple):
    """What a caller adds to the spec the options describe (``glove run``'s guest parts)."""

    binds: tuple[Bind, ...] = ()
    env: dict[str, str] = {}  # noqa: RUF012 - a NamedTuple default, never mutated
    pass_fds: dict[int, int] = {}  # noqa: RUF012 - a NamedTuple default, never mutated
    protected: tuple[Protected, ...] = ()
    argv: tuple[str, ...] | None = None


def guest_additions(guest: GuestParts, protected: tuple[Protected, ...]) -> Additions:
    """The session's guest parts (its helper's directory, env, fd and command line) and the
    paths the sandbox must never see, as additions to the spec."""
    return Additions(
        binds=tuple(Bind(source=src, target=dst, mode="ro") for src, dst in guest.binds),
        env=guest.env,
        pass_fds=guest.pass_fds,
        protected=protected,
        argv=guest.argv,
    )


class StatusTarget(NamedTuple):
    """The opened ``--json-status`` destination."""

    fd: int
    path: str | None


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


def parse_env(items: list[str]) -> dict[str, str]:
    """Parse ``KEY=VALUE`` items.

    Raises:
        SpecError: an item without ``=`` or with an empty key.
    """
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(f"--env wants KEY=VALUE, got {item!r}")
        env[key] = value
    return env


def limit_overrides(opts: SandboxOptions) -> dict[str, float | int]:
    """The limits given as flags.

    Raises:
        SpecError: a value that is not a duration, size or count.
    """
    limits: dict[str, float | int] = {}
    for name, flag in (("wall_time", "--wall-time"), ("cpu_time", "--cpu-time")):
        raw = getattr(opts, name)
        if raw is not None:
            try:
                limits[name] = parse_seconds(raw)
            except SpecError as exc:
                raise SpecError(f"{flag}: {exc}") from exc
    for name in ("memory", "disk", "output"):
        raw = getattr(opts, name)
        if raw is not None:
            try:
                limits[name] = parse_size(raw)
            except SpecError as exc:
                raise SpecError(f"--{name}: {exc}") from exc
    if opts.pids is not None:
        try:
            limits["pids"] = int(opts.pids)
        except ValueError as exc:
            raise SpecError(f"--pids wants a count, got {opts.pids!r}") from exc
    if opts.cpus is not None:
        try:
            limits["cpus"] = parse_cpus(opts.cpus)
        except SpecError as exc:
            raise SpecError(f"--cpus: {exc}") from exc
    return limits


def open_status(target: str) -> StatusTarget:
    """Open the ``--json-status`` destination before the sandbox runs.

    A number is an fd the caller already opened (used as is). A path is created without
    following any symlink, and opened *before* the command starts, so neither a link planted
    by an earlier sandbox nor one planted during this run can redirect the write; the path
    is also protected (the sandbox must not see it, or it could swap the file).

    Raises:
        SpecError: the fd number is out of range, or the path cannot be created safely.
    """
    if target.isdigit():
        fd = int(target)
        if fd > MAX_STATUS_FD:
            raise SpecError(f"--json-status fd {fd} is out of range")
        if not _fd_writable(fd):
            raise SpecError(f"--json-status fd {fd} is not open for writing")
        return StatusTarget(os.dup(fd), None)
    path = os.path.normpath(Path.cwd() / target)
    try:
        return StatusTarget(create_file_no_symlinks(path), path)
    except OSError as exc:
        reason = "it goes through a symlink" if exc.errno == errno.ELOOP else exc.strerror
        raise SpecError(f"cannot create --json-status file {target}: {reason}") from exc


def _fd_writable(fd: int) -> bool:
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        return False
    return flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)


def current_directory() -> str:
    """The caller's working directory.

    Raises:
        SpecError: it was removed or cannot be read.
    """
    try:
        return str(Path.cwd())
    except OSError as exc:
        raise SpecError(f"the current directory is not usable: {exc.strerror}") from exc


def prepare_agent_for(opts: SandboxOptions, host_env: dict[str, str]) -> AgentLaunch | None:
    """``--agent``: the agent's install, home and command line (None without ``--agent``).

    Raises:
        ProfileError: the profile cannot be loaded.
        AgentError: the profile is not for this agent, the install or home is unusable.
    """
    if opts.agent is None:
        return None
    from glove.agents import agent_section, prepare_agent

    name = opts.profile or opts.agent
    profile = load_profile(name)
    agent = agent_section(profile, name, opts.agent)
    return prepare_agent(
        profile, agent, list(opts.argv), install_dir=opts.agent_install, host_env=host_env
    )


def build_from_options(
    opts: SandboxOptions,
    *,
    cwd: str,
    host_env: dict[str, str],
    status_path: str | None = None,
    additions: Additions | None = None,
    agent: AgentLaunch | None = None,
    profile: Profile | None = None,
    network: NetworkMode | None = None,
) -> SandboxSpec:
    """Build the sandbox spec the options (and the caller's additions) describe.

    With ``agent`` (``--agent``), the agent's profile is the default profile, its binds and
    variables come before the flags', and its command line is the command. ``profile``
    (already loaded) saves loading it again; ``network`` overrides the mode the options and
    the profile give (a preflight without the egress parts is ``none``).

    Raises:
        SpecError: a malformed flag value or an invalid combination.
        ProfileError: the profile cannot be loaded.
    """
    add = additions or Additions()
    protected = list(add.protected)
    if status_path is not None:
        protected.append(Protected(status_path, "the --json-status file"))
    agent_binds = agent.binds if agent is not None else ()
    agent_env = agent.env if agent is not None else {}
    overrides = Overrides(
        workspace=opts.workspace,
        workspace_mode=opts.workspace_mode,
        binds=(*agent_binds, *(parse_bind(text, cwd) for text in opts.binds), *add.binds),
        uses=tuple(opts.uses),
        env={**agent_env, **parse_env(opts.env), **add.env},
        pty=opts.pty,
        limits=limit_overrides(opts),
        accept_weaker=frozenset(opts.accept_weaker),
        protected=tuple(protected),
    )
    argv = add.argv if add.argv is not None else agent_argv(opts, agent)
    loaded = profile if profile is not None else profile_for(opts, agent)
    spec = build_spec(loaded, argv, cwd=cwd, host_env=host_env, overrides=overrides)
    return msgspec.structs.replace(
        spec, pass_fds=dict(add.pass_fds), network=network or network_mode(opts, loaded)
    )


def profile_for(opts: SandboxOptions, agent: AgentLaunch | None = None) -> Profile:
    """The profile the options name (``--agent``'s own when none is given).

    Raises:
        ProfileError: it cannot be loaded.
    """
    return load_profile(opts.profile or (opts.agent if agent is not None else None))


def network_mode(opts: SandboxOptions, profile: Profile) -> NetworkMode:
    """The network mode of the run: ``--network``, else ``proxy`` when rules are given,
    else the profile's (see :func:`glove.run._egress.network_choice` for the rules)."""
    if opts.network is not None:
        return "proxy" if opts.network == "proxy" else "none"
    return "proxy" if opts.allow or opts.deny else profile.network.mode


def agent_argv(opts: SandboxOptions, agent: AgentLaunch | None) -> tuple[str, ...]:
    """The command line to run: the agent's (``--agent``) or the one given after ``--``."""
    return agent.argv if agent is not None else tuple(opts.argv)
