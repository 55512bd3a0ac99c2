"""Glove: contain AI coding agents.

An OS sandbox (`glove exec`), MCP mediation with policy and audit (`glove run`), tamper-evident
journals and receipts, and the `gloved` control service, built as an asyncio actor system.
"""

from glove._version import __version__
from glove.errors import GloveError

__all__ = ["GloveError", "__version__"]
