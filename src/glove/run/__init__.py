"""CLI orchestration of ``glove exec`` and ``glove run``: options, spec, notes, summary."""

from glove.exits import EXIT_USAGE
from glove.run._exec import exec_command
from glove.run._options import SandboxOptions, add_sandbox_arguments
from glove.run._prepare import Additions, build_from_options, parse_bind

#: The former name of :class:`SandboxOptions` (``glove exec``'s options).
ExecOptions = SandboxOptions

__all__ = [
    "EXIT_USAGE",
    "Additions",
    "ExecOptions",
    "SandboxOptions",
    "add_sandbox_arguments",
    "build_from_options",
    "exec_command",
    "parse_bind",
]
