"""The composition root of the short-lived ``glove exec`` and ``glove run`` processes:
options, the spec, the notes and the summary, terminal I/O and signal forwarding.

The commands themselves (their parsers and help) are :mod:`glove.cli`'s; the session tree
they run is :mod:`glove.session`'s.
"""

from typing import TYPE_CHECKING, Any

from glove.exits import EXIT_USAGE
from glove.run._exec import exec_command
from glove.run._options import SandboxOptions, add_sandbox_arguments, sandbox_options
from glove.run._prepare import Additions, build_from_options, parse_bind

if TYPE_CHECKING:
    from glove.run._agent import run_agent

#: The former name of :class:`SandboxOptions` (``glove exec``'s options).
ExecOptions = SandboxOptions


def __getattr__(name: str) -> Any:
    # ``glove run``'s orchestration, imported on first use: ``glove exec`` (which imports
    # this package) must not pay for the mediation and the session tree.
    if name == "run_agent":
        from glove.run._agent import run_agent

        return run_agent
    raise AttributeError(f"module 'glove.run' has no attribute {name!r}")


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
