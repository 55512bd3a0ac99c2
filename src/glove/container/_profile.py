"""Sandbox profiles: a strict TOML format, the embedded ``default``, and CLI overrides.

A profile names binds, the workspace, the environment, the network mode and limits. It is
decoded with msgspec against frozen Structs that forbid unknown fields, so a typo is an error
that carries the path of the bad key (``$.limits.memroy``). Command-line values override the
profile: a limit given on the command line replaces the profile's value and drops the
profile's acceptance of a weaker mechanism for that limit (the caller asked explicitly).

A profile may start from another: ``extends = "default"`` (an embedded name, or a path
relative to the profile's folder) takes that profile and changes only what this one names.
Tables merge key by key; ``bind`` entries are added after the base's (one with the same
target replaces the base's); ``use`` entries, ``env.pass`` names and ``network.allow`` and
``network.deny`` rules are added; every other value (``limits.accept_weaker`` included)
replaces the base's.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from glove.container._limits import (
    SANDBOX_LIMIT_NAMES,
    Limits,
    parse_cpus,
    parse_seconds,
    parse_size,
)
from glove.container._spec import (
    DEFAULT_HOSTNAME,
    DEFAULT_WORKSPACE_TARGET,
    Bind,
    NetworkMode,
    Protected,
    SandboxSpec,
    normalize_inside,
    sandbox_owned,
)
from glove.container._use import expand_use
from glove.container.errors import ProfileError, SpecError

#: The profile used when none is named.
DEFAULT_PROFILE: Final = "default"
#: Largest profile file accepted.
MAX_PROFILE_BYTES: Final = 256 * 1024
#: Longest ``extends`` chain (a cycle is refused before this is reached).
MAX_EXTENDS_DEPTH: Final = 8

#: List keys whose entries a profile adds to its base's (``use``, ``env.pass``, the rules).
_ADDED_LISTS: Final = frozenset({"use", "pass", "allow", "deny"})

SizeValue = int | str
SecondsValue = float | str
CpusValue = float | str


class WorkspaceSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[workspace]``: which host directory becomes the workspace, and where it appears.

    ``target`` unset means the same path inside as on the host (``/tmp/x`` included: it is
    shown inside the sandbox's private /tmp); a workspace that is a path the sandbox owns
    (``/tmp`` itself, anything under ``/proc`` or ``/dev``, the root) appears at
    ``/workspace``.
    """

    enabled: bool = True
    source: str = "."
    target: str | None = None
    mode: Literal["rw", "ro"] = "rw"


class NetworkSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[network]``: the mode, and the egress rules of ``proxy`` mode.

    The same table as :class:`glove.egress.NetworkPolicy` (which loads the rules); it is
    decoded here structurally so that loading a profile does not import the proxy.

    Attributes:
        mode: ``none`` (a namespace with loopback up and no routes) or ``proxy`` (the same
            namespace; connections leave only through the audited egress proxy).
        allow: ``HOST[:PORTS][+OPTION...]`` rules (``docs/egress.md``); only with ``proxy``.
        deny: ``HOST[:PORTS]`` rules; only with ``proxy``.
    """

    mode: NetworkMode = "none"
    allow: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        """Refuse rules in a mode that has no proxy to apply them.

        Raises:
            SpecError: ``allow`` or ``deny`` given with mode ``none``.
        """
        if self.mode == "none" and (self.allow or self.deny):
            raise SpecError('network allow and deny rules need mode = "proxy"')


class EnvSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[env]``: host variables passed through by name, and fixed values."""

    pass_: list[str] = msgspec.field(default_factory=list, name="pass")
    set: dict[str, str] = msgspec.field(default_factory=dict)


class LimitsSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[limits]``: the six limits (sizes take suffixes), the optional CPU rate ``cpus``
    (a decimal number of CPUs) and accepted weaker mechanisms."""

    wall_time: SecondsValue | None = None
    cpu_time: SecondsValue | None = None
    memory: SizeValue | None = None
    pids: int | None = None
    disk: SizeValue | None = None
    output: SizeValue | None = None
    cpus: CpusValue | None = None
    accept_weaker: list[str] = msgspec.field(default_factory=list)


class AgentSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[agent]``: what ``--agent`` adds to the sandbox (read by :mod:`glove.agents`).

    Attributes:
        kind: which adapter writes the agent's own configuration (``claude``, ``codex``).
        command: the agent's executable, looked up on ``PATH`` or in ``--agent-install``.
        packages: the npm package(s) the executable belongs to; each is bound read-only
            with its same-prefix siblings (the platform packages holding native binaries).
        home: the name of the persistent home under ``$XDG_DATA_HOME/glove/agents/``.
        args: start-up flags given before the operator's arguments.
    """

    kind: Literal["claude", "codex"]
    command: str
    packages: list[str]
    home: str
    args: list[str] = msgspec.field(default_factory=list)


class Profile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A decoded profile file (``extends`` already applied)."""

    hostname: str = DEFAULT_HOSTNAME
    workspace: WorkspaceSection = msgspec.field(default_factory=WorkspaceSection)
    network: NetworkSection = msgspec.field(default_factory=NetworkSection)
    env: EnvSection = msgspec.field(default_factory=EnvSection)
    limits: LimitsSection = msgspec.field(default_factory=LimitsSection)
    bind: list[Bind] = msgspec.field(default_factory=list)
    use: list[str] = msgspec.field(default_factory=list)
    agent: AgentSection | None = None


# Profile tables stay raw TOML until they are merged (``extends``); the merged table is then
# decoded strictly into the profile's Struct.
def _toml_table(data: bytes, origin: str) -> dict[str, Any]:
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(f"profile {origin} is larger than {MAX_PROFILE_BYTES} bytes")
    try:
        table = msgspec.toml.decode(data)
    except msgspec.DecodeError as exc:
        raise ProfileError(f"profile {origin}: {exc}") from exc
    if not isinstance(table, dict):  # pragma: no cover - TOML documents are tables
        raise ProfileError(f"profile {origin}: not a table")
    return table


def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Apply ``child`` over ``base`` with the rules in the module docstring."""
    merged = dict(base)
    for key, value in child.items():
        old = merged.get(key)
        if key == "bind" and isinstance(old, list) and isinstance(value, list):
            targets = {_bind_target(item) for item in value}
            merged[key] = [item for item in old if _bind_target(item) not in targets] + value
        elif key in _ADDED_LISTS and isinstance(old, list) and isinstance(value, list):
            merged[key] = old + [item for item in value if item not in old]
        elif isinstance(old, dict) and isinstance(value, dict):
            merged[key] = _merge(old, value)
        else:
            merged[key] = value
    return merged


def _bind_target(item: object) -> object:
    if isinstance(item, dict):
        target = item.get("target") or item.get("source")
        return normalize_inside(target) if isinstance(target, str) else target
    return None


def _resolve_extends(
    table: dict[str, Any], origin: str, folder: Path | None, seen: tuple[str, ...]
) -> dict[str, Any]:
    parent = table.pop("extends", None)
    if parent is None:
        return table
    if not isinstance(parent, str) or not parent:
        raise ProfileError(f"profile {origin}: `extends` must name a profile")
    if len(seen) >= MAX_EXTENDS_DEPTH:
        raise ProfileError(f"profile {origin}: `extends` chain longer than {MAX_EXTENDS_DEPTH}")
    base_data, base_origin, base_folder = _read_profile(parent, folder)
    if base_origin in seen:
        chain = " -> ".join((*seen, base_origin))
        raise ProfileError(f"profile {origin}: `extends` makes a cycle ({chain})")
    base = _resolve_extends(
        _toml_table(base_data, base_origin), base_origin, base_folder, (*seen, base_origin)
    )
    return _merge(base, table)


def decode_profile(data: bytes, origin: str, *, folder: Path | None = None) -> Profile:
    """Strictly decode profile TOML, applying ``extends`` (paths relative to ``folder``).

    Raises:
        ProfileError: the TOML is malformed, a key is unknown or mistyped (the message
            names its path, such as ``$.limits.memroy``), or ``extends`` is unusable.
    """
    table = _resolve_extends(_toml_table(data, origin), origin, folder, (origin,))
    try:
        return msgspec.convert(table, Profile)
    except (msgspec.ValidationError, SpecError) as exc:
        raise ProfileError(f"profile {origin}: {exc}") from exc


