"""The commands a person or a script runs most, answered before typer is imported.

typer (with click, and pydantic since typer 0.29) costs several times the interpreter's own
start (docs/decisions/0054-the-hot-commands-parse-without-typer.md), so :func:`run` parses
``glove --version``, ``glove --help``, ``glove capabilities`` and ``glove session status``
itself and calls the same code their typer commands call (:mod:`glove.cli._session`). It
takes only argument lists it understands completely; anything else (another command, ``-h``
after a command, a missing or extra argument, an unknown option, ``--``) returns ``None``
and typer parses it, so every usage error keeps typer's own message and exit code.

``glove --help`` is typer's help text, kept here verbatim for the width click lays it out at
on a terminal of 80 columns or more (and when the output is not a terminal); on a narrower
one typer renders it. ``tests/test_cli_imports.py`` compares the two, so a command added or
reworded in typer's app fails there until :data:`TOP_HELP` says the same.
"""

from __future__ import annotations

import os
import sys
from typing import Final

from glove._version import __version__
from glove.cli._echo import echo

#: click lays help out ``min(columns, 80) - 2`` wide, at least 50; :data:`TOP_HELP` is it
#: at 78, which every terminal of 80 columns or more (and every pipe) gets.
HELP_COLUMNS: Final = 80

TOP_HELP: Final = """\
Usage: glove [OPTIONS] COMMAND [ARGS]...

  Contain AI coding agents: sandbox, MCP mediation, audit and receipts.

Options:
  --version   Print the version and exit.
  -h, --help  Show this message and exit.

Commands:
  setup         Create the config, state and runtime directories, the...
  init          Expose a directory to sessions by alias (pinned,...
  capabilities  What this gloved can run: schema, runtimes, each limit's...
  attach        Attach this terminal to a session's: type to the agent,...
  doctor        Check this machine for everything the sandbox needs; exit...
  exec          Run CMD inside the sandbox: own namespaces, minimal root,...
  run           Run AGENT in the sandbox with a mediated MCP server at...
  plan          Check plans against this gloved's local policy.
  session       Create, watch and stop gloved sessions.
  mcp           MCP mediation: policy-checked, audited tool calls.
  audit         Read the mediator's activity (audit) log.
  policy        Check MCP tool policies, explain their decisions, pin...
  journal       Verify and repair tamper-evident journals.
  receipts      Receipts: page and acknowledge them (gloved); export,...
  library       The library: digest-named files (skills, fixtures) a plan...
  eval          A/B runs of a skill through gloved; verify and report...
  diag          Inspect a running gloved.
  daemon        Install and control gloved as this user's service...
  network       Inspect what the egress rules let a sandbox reach."""


def _terminal_columns() -> int:
    """The columns ``shutil.get_terminal_size`` reports (``COLUMNS``, the tty, else 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return HELP_COLUMNS
    return columns or HELP_COLUMNS


class _Options:
    """The options ``capabilities`` and ``session status`` share, and their positionals."""

    def __init__(self) -> None:
        self.as_json = False
        self.runtime_dir: str | None = None
        self.positionals: list[str] = []


def _parse(args: list[str]) -> _Options | None:
    """``--json``, ``--runtime-dir DIR`` (or ``=DIR``) and plain words, or ``None``.

    ``None`` for anything else typer would treat specially: an option it would refuse or
    answer (``-h``), ``--``, a value that looks like an option.
    """
    options = _Options()
    rest = iter(args)
    for arg in rest:
        if arg == "--json":
            options.as_json = True
        elif arg == "--runtime-dir":
            value = next(rest, None)
            if value is None or value.startswith("-"):
                return None
            options.runtime_dir = value
        elif arg.startswith("--runtime-dir="):
            options.runtime_dir = arg.partition("=")[2]
        elif arg.startswith("-"):
            return None
        else:
            options.positionals.append(arg)
    return options


def _help() -> int | None:
    if _terminal_columns() < HELP_COLUMNS:
        return None
    echo(TOP_HELP)
    return 0


def _capabilities(args: list[str]) -> int | None:
    options = _parse(args)
    if options is None or options.positionals:
        return None
    from glove.cli._status import show_capabilities

    show_capabilities(options.as_json, options.runtime_dir)
    return 0


def _session_status(args: list[str]) -> int | None:
    options = _parse(args)
    if options is None or len(options.positionals) != 1:
        return None
    from glove.cli._status import show_session_status

    show_session_status(options.positionals[0], options.as_json, options.runtime_dir)
    return 0


def run(args: list[str]) -> int | None:
    """Run ``glove ARGS`` if it is one of the commands this module answers: its exit code.

    ``None`` when typer must parse ``args`` (nothing has been printed then). A failure is
    the commands' own: one line on stderr and :class:`SystemExit` with its code.
    """
    if args == ["--version"]:
        echo(f"glove {__version__}")
        return 0
    if args in (["--help"], ["-h"]):
        return _help()
    if args[:1] == ["capabilities"]:
        return _capabilities(args[1:])
    if args[:2] == ["session", "status"]:
        return _session_status(args[2:])
    return None
