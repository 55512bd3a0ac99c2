"""Errors of the agent adapters (``glove run --agent``, ``glove exec --agent``).

Every class derives from :class:`glove.errors.GloveError` through :class:`AgentError`::

    AgentError                 an agent cannot be prepared; nothing ran
    ├── AgentInstallError      the agent's install was not found or is not usable
    ├── AgentHomeError         the per-agent home cannot be created or is unsafe
    └── AgentConfigError       the agent's own configuration in its home is unreadable
"""

from __future__ import annotations

from glove.errors import GloveError


class AgentError(GloveError):
    """Base class of every error raised while preparing an agent."""


class AgentInstallError(AgentError):
    """The agent's install was not found (on PATH or in ``--agent-install``) or is unusable."""


class AgentHomeError(AgentError):
    """The per-agent home cannot be created, or something in it is not what Glove wrote."""


class AgentConfigError(AgentError):
    """A configuration file the agent keeps in its home is malformed or too large."""
