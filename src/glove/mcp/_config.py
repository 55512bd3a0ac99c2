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
    expose = "prefix"               # "prefix" (fs__tool, fs+uri) or "bare" (own names)
    stdout = "lenient"              # a non-JSON stdout line: "lenient" drops it, "strict" fails

    [upstreams.remote]              # a Streamable HTTP upstream instead of a command
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = { env = "REMOTE_TOKEN", prefix = "Bearer " } }

``policy = "allow-all"`` selects the built-in policy that forwards every feature (still
audited) instead of a policy file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, Literal
from urllib.parse import urlsplit

import msgspec

from glove.mcp.errors import McpConfigError

MAX_CONFIG_BYTES: Final = 256 * 1024
MAX_UPSTREAMS: Final = 64
UPSTREAM_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$")
DEFAULT_CALL_TIMEOUT_S: Final = 60.0
MAX_CALL_TIMEOUT_S: Final = 3600.0
DEFAULT_STARTUP_TIMEOUT_S: Final = 20.0
MAX_STARTUP_TIMEOUT_S: Final = 300.0

MAX_HEADERS: Final = 32
MAX_HEADER_VALUE_BYTES: Final = 8 * 1024
HEADER_NAME_RE: Final = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
#: Headers Glove sets itself on an HTTP upstream; a configuration may not override them.
RESERVED_HEADERS: Final = frozenset(
    {
        "host",
        "content-type",
        "content-length",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
        "transfer-encoding",
        "connection",
        "last-event-id",
    }
)
ALLOW_ALL: Final = "allow-all"

Era = Literal["auto", "legacy", "2026-07-28"]
Expose = Literal["prefix", "bare"]
StdoutMode = Literal["lenient", "strict"]


class HeaderSource(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where an HTTP upstream header's value comes from: an environment variable of Glove's
    own or a file (never the agent); ``prefix`` goes before it (``"Bearer "``)."""

    env: str | None = None
    file: str | None = None
    prefix: str = ""


class UpstreamConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One upstream MCP server: a host subprocess on stdio (``command``) or a Streamable
    HTTP endpoint (``url``)."""

    command: list[str] = msgspec.field(default_factory=list)
    url: str | None = None
    headers: dict[str, HeaderSource] = msgspec.field(default_factory=dict)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    inherit_env: list[str] = msgspec.field(default_factory=list)
    cwd: str | None = None
    era: Era = "auto"
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    expose: Expose = "prefix"
    stdout: StdoutMode = "lenient"


class McpConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole mediator configuration, with paths already resolved.

    ``builtin_policy`` is ``"allow-all"`` when ``policy = "allow-all"`` was given; ``policy``
    then still holds a resolved (unused) path, so code that protects the policy file keeps
    working.
    """

    policy: str
    audit: str
    upstreams: dict[str, UpstreamConfig]
    builtin_policy: str | None = None


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
        if upstream.url is not None:
            _check_http(upstream, where)
        elif not upstream.command or not upstream.command[0]:
            raise McpConfigError(f"{where}.command: must name a program (or give a `url`)")
        if not 0 < upstream.call_timeout_s <= MAX_CALL_TIMEOUT_S:
            raise McpConfigError(f"{where}.call_timeout_s: must be in (0, {MAX_CALL_TIMEOUT_S}]")
        if not 0 < upstream.startup_timeout_s <= MAX_STARTUP_TIMEOUT_S:
            raise McpConfigError(
                f"{where}.startup_timeout_s: must be in (0, {MAX_STARTUP_TIMEOUT_S}]"
            )


def _check_http(upstream: UpstreamConfig, where: str) -> None:
    """An HTTP upstream: an http(s) URL, no command or environment, sane headers.

    Raises:
        McpConfigError: the URL or a header is invalid.
    """
    assert upstream.url is not None
    if upstream.command or upstream.env or upstream.inherit_env or upstream.stdout != "lenient":
        raise McpConfigError(
            f"{where}: an upstream with `url` takes no command, env, inherit_env or stdout"
        )
    parts = urlsplit(upstream.url)
    if (
        parts.scheme not in ("https", "http")
        or not parts.hostname
        or any(c.isspace() for c in upstream.url)
    ):
        raise McpConfigError(f"{where}.url: must be an https:// (or http://) URL")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise McpConfigError(f"{where}.url: plain http:// only to a loopback address; use https")
    if len(upstream.headers) > MAX_HEADERS:
        raise McpConfigError(f"{where}.headers: more than {MAX_HEADERS} headers")
    for name, source in upstream.headers.items():
        if not HEADER_NAME_RE.match(name) or name.lower() in RESERVED_HEADERS:
            raise McpConfigError(f"{where}.headers.{name}: not a header Glove lets you set")
        if (source.env is None) == (source.file is None):
            raise McpConfigError(f"{where}.headers.{name}: give exactly one of `env` and `file`")


def _is_loopback(host: str) -> bool:
    import ipaddress  # here: the configuration loads on glove mcp serve's start-up path

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
        key: msgspec.structs.replace(
            value,
            cwd=_resolve(base_dir, value.cwd or "."),
            headers={
                name: msgspec.structs.replace(
                    source, file=None if source.file is None else _resolve(base_dir, source.file)
                )
                for name, source in value.headers.items()
            },
        )
        for key, value in raw.upstreams.items()
    }
    return McpConfig(
        policy=_resolve(base_dir, raw.policy),
        audit=_resolve(base_dir, raw.audit),
        upstreams=upstreams,
        builtin_policy=ALLOW_ALL if raw.policy == ALLOW_ALL else None,
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


def header_values(upstream: UpstreamConfig, parent: dict[str, str]) -> dict[str, str]:
    """The extra headers of an HTTP upstream, read from Glove's environment and files.

    Raises:
        McpConfigError: a named variable is unset, a file cannot be read, or a value is too
            long or holds a line break.
    """
    values: dict[str, str] = {}
    for name, source in upstream.headers.items():
        if source.env is not None:
            if source.env not in parent:
                raise McpConfigError(f"header {name}: environment variable {source.env} is unset")
            value = parent[source.env]
        else:
            assert source.file is not None
            try:
                with Path(source.file).open("rb") as handle:
                    data = handle.read(MAX_HEADER_VALUE_BYTES + 1)
            except OSError as exc:
                raise McpConfigError(
                    f"header {name}: cannot read {source.file}: {exc.strerror}"
                ) from exc
            value = data.decode("utf-8", "replace").strip()
        value = source.prefix + value
        if len(value.encode()) > MAX_HEADER_VALUE_BYTES or any(c in value for c in "\r\n\0"):
            raise McpConfigError(f"header {name}: the value is too long or holds a line break")
        values[name] = value
    return values


def child_environment(upstream: UpstreamConfig, parent: dict[str, str]) -> dict[str, str]:
    """Return the scrubbed environment of an upstream: its ``env`` plus ``inherit_env``."""
    env = {name: parent[name] for name in upstream.inherit_env if name in parent}
    env.update(upstream.env)
    return env
