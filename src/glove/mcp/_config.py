"""The mediator's configuration: upstream servers, the policy file and the audit log.

A TOML file decoded strictly (an unknown key is an error that names its path)::

    policy = "policy.toml"          # relative paths resolve against this file's folder
    audit = "audit.log"

    [upstreams.fs]                  # the id prefixes every tool: fs__read_text_file
    command = ["mcp-server-filesystem", "/srv/data"]
    env = { LOG_LEVEL = "warn" }    # the child's whole environment, plus inherit_env
    inherit_env = ["PATH", "HOME"]  # names copied from Glove's own environment, if set
    era = "auto"                    # "auto" (probe, then initialize), "legacy", "2026-07-28"
    call_timeout_s = 60.0
    startup_timeout_s = 20.0
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, Literal

import msgspec

from glove.mcp.errors import McpConfigError

MAX_CONFIG_BYTES: Final = 256 * 1024
MAX_UPSTREAMS: Final = 64
UPSTREAM_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$")
DEFAULT_CALL_TIMEOUT_S: Final = 60.0
MAX_CALL_TIMEOUT_S: Final = 3600.0
DEFAULT_STARTUP_TIMEOUT_S: Final = 20.0
MAX_STARTUP_TIMEOUT_S: Final = 300.0

Era = Literal["auto", "legacy", "2026-07-28"]


class UpstreamConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One upstream MCP server started as a host subprocess speaking stdio."""

    command: list[str]
    env: dict[str, str] = msgspec.field(default_factory=dict)
    inherit_env: list[str] = msgspec.field(default_factory=list)
    cwd: str | None = None
    era: Era = "auto"
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S


class McpConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole mediator configuration, with paths already resolved."""

    policy: str
    audit: str
    upstreams: dict[str, UpstreamConfig]


def _check(config: McpConfig, source: str) -> None:
    if not config.upstreams:
        raise McpConfigError(f"{source}: `upstreams` is empty; configure at least one server")
    if len(config.upstreams) > MAX_UPSTREAMS:
        raise McpConfigError(f"{source}: more than {MAX_UPSTREAMS} upstreams")
    for upstream_id, upstream in config.upstreams.items():
        where = f"{source}: `upstreams.{upstream_id}`"
        if not UPSTREAM_ID_RE.match(upstream_id):
            raise McpConfigError(
                f"{where}: an id is 1-32 of [A-Za-z0-9-] starting with a letter or digit"
                " (no underscore, so `<id>__<tool>` splits one way)"
            )
        if not upstream.command or not upstream.command[0]:
            raise McpConfigError(f"{where}.command: must name a program")
        if not 0 < upstream.call_timeout_s <= MAX_CALL_TIMEOUT_S:
            raise McpConfigError(f"{where}.call_timeout_s: must be in (0, {MAX_CALL_TIMEOUT_S}]")
        if not 0 < upstream.startup_timeout_s <= MAX_STARTUP_TIMEOUT_S:
            raise McpConfigError(
                f"{where}.startup_timeout_s: must be in (0, {MAX_STARTUP_TIMEOUT_S}]"
            )


def _check_upstream_tables(table: object, source: str) -> None:
    """Decode each upstream on its own, so an error names the upstream's id in its path
    (``$.upstreams.fs.comand``) instead of msgspec's ``$.upstreams[...]``.

    Raises:
        McpConfigError: an upstream table has an unknown, missing or mistyped key.
    """
    upstreams = table.get("upstreams") if isinstance(table, dict) else None
    if not isinstance(upstreams, dict):
        return
    for upstream_id, value in upstreams.items():
        try:
            msgspec.convert(value, UpstreamConfig)
        except msgspec.ValidationError as exc:
            message = str(exc).replace("`$", f"`$.upstreams.{upstream_id}")
            if "`$" not in message:
                message += f" - at `$.upstreams.{upstream_id}`"
            raise McpConfigError(f"{source}: upstream {upstream_id!r}: {message}") from exc


def _resolve(base: Path, value: str) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def parse_config(data: bytes, *, base_dir: Path, source: str = "<config>") -> McpConfig:
    """Decode and validate a configuration document; relative paths resolve in ``base_dir``.

    Raises:
        McpConfigError: the document is not TOML, has an unknown or mistyped key (the
            message gives its path), or breaks a bound.
    """
    if len(data) > MAX_CONFIG_BYTES:
        raise McpConfigError(f"{source}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        table = msgspec.toml.decode(data)
    except msgspec.DecodeError as exc:
        raise McpConfigError(f"{source}: {exc}") from exc
    _check_upstream_tables(table, source)
    try:
        raw = msgspec.convert(table, McpConfig)
    except msgspec.ValidationError as exc:
        raise McpConfigError(f"{source}: {exc}") from exc
    _check(raw, source)
    # An upstream without a `cwd` starts in the configuration's folder, never in the
    # caller's current directory: under `glove run` that is often the agent's workspace, and
    # a program started there (npx, python -m) would load what the agent planted.
    upstreams = {
        key: msgspec.structs.replace(value, cwd=_resolve(base_dir, value.cwd or "."))
        for key, value in raw.upstreams.items()
    }
    return McpConfig(
        policy=_resolve(base_dir, raw.policy),
        audit=_resolve(base_dir, raw.audit),
        upstreams=upstreams,
    )


def load_config(path: str | Path) -> McpConfig:
    """Read and validate the configuration file at ``path``.

    Raises:
        McpConfigError: the file cannot be read or is invalid.
    """
    file = Path(path)
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise McpConfigError(f"{file}: cannot read: {exc.strerror}") from exc
    return parse_config(data, base_dir=file.resolve().parent, source=str(file))


def child_environment(upstream: UpstreamConfig, parent: dict[str, str]) -> dict[str, str]:
    """Return the scrubbed environment of an upstream: its ``env`` plus ``inherit_env``."""
    env = {name: parent[name] for name in upstream.inherit_env if name in parent}
    env.update(upstream.env)
    return env