def _read_profile(name_or_path: str, folder: Path | None) -> tuple[bytes, str, Path | None]:
    """Read a profile's bytes; return them, its origin label and its folder (for extends)."""
    name = name_or_path
    if "/" in name or name.endswith(".toml"):
        path = Path(name) if folder is None or Path(name).is_absolute() else folder / name
        try:
            return path.read_bytes(), str(path), path.resolve().parent
        except OSError as exc:
            raise ProfileError(f"cannot read profile {path}: {exc.strerror}") from exc
    if not name.replace("-", "_").isidentifier():  # a plain name: no path tricks
        raise ProfileError(f"no embedded profile named {name!r}")
    resource = _profiles_folder() / f"{name}.toml"
    try:
        return resource.read_bytes(), f"<embedded {name}>", None
    except OSError as exc:
        raise ProfileError(
            f"no embedded profile named {name!r} (embedded: {', '.join(embedded_profiles())})"
        ) from exc


def embedded_profiles() -> list[str]:
    """The names of the profiles shipped inside the package."""
    return sorted(path.stem for path in _profiles_folder().glob("*.toml"))


def load_profile(name_or_path: str | None) -> Profile:
    """Load an embedded profile by name, or a profile file by path.

    A value containing ``/`` or ending in ``.toml`` is a path; anything else names an
    embedded profile (``default``).

    Raises:
        ProfileError: no such profile, unreadable, or fails strict decoding.
    """
    name = name_or_path or DEFAULT_PROFILE
    embedded = "/" not in name and not name.endswith(".toml")
    packed = _embedded_profiles.get(name) if embedded else None
    if packed is not None:  # a fresh copy: a Profile holds lists a caller may change
        return msgspec.msgpack.decode(packed, type=Profile)
    profile = _packed_profile(name) if embedded else None
    if profile is None:
        data, origin, folder = _read_profile(name, None)
        profile = decode_profile(data, origin, folder=folder)
    if embedded:
        _embedded_profiles[name] = msgspec.msgpack.encode(profile)
    return profile


#: Each embedded profile, decoded once (package data: the same for every launch), packed.
_embedded_profiles: dict[str, bytes] = {}

#: The embedded profiles decoded ahead of time (:func:`pack_embedded_profiles`), as JSON,
#: with the checksum of the TOML files they were decoded from. A CLI process takes its
#: profile from here (about 0.2 ms) rather than import tomllib and decode the TOML (about
#: 8 ms here); only while the checksum matches the TOML beside it, so an edited profile is
#: never served stale (it is decoded from its TOML until the file is packed again).
PACKED_PROFILES: Final = "packed.json"


