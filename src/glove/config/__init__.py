"""What several layers read about this user's Glove: where its files are, and gloved.toml.

Glove's own files (:class:`GlovePaths`, :func:`glove_paths`: XDG config and state, the
runtime directory :func:`choose_runtime_dir` picks) and the owner-only rule each of them
follows (:func:`check_private` and the create/read helpers: refused, never repaired);
gloved's configuration, decoded strictly (:class:`GlovedConfig`, :func:`load_gloved_config`).
It sits low (docs/architecture.md, "Layers"): the control service, the session registry,
``glove setup`` and ``glove doctor`` all read it.

The runtime directory's rule on plain strings (:func:`chosen_runtime_dir`) and the errors
are imported with the package (every control client reads them); the rest on first use
(PEP 562): :func:`choose_runtime_dir`'s dataclass, gloved.toml's schema and the owner-only
file helpers, so ``glove capabilities`` loads neither ``dataclasses`` nor ``pathlib``.
"""

from typing import TYPE_CHECKING

from glove._lazy import lazy_exports
from glove.config._runtime_rule import (
    RUNTIME_DIR_NAME,
    STATE_RUNTIME_NAME,
    chosen_runtime_dir,
    path_text,
)
from glove.config.errors import ConfigError, GlovedConfigError, UnsafePath

if TYPE_CHECKING:
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
        RuntimeDirChoice,
        RuntimeSource,
        choose_runtime_dir,
        glove_state_dir,
    )

_LAZY: dict[str, str] = {
    "RuntimeDirChoice": "glove.config._runtime_dir",
    "RuntimeSource": "glove.config._runtime_dir",
    "choose_runtime_dir": "glove.config._runtime_dir",
    "glove_state_dir": "glove.config._runtime_dir",
    "DEFAULT_MAX_RUNNING": "glove.config._gloved_config",
    "DEFAULT_TRANSCRIPT_BYTES": "glove.config._gloved_config",
    "GlovedConfig": "glove.config._gloved_config",
    "HarnessConfig": "glove.config._gloved_config",
    "LocalLimits": "glove.config._gloved_config",
    "MAX_CONFIG_BYTES": "glove.config._gloved_config",
    "MAX_PROJECTIONS": "glove.config._gloved_config",
    "MAX_RING_BYTES": "glove.config._gloved_config",
    "MAX_RUNNING_CEILING": "glove.config._gloved_config",
    "MIN_RING_BYTES": "glove.config._gloved_config",
    "NetworkConfig": "glove.config._gloved_config",
    "PROJECTION_FORBIDDEN_TREES": "glove.config._gloved_config",
    "ProjectionConfig": "glove.config._gloved_config",
    "SessionsConfig": "glove.config._gloved_config",
    "TerminalConfig": "glove.config._gloved_config",
    "load_gloved_config": "glove.config._gloved_config",
    "parse_gloved_config": "glove.config._gloved_config",
    "DIR_MODE": "glove.config._paths",
    "FILE_MODE": "glove.config._paths",
    "GlovePaths": "glove.config._paths",
    "check_private": "glove.config._paths",
    "create_private_file": "glove.config._paths",
    "ensure_private_dir": "glove.config._paths",
    "glove_paths": "glove.config._paths",
    "read_private_file": "glove.config._paths",
}


__getattr__ = lazy_exports(__name__, _LAZY)


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
    "chosen_runtime_dir",
    "create_private_file",
    "ensure_private_dir",
    "glove_paths",
    "glove_state_dir",
    "load_gloved_config",
    "parse_gloved_config",
    "path_text",
    "read_private_file",
]
