"""What several layers read about this user's Glove: where its files are, and gloved.toml.

Glove's own files (:class:`GlovePaths`, :func:`glove_paths`: XDG config and state, the
runtime directory :func:`choose_runtime_dir` picks) and the owner-only rule each of them
follows (:func:`check_private` and the create/read helpers: refused, never repaired);
gloved's configuration, decoded strictly (:class:`GlovedConfig`, :func:`load_gloved_config`).
It sits low (docs/architecture.md, "Layers"): the control service, the session registry,
``glove setup`` and ``glove doctor`` all read it.
"""

from glove.config._gloved_config import (
    DEFAULT_MAX_RUNNING,
    DEFAULT_TRANSCRIPT_BYTES,
    MAX_CONFIG_BYTES,
    MAX_PROJECTIONS,
    MAX_RING_BYTES,
    MAX_RUNNING_CEILING,
    MIN_RING_BYTES,
    PROJECTION_FORBIDDEN_TREES,
    GlovedConfig,
    HarnessConfig,
    LocalLimits,
    NetworkConfig,
    ProjectionConfig,
    SessionsConfig,
    TerminalConfig,
    load_gloved_config,
    parse_gloved_config,
)
from glove.config._paths import (
    DIR_MODE,
    FILE_MODE,
    GlovePaths,
    check_private,
    create_private_file,
    ensure_private_dir,
    glove_paths,
    read_private_file,
)
from glove.config._runtime_dir import (
    RUNTIME_DIR_NAME,
    STATE_RUNTIME_NAME,
    RuntimeDirChoice,
    RuntimeSource,
    choose_runtime_dir,
    glove_state_dir,
)
from glove.config.errors import ConfigError, GlovedConfigError, UnsafePath

__all__ = [
    "DEFAULT_MAX_RUNNING",
    "DEFAULT_TRANSCRIPT_BYTES",
    "DIR_MODE",
    "FILE_MODE",
    "MAX_CONFIG_BYTES",
    "MAX_PROJECTIONS",
    "MAX_RING_BYTES",
    "MAX_RUNNING_CEILING",
    "MIN_RING_BYTES",
    "PROJECTION_FORBIDDEN_TREES",
    "RUNTIME_DIR_NAME",
    "STATE_RUNTIME_NAME",
    "ConfigError",
    "GlovePaths",
    "GlovedConfig",
    "GlovedConfigError",
    "HarnessConfig",
    "LocalLimits",
    "NetworkConfig",
    "ProjectionConfig",
    "RuntimeDirChoice",
    "RuntimeSource",
    "SessionsConfig",
    "TerminalConfig",
    "UnsafePath",
    "check_private",
    "choose_runtime_dir",
    "create_private_file",
    "ensure_private_dir",
    "glove_paths",
    "glove_state_dir",
    "load_gloved_config",
    "parse_gloved_config",
    "read_private_file",
]
