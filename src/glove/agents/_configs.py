"""What Glove writes into an agent's own configuration (pure: documents in, documents out).

Each function takes the agent's configuration as it was read from its home (or an empty
one) and returns it with Glove's keys set; every other key the operator or the agent wrote
is kept. They run before every start, so a run's wiring is always this run's:

* Claude Code, ``~/.claude.json`` (:func:`claude_user_config`): onboarding done, the
  working directory trusted, the Glove MCP server present in the user scope (user-scope
  servers need no approval) under ``glove run`` and absent under ``glove exec``, and, when
  ``ANTHROPIC_API_KEY`` is passed in, that key marked as approved (the TUI would otherwise
  ask on every fresh home; Claude Code records the key's last 20 characters for that).
  ``~/.claude/settings.json`` (:func:`claude_settings`): the Glove server's tools allowed
  without a prompt (``mcp__glove``): Glove's policy decides every call, and a prompt per
  call cannot be answered under ``-p``.
* Codex, ``$CODEX_HOME/config.toml`` (:func:`codex_config`): its own command sandbox off
  (``sandbox_mode = "danger-full-access"``: Glove is the sandbox, and Codex's bubblewrap
  cannot run inside it because nested user namespaces are refused, so every command would
  fail), no app-server daemon (``features.daemon_auto_start = false``: it would copy 425 MB
  of itself into the home and leave a process behind), no update check, the working
  directory trusted, and ``[mcp_servers.glove]`` under ``glove run`` (absent under
  ``glove exec``).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from glove.mcp import GUEST_DIR, SHIM_NAME

#: The MCP server name agents see; its tools appear to Claude Code as ``mcp__glove__*``.
SERVER_NAME: Final = "glove"
#: The command of the Glove MCP server inside the sandbox.
SERVER_COMMAND: Final = f"{GUEST_DIR}/{SHIM_NAME}"
#: Claude Code's permission rule that allows every tool of the Glove server.
CLAUDE_ALLOW_RULE: Final = f"mcp__{SERVER_NAME}"
#: How many trailing characters of an API key Claude Code records as approved.
CLAUDE_KEY_SUFFIX_CHARS: Final = 20
#: Approved key suffixes kept (older ones are dropped first).
MAX_APPROVED_KEYS: Final = 16


# Claude Code's and Codex's settings are their documents, not Glove's: Glove edits the few
# members it owns and keeps every other member as it found it (free-form JSON/TOML).
def _table(document: dict[str, Any], key: str) -> dict[str, Any]:
    """``document[key]`` as a dict (replacing a non-dict value, which the agent would reject)."""
    value = document.get(key)
    if not isinstance(value, dict):
        value = {}
        document[key] = value
    return value


def claude_user_config(
    existing: dict[str, Any], *, workdir: str, mcp: bool, api_key: str | None
) -> dict[str, Any]:
    """Claude Code's ``~/.claude.json`` with Glove's keys set (see the module docstring)."""
    config = copy.deepcopy(existing)
    config["hasCompletedOnboarding"] = True
    config["autoUpdates"] = False
    project = _table(_table(config, "projects"), workdir)
    project["hasTrustDialogAccepted"] = True
    project["hasCompletedProjectOnboarding"] = True
    servers = _table(config, "mcpServers")
    if mcp:
        servers[SERVER_NAME] = {"type": "stdio", "command": SERVER_COMMAND, "args": [], "env": {}}
    else:
        servers.pop(SERVER_NAME, None)
    if api_key:
        responses = _table(config, "customApiKeyResponses")
        approved = [k for k in responses.get("approved", []) if isinstance(k, str)]
        suffix = api_key[-CLAUDE_KEY_SUFFIX_CHARS:]
        if suffix not in approved:
            approved.append(suffix)
        responses["approved"] = approved[-MAX_APPROVED_KEYS:]
        rejected = responses.get("rejected", [])
        responses["rejected"] = (
            [k for k in rejected if k != suffix] if isinstance(rejected, list) else []
        )
    return config


def claude_settings(existing: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's ``~/.claude/settings.json`` allowing the Glove server's tools."""
    settings = copy.deepcopy(existing)
    permissions = _table(settings, "permissions")
    allow = permissions.get("allow")
    rules = [r for r in allow if isinstance(r, str)] if isinstance(allow, list) else []
    if CLAUDE_ALLOW_RULE not in rules:
        rules.append(CLAUDE_ALLOW_RULE)
    permissions["allow"] = rules
    return settings


def codex_config(existing: dict[str, Any], *, workdir: str, mcp: bool) -> dict[str, Any]:
    """Codex's ``config.toml`` document with Glove's keys set (see the module docstring)."""
    config = copy.deepcopy(existing)
    config["sandbox_mode"] = "danger-full-access"
    config["check_for_update_on_startup"] = False
    _table(config, "features")["daemon_auto_start"] = False
    _table(_table(config, "projects"), workdir)["trust_level"] = "trusted"
    servers = _table(config, "mcp_servers")
    if mcp:
        servers[SERVER_NAME] = {"command": SERVER_COMMAND, "args": []}
    else:
        servers.pop(SERVER_NAME, None)
    if not servers:
        del config["mcp_servers"]
    return config
