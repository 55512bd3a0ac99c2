"""Errors of Glove's own files and gloved's configuration.

::

    GloveError
    └── ConfigError
        ├── UnsafePath          a Glove file or directory is not owner-only (never fixed)
        └── GlovedConfigError   gloved.toml is missing, malformed or invalid

``glove.host.errors`` names both too (where they were first defined).
"""

from __future__ import annotations

from glove.errors import GloveError


class ConfigError(GloveError):
    """Base class of the errors of Glove's own files and of gloved.toml."""


class UnsafePath(ConfigError):
    """A path Glove keeps its own files in is someone else's, open to others, or a link."""


class GlovedConfigError(ConfigError):
    """gloved.toml cannot be read, does not decode strictly, or breaks a rule."""
