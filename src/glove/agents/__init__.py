"""Real coding agents, first class: Claude Code and Codex contained and mediated.

``glove run --agent claude|codex`` (and ``glove exec --agent ...``, without tools) picks the
agent's embedded profile (``claude``/``codex``, both extending ``node-agent``), binds its
install read-only, gives it a persistent owner-only home, and writes the Glove MCP server
and the settings that keep it inside its limits into that home. See ``docs/agents.md``.
"""

from glove.agents._configs import (
    SERVER_COMMAND,
    SERVER_NAME,
    claude_settings,
    claude_user_config,
    codex_config,
)
from glove.agents._guidance import NEEDS, AgentNeeds, agent_notes, api_endpoint
from glove.agents._home import agent_home_path, data_home, ensure_home
from glove.agents._install import Install, find_install
from glove.agents._prepare import AgentLaunch, agent_section, prepare_agent, write_agent_config
from glove.agents.errors import AgentConfigError, AgentError, AgentHomeError, AgentInstallError

#: The agents ``--agent`` accepts.
AGENTS = ("claude", "codex")

__all__ = [
    "AGENTS",
    "NEEDS",
    "SERVER_COMMAND",
    "SERVER_NAME",
    "AgentConfigError",
    "AgentError",
    "AgentHomeError",
    "AgentInstallError",
    "AgentLaunch",
    "AgentNeeds",
    "Install",
    "agent_home_path",
    "agent_notes",
    "agent_section",
    "api_endpoint",
    "claude_settings",
    "claude_user_config",
    "codex_config",
    "data_home",
    "ensure_home",
    "find_install",
    "prepare_agent",
    "write_agent_config",
]
