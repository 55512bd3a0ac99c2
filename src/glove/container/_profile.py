"""Sandbox profiles: a strict TOML format, the embedded ``default``, and CLI overrides.

A profile names binds, the workspace, the environment, the network mode and limits. It is
decoded with msgspec against frozen Structs that forbid unknown fields, so a typo is an error
that carries the path of the bad key (``$.limits.memroy``). Command-line values override the
profile: a limit given on the command line replaces the profile's value and drops the
profile's acceptance of a weaker mechanism for that limit (the caller asked explicitly).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, Literal

import msgspec

from glove.container._limits import LIMIT_NAMES, Limits, parse_seconds, parse_size
from glove.container._spec import DEFAULT_HOSTNAME, DEFAULT_WORKSPACE_TARGET, Bind, SandboxSpec
from glove.container.errors import ProfileError, SpecError

#: The profile used when none is named.
DEFAULT_PROFILE: Final = "default"
#: Largest profile file accepted.
MAX_PROFILE_BYTES: Final = 256 * 1024

SizeValue = int | str


class WorkspaceSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[workspace]``: which host directory becomes the workspace."""

    enabled: bool = True
    source: str = "."
    target: str = DEFAULT_WORKSPACE_TARGET
    mode: Literal["rw", "ro"] = "rw"


class NetworkSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[network]``: only ``none`` (a namespace with loopback up and no routes) exists."""

    mode: Literal["none"] = "none"


class EnvSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[env]``: host variables passed through by name, and fixed values."""

    pass_: list[str] = msgspec.field(default_factory=list, name="pass")
    set: dict[str, str] = msgspec.field(default_factory=dict)


class LimitsSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[limits]``: the six limits (sizes take suffixes) and accepted weaker mechanisms."""

    wall_time: float | None = None
    cpu_time: float | None = None
    memory: SizeValue | None = None
    pids: int | None = None
    disk: SizeValue | None = None
    output: SizeValue | None = None
    accept_weaker: list[str] = msgspec.field(default_factory=list)


class Profile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A decoded profile file."""

    hostname: str = DEFAULT_HOSTNAME
    workspace: WorkspaceSection = msgspec.field(default_factory=WorkspaceSection)
    network: NetworkSection = msgspec.field(default_factory=NetworkSection)
    env: EnvSection = msgspec.field(default_factory=EnvSection)
    limits: LimitsSection = msgspec.field(default_factory=LimitsSection)
    bind: list[Bind] = msgspec.field(default_factory=list)


def decode_profile(data: bytes, origin: str) -> Profile:
    """Strictly decode profile TOML.

    Raises:
        ProfileError: the TOML is malformed or a key is unknown or mistyped.
    """
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(f"profile {origin} is larger than {MAX_PROFILE_BYTES} bytes")
    try:
        return msgspec.toml.decode(data, type=Profile)
    except (msgspec.DecodeError, SpecError) as exc:
        raise ProfileError(f"profile {origin}: {exc}") from exc


def load_profile(name_or_path: str | None) -> Profile:
    """Load an embedded profile by name, or a profile file by path.

    A value containing ``/`` or ending in ``.toml`` is a path; anything else names an
    embedded profile (``default``).

    Raises:
        ProfileError: no such profile, unreadable, or fails strict decoding.
    """
    name = name_or_path or DEFAULT_PROFILE
    if "/" in name or name.endswith(".toml"):
        try:
            data = Path(name).read_bytes()
        except OSError as exc:
            raise ProfileError(f"cannot read profile {name}: {exc.strerror}") from exc
        return decode_profile(data, name)
    if not name.isidentifier():
        raise ProfileError(f"no embedded profile named {name!r}")
    resource = Path(__file__).parent / "profiles" / f"{name}.toml"
    try:
        data = resource.read_bytes()
    except OSError as exc:
        raise ProfileError(f"no embedded profile named {name!r}") from exc
    return decode_profile(data, f"<embedded {name}>")


class Overrides(msgspec.Struct, frozen=True):
    """Command-line values that override a profile; ``None`` keeps the profile's value."""

    workspace: str | None = None
    workspace_mode: Literal["rw", "ro"] | None = None
    binds: tuple[Bind, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    pty: bool = False
    limits: dict[str, float | int] = msgspec.field(default_factory=dict)
    accept_weaker: frozenset[str] = frozenset()


def _profile_limits(section: LimitsSection) -> dict[str, float | int]:
    values: dict[str, float | int] = {}
    for name in LIMIT_NAMES:
        raw = getattr(section, name)
        if raw is None:
            continue
        if name in ("wall_time", "cpu_time"):
            values[name] = parse_seconds(raw)
        elif name == "pids":
            values[name] = int(raw)
        else:
            values[name] = parse_size(raw)
    return values


def build_spec(
    profile: Profile,
    argv: list[str] | tuple[str, ...],
    *,
    cwd: str,
    host_env: dict[str, str],
    overrides: Overrides | None = None,
) -> SandboxSpec:
    """Combine a profile, command-line overrides and the caller's context into a spec.

    ``cwd`` resolves a relative workspace source; ``host_env`` supplies the variables the
    profile passes through by name.

    Raises:
        SpecError: the combination is invalid (bad size, relative path, ...).
        ProfileError: the profile's values fail validation.
    """
    over = overrides or Overrides()
    try:
        limit_values = _profile_limits(profile.limits)
    except SpecError as exc:
        raise ProfileError(f"profile limits: {exc}") from exc
    accept = set(profile.limits.accept_weaker)
    for name, value in over.limits.items():
        limit_values[name] = value
        accept.discard(name)
    accept |= over.accept_weaker
    workspace: str | None = None
    if over.workspace is not None:
        workspace = os.path.normpath(Path(cwd, over.workspace))
    elif profile.workspace.enabled:
        workspace = os.path.normpath(Path(cwd, profile.workspace.source))
    env = {key: host_env[key] for key in profile.env.pass_ if key in host_env}
    env.update(profile.env.set)
    env.update(over.env)
    try:
        limits = msgspec.convert(limit_values, Limits)
    except msgspec.ValidationError as exc:
        raise SpecError(f"bad limits: {exc}") from exc
    return SandboxSpec(
        argv=tuple(argv),
        binds=(*profile.bind, *over.binds),
        workspace=workspace,
        workspace_target=profile.workspace.target,
        workspace_mode=over.workspace_mode or profile.workspace.mode,
        env=env,
        network=profile.network.mode,
        pty=over.pty,
        limits=limits,
        accept_weaker=frozenset(accept),
        hostname=profile.hostname,
    )
