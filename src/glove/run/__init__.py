"""CLI orchestration of ``glove exec`` (and, later, ``glove run``)."""

from glove.run._exec import ExecOptions, exec_command, parse_bind

__all__ = ["ExecOptions", "exec_command", "parse_bind"]
