"""``gloved.toml``: the owner's local configuration of the daemon, decoded strictly.

It is the only place a command line, an environment or a host path comes from; a plan
names a harness and exposures by identifier. The shape (see ``deploy/gloved.toml`` for the
commented template ``glove setup`` writes)::

    protected_root = "/home/alice/projects"   # optional: exposures must lie under it
    accept_weaker = ["memory", "cpu_time"]    # limits a per-process mechanism may enforce

    [limits]                                  # the local maxima a plan may ask for
    wall_time_s = 3600
    cpu_time_s = 1800
    memory_bytes = 4294967296
    pids = 512
    disk_bytes = 8589934592
    output_bytes = 67108864

    [sessions]
    max_running = 64                          # sessions alive at once; more are refused

    [terminal]
    transcript_bytes = 16777216               # each PTY session's transcript ring on disk

    [exposures]                               # directories exposed although they are not
    allow_special = ["/run/foo"]              # the owner's alone, or on a runtime/kernel fs

    [projections.skill]                       # a library bundle a plan may project, by
    target = "/skills/skill.md"               # alias: the file's path inside the sandbox

    [harnesses.demo]                          # the only source of command lines
    argv = ["/bin/sh", "-c", "echo hello"]
    env = { LANG = "C.UTF-8" }                # the command's environment (plus the sandbox's)
    profile = "default"                       # a sandbox profile (name or path)

    [network]                                 # the owner's egress rules (docs/egress.md)
    allow = ["pypi.org:443", "*.github.com:443+sni"]   # a plan's allow rules must lie inside
    deny = ["gist.github.com"]                # always applied; proxy mode is offered when
                                              # allow is not empty

    [remote_backend]                          # construction-only (docs/remote.md)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import msgspec

from glove.config.errors import GlovedConfigError

MAX_CONFIG_BYTES: Final = 256 * 1024
HARNESS_ID_RE: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DEFAULT_MAX_RUNNING: Final = 64
MAX_RUNNING_CEILING: Final = 1024
#: Each PTY session's transcript ring: the default, and the bounds gloved.toml may set and
#: a ring file read back must lie within (``glove.session``'s transcript format reads them).
DEFAULT_TRANSCRIPT_BYTES: Final = 16 * 1024 * 1024
MIN_RING_BYTES: Final = 256 * 1024
MAX_RING_BYTES: Final = 4 * 1024**3
#: Directories ``[exposures] allow_special`` may list.
MAX_ALLOW_SPECIAL: Final = 64
#: Most ``[projections.ALIAS]`` tables gloved.toml may hold.
MAX_PROJECTIONS: Final = 64
#: Sandbox trees a projection target never lies in (kernel and device trees the sandbox
#: builds itself); the sandbox's workspace and the other targets are refused as well.
PROJECTION_FORBIDDEN_TREES: Final = ("/proc", "/dev", "/sys")
#: Where a sandbox's workspace appears (glove.container's default workspace target): no
#: projection target lies on, under or above it.
WORKSPACE_TARGET: Final = "/workspace"


class LocalLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The local maxima of the six limits (seconds and bytes)."""

    wall_time_s: float = 86400.0
    cpu_time_s: float = 28800.0
    memory_bytes: int = 8 * 1024**3
    pids: int = 4096
    disk_bytes: int = 8 * 1024**3
    output_bytes: int = 4 * 1024**3


class HarnessConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One harness: what runs when a plan names it."""

    argv: list[str]
    env: dict[str, str] = msgspec.field(default_factory=dict)
    profile: str = "default"
    #: An MCP configuration (``glove run --config``'s file: upstreams and policy), relative
    #: to gloved.toml's directory: sessions of this harness get those tools, mediated.
    mcp: str | None = None


class SessionsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[sessions]``: how many may be alive at once."""

    max_running: int = DEFAULT_MAX_RUNNING


class NetworkConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[network]``: the owner's egress rules, which a plan's ``proxy`` network can only
    narrow (``glove.plan.LocalPolicy.egress_allow`` / ``egress_deny``)."""

    allow: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)

    def modes(self) -> frozenset[str]:
        """The network modes offered to plans: ``none``, and ``proxy`` when anything is allowed."""
        return frozenset({"none", "proxy"}) if self.allow else frozenset({"none"})


class TerminalConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[terminal]``: PTY sessions' transcripts."""

    transcript_bytes: int = DEFAULT_TRANSCRIPT_BYTES


class ExposuresConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[exposures]``: the operator's exceptions to what ``glove init`` accepts.

    ``allow_special`` lists directories (absolute, normalized, each matched exactly: not
    its subdirectories) exposed although they break the owner, mode or filesystem rule: not
    owned by gloved's uid, writable by group or others, under ``/dev``, ``/proc``, ``/sys``
    or ``/run``, on a kernel filesystem or a runtime tmpfs. The other checks still apply
    (no symlink, no FIFO inside, never Glove's own files, inside ``protected_root``).
    """

    allow_special: list[str] = msgspec.field(default_factory=list)


class ProjectionConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[projections.ALIAS]``: where a library bundle a plan names by this alias appears.

    ``target`` is an absolute, normalized file path inside the sandbox, never on or under
    ``/proc``, ``/dev``, ``/sys`` or the workspace, never ``/`` or ``/tmp``, and never on,
    under or above another alias's target.
    """

    target: str


class GlovedConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole of gloved.toml."""

    protected_root: str | None = None
    accept_weaker: list[str] = msgspec.field(default_factory=lambda: ["memory", "cpu_time"])
    limits: LocalLimits = msgspec.field(default_factory=LocalLimits)
    sessions: SessionsConfig = msgspec.field(default_factory=SessionsConfig)
    terminal: TerminalConfig = msgspec.field(default_factory=TerminalConfig)
    harnesses: dict[str, HarnessConfig] = msgspec.field(default_factory=dict)
    network: NetworkConfig = msgspec.field(default_factory=NetworkConfig)
    exposures: ExposuresConfig = msgspec.field(default_factory=ExposuresConfig)
    projections: dict[str, ProjectionConfig] = msgspec.field(default_factory=dict)
    remote_backend: dict[str, object] | None = None


def _check(config: GlovedConfig, source: str) -> None:
    for harness_id, harness in config.harnesses.items():
        if not HARNESS_ID_RE.match(harness_id):
            raise GlovedConfigError(
                f"{source}: `harnesses.{harness_id}`: an id is 1-64 of [a-z0-9_-] starting "
                "with a letter or digit"
            )
        if not harness.argv or not harness.argv[0]:
            raise GlovedConfigError(f"{source}: `harnesses.{harness_id}.argv` names no program")
        if any("\0" in arg for arg in harness.argv):
            raise GlovedConfigError(f"{source}: `harnesses.{harness_id}.argv` has a NUL byte")
    if config.protected_root is not None and not config.protected_root.startswith("/"):
        raise GlovedConfigError(f"{source}: `protected_root` must be an absolute path")
    _check_allow_special(config.exposures.allow_special, source)
    _check_projections(config.projections, source)
    if not 1 <= config.sessions.max_running <= MAX_RUNNING_CEILING:
        raise GlovedConfigError(
            f"{source}: `sessions.max_running` must be within 1..{MAX_RUNNING_CEILING}"
        )
    if not MIN_RING_BYTES <= config.terminal.transcript_bytes <= MAX_RING_BYTES:
        raise GlovedConfigError(
            f"{source}: `terminal.transcript_bytes` must be within "
            f"{MIN_RING_BYTES}..{MAX_RING_BYTES}"
        )
    from glove.container import LIMIT_NAMES

    unknown = set(config.accept_weaker) - {*LIMIT_NAMES, "all"}
    if unknown:
        raise GlovedConfigError(f"{source}: `accept_weaker` names unknown limits {sorted(unknown)}")
    from glove.egress import RuleError, RuleSet

    try:
        RuleSet.load(config.network.allow, config.network.deny)
    except RuleError as exc:
        raise GlovedConfigError(f"{source}: `network`: {exc}") from exc


def _check_allow_special(paths: list[str], source: str) -> None:
    import posixpath

    if len(paths) > MAX_ALLOW_SPECIAL:
        raise GlovedConfigError(
            f"{source}: `exposures.allow_special` lists more than {MAX_ALLOW_SPECIAL} paths"
        )
    for index, path in enumerate(paths):
        where = f"{source}: `exposures.allow_special[{index}]`"
        if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in path):
            raise GlovedConfigError(f"{where} has a control character")
        if not path.startswith("/") or posixpath.normpath(path) != path or path == "/":
            raise GlovedConfigError(
                f"{where}: {path!r} must be an absolute, normalized directory other than /"
            )


def _under(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def _check_projections(projections: dict[str, ProjectionConfig], source: str) -> None:
    """Each alias an identifier, each target a file path of its own inside the sandbox."""
    import posixpath

    workspace = WORKSPACE_TARGET
    if len(projections) > MAX_PROJECTIONS:
        raise GlovedConfigError(f"{source}: `projections` has more than {MAX_PROJECTIONS} aliases")
    seen: dict[str, str] = {}
    for alias, projection in projections.items():
        where = f"{source}: `projections.{alias}.target`"
        if not HARNESS_ID_RE.match(alias):
            raise GlovedConfigError(
                f"{source}: `projections.{alias}`: an alias is 1-64 of [a-z0-9_-] starting "
                "with a letter or digit"
            )
        target = projection.target
        if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in target):
            raise GlovedConfigError(f"{where} has a control character")
        if not target.startswith("/") or target.startswith("//"):
            raise GlovedConfigError(f"{where}: {target!r} must be an absolute path")
        if posixpath.normpath(target) != target or target.endswith("/"):
            raise GlovedConfigError(
                f"{where}: {target!r} must be normalized (no ., .., // or trailing /)"
            )
        if target in ("/", "/tmp"):  # noqa: S108 - paths inside the sandbox
            raise GlovedConfigError(f"{where}: {target!r} is a directory the sandbox owns")
        for tree in PROJECTION_FORBIDDEN_TREES:
            if _under(target, tree):
                raise GlovedConfigError(f"{where}: {target!r} is under {tree}; use another path")
        if _under(target, workspace) or _under(workspace, target):
            raise GlovedConfigError(f"{where}: {target!r} overlaps the workspace ({workspace})")
        for other, other_target in seen.items():
            if _under(target, other_target) or _under(other_target, target):
                raise GlovedConfigError(
                    f"{where}: {target!r} overlaps `projections.{other}.target` "
                    f"({other_target!r}): each alias has a file of its own"
                )
        seen[alias] = target


def parse_gloved_config(data: bytes, source: str = "gloved.toml") -> GlovedConfig:
    """Decode gloved.toml strictly.

    Raises:
        GlovedConfigError: too large, not TOML, an unknown or mistyped key (the message
            names its path), or a broken rule.
    """
    if len(data) > MAX_CONFIG_BYTES:
        raise GlovedConfigError(f"{source}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        config = msgspec.toml.decode(data, type=GlovedConfig)
    except msgspec.DecodeError as exc:
        raise GlovedConfigError(f"{source}: {exc}") from exc
    _check(config, source)
    return config


def load_gloved_config(path: Path) -> GlovedConfig:
    """Read and decode gloved.toml (owner-only, as every Glove file).

    Raises:
        GlovedConfigError: missing, unsafe, unreadable or invalid.
    """
    from glove.config._paths import read_private_file
    from glove.config.errors import UnsafePath

    try:
        data = read_private_file(path, MAX_CONFIG_BYTES)
    except FileNotFoundError as exc:
        raise GlovedConfigError(f"{path} does not exist: run `glove setup`") from exc
    except UnsafePath as exc:
        raise GlovedConfigError(str(exc)) from exc
    except OSError as exc:
        raise GlovedConfigError(f"cannot read {path}: {exc.strerror}") from exc
    return parse_gloved_config(data, str(path))
