"""The ``glove`` command line: parse, call the library, print.

Each command family lives in its own module of this package exposing ``register(app)``; this
module only assembles them. Command modules import nothing heavy at module level so ``glove --help``
stays fast: the work a command does is imported inside the command.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from glove._version import __version__
from glove.exits import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE

if TYPE_CHECKING:
    import typer

# Command families: the top-level command each module registers, in the order
# ``glove --help`` lists them. A module is listed here only once its commands work end to
# end. A run of one command imports only that command's module (``glove exec`` must not pay
# for the journal, policy or MCP imports); ``--help`` imports them all.
_COMMAND_MODULES = {
    "setup": "glove.cli._setup",
    "init": "glove.cli._session",
    "capabilities": "glove.cli._session",
    "plan": "glove.cli._session",
    "session": "glove.cli._session",
    "attach": "glove.cli._attach",
    "doctor": "glove.cli._doctor",
    "exec": "glove.cli._exec",
    "run": "glove.cli._run",
    "mcp": "glove.cli._mcp",
    "audit": "glove.cli._audit",
    "policy": "glove.cli._policy",
    "journal": "glove.cli._journal",
    "receipts": "glove.cli._receipts",
    "library": "glove.cli._library",
    "eval": "glove.cli._eval",
    "diag": "glove.cli._diag",
    "daemon": "glove.cli._daemon",
    "network": "glove.cli._network",
}


# Commands whose module parses its own arguments (``main(argv) -> int``): run without
# building the typer app at all, because they sit on a launch hot path.
_FAST_COMMANDS = {
    "exec": "glove.cli._exec",
    "run": "glove.cli._run",
    # `glove mcp serve` is launched by MCP clients that wait for its first answer; its
    # module parses `serve` itself and hands every other `glove mcp` command to typer.
    "mcp": "glove.cli._mcp",
}


def _version_callback(value: bool) -> None:
    import typer

    if value:
        typer.echo(f"glove {__version__}")
        raise typer.Exit


def build_app(only: str | None = None) -> typer.Typer:
    """Assemble the typer application from the registered command modules.

    With ``only`` naming a registered command, just that command's module is imported.
    """
    import typer

    app = typer.Typer(
        name="glove",
        help="Contain AI coding agents: sandbox, MCP mediation, audit and receipts.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False,
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ) -> None:
        """Glove: contain AI coding agents."""

    every = list(dict.fromkeys(_COMMAND_MODULES.values()))  # a module may hold several
    wanted = [_COMMAND_MODULES[only]] if only in _COMMAND_MODULES else every
    for module in wanted:
        importlib.import_module(module).register(app)
    return app


def _one_usage_code() -> None:
    """Make click's usage errors one line exiting :data:`EXIT_USAGE`, like the argparse
    commands (:func:`glove.usage.one_line_click_errors`)."""
    from glove.usage import one_line_click_errors

    one_line_click_errors(EXIT_USAGE)


def main() -> None:
    """Entry point of the ``glove`` console script.

    Every failure Glove means to report is a one-line message and a documented exit code
    (docs/cli.md). Anything else is a bug: it too becomes one line and exit
    :data:`EXIT_INTERNAL` (``GLOVE_DEBUG=1`` shows the traceback), never a traceback.
    """
    args = sys.argv[1:]
    command = args[0] if args else None
    try:
        from glove.cli._fast import run as run_fast

        done = run_fast(args)
        if done is not None:
            sys.exit(done)
        if command in _FAST_COMMANDS:
            sys.exit(importlib.import_module(_FAST_COMMANDS[command]).main(args[1:]))
        _one_usage_code()
        build_app(only=command)()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except BaseException as exc:  # the last resort: never a traceback (it is a bug)
        if os.environ.get("GLOVE_DEBUG") == "1":
            raise
        what = f"glove {command}" if command in _COMMAND_MODULES else "glove"
        sys.stderr.write(
            f"{what}: internal error: {type(exc).__name__}: {exc} (a bug in Glove; "
            "GLOVE_DEBUG=1 shows where)\n"
        )
        sys.exit(EXIT_INTERNAL)
