"""What an agent needs that Glove can see is missing, said before the start (one line each).

An agent with no route to its model API, or with no key and no login, does not fail: it
waits (Claude Code sits silent, Codex prints "Reconnecting..." until killed). Glove knows the
network mode, the allowlist and the sandbox's environment, so :func:`agent_notes` says so
before anything starts, with the flag that fixes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, NamedTuple
from urllib.parse import urlsplit

from glove.agents._prepare import AgentLaunch

HTTPS_PORT: Final = 443


class AgentNeeds(NamedTuple):
    """One agent's model API and credentials."""

    api_host: str
    #: The variable that points the agent at another API (its host is checked instead).
    base_url_var: str
    #: The variables that carry a key (any one is enough).
    key_vars: tuple[str, ...]
    #: The login the agent keeps in its home, relative to it.
    login_file: str
    #: How to log in inside, for the note.
    login_hint: str


NEEDS: Final = {
    "claude": AgentNeeds(
        "api.anthropic.com",
        "ANTHROPIC_BASE_URL",
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
        ".claude/.credentials.json",
        "/login in Claude Code",
    ),
    "codex": AgentNeeds(
        "api.openai.com",
        "OPENAI_BASE_URL",
        ("OPENAI_API_KEY", "CODEX_API_KEY"),
        ".codex/auth.json",
        "`codex login`",
    ),
}


def _codex_base_url(home: Path) -> str:
    """The base URL of the model provider Codex's config.toml selects, or ``""``."""
    import tomllib

    try:
        config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return ""
    providers = config.get("model_providers")
    chosen = providers.get(config.get("model_provider")) if isinstance(providers, dict) else None
    base = chosen.get("base_url") if isinstance(chosen, dict) else None
    return base if isinstance(base, str) else ""


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_endpoint(kind: str, env: Mapping[str, str], home: Path | None = None) -> tuple[str, int]:
    """The host and port agent ``kind`` talks to: its base URL's when one is set (Codex's
    may be its config.toml's model provider)."""
    needs = NEEDS[kind]
    base = env.get(needs.base_url_var, "")
    if not base and kind == "codex" and home is not None:
        base = _codex_base_url(home)
    if base:
        try:
            parts = urlsplit(base)
            if parts.hostname:
                default = HTTPS_PORT if parts.scheme != "http" else 80
                return parts.hostname, parts.port or default
        except ValueError:
            pass
    return needs.api_host, HTTPS_PORT


def agent_notes(
    launch: AgentLaunch,
    sandbox_env: Mapping[str, str],
    *,
    network: str,
    reaches: Callable[[str, int], bool],
) -> list[str]:
    """One line for each thing the agent will wait on: no route to its API, no key.

    ``network`` is the sandbox's mode (``none`` or ``proxy``), ``reaches(host, port)``
    whether the allowlist lets a tunnel to it through.
    """
    kind = launch.agent.kind
    needs = NEEDS.get(kind)
    if needs is None or launch.argv[1:2] in (("--version",), ("-V",), ("--help",), ("-h",)):
        return []  # it will not talk to its API
    notes = []
    host, port = api_endpoint(kind, sandbox_env, Path(launch.home))
    target = host if port == HTTPS_PORT else f"{host}:{port}"
    if _loopback(host):
        pass  # the sandbox's own loopback: whatever answers there runs inside
    elif network != "proxy":
        notes.append(
            f"--agent {kind} talks to {target}, which --network {network} does not reach (it "
            f"would wait for the network): add --network proxy --allow {target}"
        )
    elif not reaches(host, port):
        notes.append(
            f"--agent {kind} talks to {target}, which no --allow rule reaches (it would wait "
            f"for the network): add --allow {target}"
        )
    has_key = any(sandbox_env.get(var) for var in needs.key_vars)
    if not has_key and not (Path(launch.home) / needs.login_file).is_file():
        notes.append(
            f"--agent {kind} has no key: {needs.key_vars[0]} is not set (it is passed in by "
            f"name) and its home {launch.home} holds no login: export {needs.key_vars[0]}, "
            f"or log in once inside ({needs.login_hint})"
        )
    return notes
