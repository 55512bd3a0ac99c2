"""The composition root of the short-lived ``glove exec`` and ``glove run`` processes:
options, the spec, the notes and the summary, terminal I/O and signal forwarding.

The commands themselves (their parsers and help) are :mod:`glove.cli`'s; the session tree
they run is :mod:`glove.session`'s.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from glove.exits import EXIT_USAGE
    from glove.run._agent import run_agent
    from glove.run._exec import exec_command
    from glove.run._options import SandboxOptions, add_sandbox_arguments, sandbox_options
    from glove.run._prepare import Additions, build_from_options, parse_bind

    #: The former name of :class:`SandboxOptions` (``glove exec``'s options).
    ExecOptions = SandboxOptions

#: Every name, imported on first use (PEP 562): ``glove exec`` (which imports this package)
#: loads only what its path uses, never ``glove run``'s mediation and session tree.
_LAZY: dict[str, tuple[str, str]] = {
    "EXIT_USAGE": ("glove.exits", "EXIT_USAGE"),
    "Additions": ("glove.run._prepare", "Additions"),
    "ExecOptions": ("glove.run._options", "SandboxOptions"),
    "SandboxOptions": ("glove.run._options", "SandboxOptions"),
    "add_sandbox_arguments": ("glove.run._options", "add_sandbox_arguments"),
    "build_from_options": ("glove.run._prepare", "build_from_options"),
    "exec_command": ("glove.run._exec", "exec_command"),
    "parse_bind": ("glove.run._prepare", "parse_bind"),
    "run_agent": ("glove.run._agent", "run_agent"),
    "sandbox_options": ("glove.run._options", "sandbox_options"),
}


def __getattr__(name: str) -> Any:
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module 'glove.run' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(entry[0]), entry[1])
    globals()[name] = value
    return value


__all__ = [
    "EXIT_USAGE",
    "Additions",
    "ExecOptions",
    "SandboxOptions",
    "add_sandbox_arguments",
    "build_from_options",
    "exec_command",
    "parse_bind",
    "run_agent",
    "sandbox_options",
]
