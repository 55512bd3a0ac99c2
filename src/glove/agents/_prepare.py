"""``--agent``: from an agent profile to the sandbox additions and the agent's own wiring.

Two steps, because the second needs the sandbox's working directory:

1. :func:`prepare_agent` (before the spec is built): find the install, create the home, and
   return what the sandbox adds (read-only binds of the install, the home read-write at the
   same path, ``HOME``/``CODEX_HOME``, the agent's command line).
2. :func:`write_agent_config` (once the spec is known, before anything starts): write the
   agent's configuration into its home with :mod:`glove.agents._configs`, through
   :mod:`glove.agents._home` (never following a link the agent may have planted).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Final, NamedTuple

from glove.agents._configs import claude_settings, claude_user_config, codex_config
from glove.agents._home import agent_home_path, ensure_home, read_home_file, write_home_file
from glove.agents._install import find_install
from glove.agents._toml import dumps as toml_dumps
from glove.agents.errors import AgentConfigError, AgentError
from glove.container import AgentSection, Bind, Profile

CLAUDE_USER_CONFIG: Final = ".claude.json"
CLAUDE_SETTINGS: Final = ".claude/settings.json"
CODEX_DIR: Final = ".codex"
CODEX_CONFIG: Final = f"{CODEX_DIR}/config.toml"
_CODEX_HEADER: Final = (
    "Codex configuration. Glove rewrites this file before each contained start: it keeps\n"
    "your keys and sets sandbox_mode, features.daemon_auto_start, the trusted working\n"
    "directory and [mcp_servers.glove] (comments are not kept). See docs/agents.md."
)


class AgentLaunch(NamedTuple):
    """What ``--agent`` adds to one sandbox.

    Attributes:
        agent: the profile's ``[agent]`` section.
        home: the persistent home on the host (bound at the same path inside).
        binds: the install (read-only) and the home (read-write).
        env: ``HOME`` (and ``CODEX_HOME``, ``PATH`` when a non-system Node.js is bound).
        argv: the agent's command line inside.
    """

    agent: AgentSection
    home: Path
    binds: tuple[Bind, ...]
    env: dict[str, str]
    argv: tuple[str, ...]


def agent_section(profile: Profile, origin: str, kind: str) -> AgentSection:
    """The profile's ``[agent]`` section, checked against ``--agent KIND``.

    Raises:
        AgentError: the profile has no ``[agent]`` section or is for another agent.
    """
    agent = profile.agent
    if agent is None:
        raise AgentError(f"profile {origin} has no [agent] section: it cannot run --agent {kind}")
    if agent.kind != kind:
        raise AgentError(f"profile {origin} is for agent {agent.kind!r}, not {kind!r}")
    return agent


def prepare_agent(
    profile: Profile,
    agent: AgentSection,
    args: list[str],
    *,
    install_dir: str | None,
    host_env: dict[str, str],
) -> AgentLaunch:
    """Find the install, create the home, and return the sandbox additions.

    Raises:
        AgentInstallError: the install is not found.
        AgentHomeError: the home cannot be created or is unsafe.
    """
    install = find_install(
        agent.command,
        tuple(agent.packages),
        install_dir=install_dir,
        path=host_env.get("PATH", ""),
    )
    home = ensure_home(agent_home_path(agent.home, host_env))
    binds = [Bind(source=d, target=d, mode="ro") for d in install.package_dirs]
    env = {"HOME": str(home)}
    if install.runtime_bin is not None:
        prefix = str(Path(install.runtime_bin).parent)
        binds.append(Bind(source=prefix, target=prefix, mode="ro"))
        env["PATH"] = f"{install.runtime_bin}:{profile.env.set.get('PATH', '/usr/bin:/bin')}"
    if agent.kind == "codex":
        env["CODEX_HOME"] = str(home / CODEX_DIR)
    binds.append(Bind(source=str(home), target=str(home), mode="rw"))
    words = [*agent.args, *args]
    if agent.kind == "codex":
        words = codex_words(words)
    argv = (install.executable, *words)
    return AgentLaunch(agent, home, tuple(binds), env, argv)


#: Codex's non-interactive subcommand (and its alias).
CODEX_EXEC: Final = ("exec", "e")
CODEX_SKIP_REPO_CHECK: Final = "--skip-git-repo-check"


def codex_words(words: list[str]) -> list[str]:
    """Codex's arguments with ``--skip-git-repo-check`` after ``exec``: the workspace is
    trusted (config.toml says so, docs/agents.md promises it), but ``codex exec`` refuses
    any directory that is not a git repository it trusts ("Not inside a trusted directory")
    whatever the projects table says; the flag is exec's own way to skip that check."""
    if not words or words[0] not in CODEX_EXEC or CODEX_SKIP_REPO_CHECK in words:
        return words
    return [words[0], CODEX_SKIP_REPO_CHECK, *words[1:]]


# The agent's own settings documents (see agents/_configs.py): free-form on purpose.
def _json_document(home: Path, relative: str) -> dict[str, Any]:
    data = read_home_file(home, relative)
    if data is None or not data.strip():
        return {}
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise AgentConfigError(
            f"{home / relative} is not valid JSON ({exc}): fix or remove it"
        ) from exc
    if not isinstance(document, dict):
        raise AgentConfigError(f"{home / relative} is not a JSON object: fix or remove it")
    return document


def _toml_document(home: Path, relative: str) -> dict[str, Any]:
    data = read_home_file(home, relative)
    if data is None:
        return {}
    try:
        return tomllib.loads(data.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AgentConfigError(
            f"{home / relative} is not valid TOML ({exc}): fix or remove it"
        ) from exc


def _json_bytes(document: dict[str, Any]) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def write_agent_config(
    launch: AgentLaunch, *, workdir: str, mcp: bool, sandbox_env: dict[str, str]
) -> tuple[str, ...]:
    """Write the agent's own configuration into its home; return the files written.

    ``workdir`` is the sandbox's working directory (trusted in the agent's config), ``mcp``
    whether the Glove MCP server is there (``glove run``) or not (``glove exec``), and
    ``sandbox_env`` the sandbox's environment (the API key Claude Code would ask about).

    Raises:
        AgentConfigError: an existing file in the home is malformed or too large.
        AgentHomeError: a link or non-file is in the way, or a write failed.
    """
    home = launch.home
    if launch.agent.kind == "claude":
        key = sandbox_env.get("ANTHROPIC_API_KEY")
        user = claude_user_config(
            _json_document(home, CLAUDE_USER_CONFIG), workdir=workdir, mcp=mcp, api_key=key
        )
        write_home_file(home, CLAUDE_USER_CONFIG, _json_bytes(user))
        settings = claude_settings(_json_document(home, CLAUDE_SETTINGS))
        write_home_file(home, CLAUDE_SETTINGS, _json_bytes(settings))
        return (str(home / CLAUDE_USER_CONFIG), str(home / CLAUDE_SETTINGS))
    config = codex_config(_toml_document(home, CODEX_CONFIG), workdir=workdir, mcp=mcp)
    write_home_file(home, CODEX_CONFIG, toml_dumps(config, _CODEX_HEADER).encode())
    return (str(home / CODEX_CONFIG),)