class _Packed(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    checksum: int
    #: Each profile's JSON, decoded (and its binds checked) only when it is asked for.
    profiles: dict[str, msgspec.Raw]


def _profiles_folder() -> Path:
    return Path(__file__).parent / "profiles"


def _toml_checksum(folder: Path) -> int:
    """CRC-32 of every embedded profile's name and bytes (a change check, not a seal: the
    packed file is package data, as trusted as this module)."""
    checksum = 0
    for path in sorted(folder.iterdir()):
        if path.suffix == ".toml":
            checksum = zlib.crc32(path.name.encode() + b"\0" + path.read_bytes(), checksum)
    return checksum


def _packed_profile(name: str) -> Profile | None:
    """The embedded profile ``name`` from the packed file, or None (no such profile packed,
    no file, or the TOML changed since it was packed)."""
    folder = _profiles_folder()
    try:
        packed = msgspec.json.decode((folder / PACKED_PROFILES).read_bytes(), type=_Packed)
        raw = packed.profiles.get(name)
        if raw is None or packed.checksum != _toml_checksum(folder):
            return None
        return msgspec.json.decode(raw, type=Profile)
    except (OSError, msgspec.DecodeError, SpecError):
        return None


def pack_embedded_profiles() -> bytes:
    """Decode every embedded profile from its TOML and return the packed file's bytes
    (written to ``profiles/packed.json`` when a profile changes; a test checks it is)."""
    folder = _profiles_folder()
    profiles = {
        name: msgspec.Raw(msgspec.json.encode(decode_profile(*_read_profile(name, None)[:2])))
        for name in embedded_profiles()
    }
    packed = _Packed(_toml_checksum(folder), profiles)
    return msgspec.json.format(msgspec.json.encode(packed), indent=1) + b"\n"


class Overrides(msgspec.Struct, frozen=True):
    """Command-line values that override a profile; ``None`` keeps the profile's value.

    ``uses`` are added to the profile's ``use`` list; ``protected`` are host paths the
    sandbox must never show (:class:`~glove.container.Protected`).
    """

    workspace: str | None = None
    workspace_mode: Literal["rw", "ro"] | None = None
    binds: tuple[Bind, ...] = ()
    uses: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    pty: bool = False
    limits: dict[str, float | int] = msgspec.field(default_factory=dict)
    accept_weaker: frozenset[str] = frozenset()
    protected: tuple[Protected, ...] = ()


def _profile_limits(section: LimitsSection) -> dict[str, float | int]:
    values: dict[str, float | int] = {}
    for name in SANDBOX_LIMIT_NAMES:
        raw = getattr(section, name)
        if raw is None:
            continue
        if name in ("wall_time", "cpu_time"):
            values[name] = parse_seconds(raw)
        elif name == "cpus":
            values[name] = parse_cpus(raw)
        elif name == "pids":
            values[name] = int(raw)
        else:
            values[name] = parse_size(raw)
    return values


def workspace_target(profile: Profile, workspace: str) -> str:
    """Where ``workspace`` appears inside: the profile's target, else the same path.

    A path below ``/tmp`` keeps its path (inside the sandbox's private /tmp). A path the
    sandbox owns (``/tmp`` itself, ``/proc``, ``/dev``) or the root cannot appear at the same
    path, so it appears at ``/workspace``.
    """
    if profile.workspace.target is not None:
        return profile.workspace.target
    inside = normalize_inside(workspace)
    if sandbox_owned(inside) is not None:
        return DEFAULT_WORKSPACE_TARGET
    return inside


def _working_directory(cwd: str, workspace: str | None, target: str) -> str | None:
    """Start in the same place inside when the caller's directory is in the workspace."""
    if workspace is None:
        return None
    relative = os.path.relpath(os.path.normpath(cwd), workspace)
    if relative == "." or relative.startswith(".."):
        return None
    return normalize_inside(f"{target}/{relative}")


def build_spec(
    profile: Profile,
    argv: list[str] | tuple[str, ...],
    *,
    cwd: str,
    host_env: dict[str, str],
    overrides: Overrides | None = None,
) -> SandboxSpec:
    """Combine a profile, command-line overrides and the caller's context into a spec.

    ``cwd`` resolves a relative workspace source and ``use`` directory; ``host_env``
    supplies the variables the profile passes through by name. ``PATH`` gets each used
    directory's ``bin/`` in front.

    Raises:
        SpecError: the combination is invalid (bad size, relative path, missing ``use``).
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
    use_binds: list[Bind] = []
    use_path: list[str] = []
    for raw in (*profile.use, *over.uses):
        expansion = expand_use(raw, cwd)
        use_binds.extend(expansion.binds)
        use_path.extend(expansion.path)
        env.update(expansion.env)
    if use_path:
        env["PATH"] = ":".join([*use_path, env.get("PATH", os.defpath)])
    env.update(over.env)
    try:
        limits = msgspec.convert(limit_values, Limits)
    except msgspec.ValidationError as exc:
        raise SpecError(f"bad limits: {exc}") from exc
    target = (
        workspace_target(profile, workspace) if workspace is not None else DEFAULT_WORKSPACE_TARGET
    )
    return SandboxSpec(
        argv=tuple(argv),
        binds=(*profile.bind, *use_binds, *over.binds),
        workspace=workspace,
        workspace_target=target,
        workspace_mode=over.workspace_mode or profile.workspace.mode,
        cwd=_working_directory(cwd, workspace, target),
        env=env,
        network=profile.network.mode,
        pty=over.pty,
        limits=limits,
        accept_weaker=frozenset(accept),
        hostname=profile.hostname,
        protected=over.protected,
    )
