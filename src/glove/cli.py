"""The ``glove`` command line: parse, call the library, print.

Each command family lives in its own module exposing ``register(app)``; this module only
assembles them. Command modules import nothing heavy at module level so ``glove --help``
stays fast: the work a command does is imported inside the command.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from glove._version import __version__

if TYPE_CHECKING:
    import typer

# Command families: the top-level command each module registers, in the order
# ``glove --help`` lists them. A module is listed here only once its commands work end to
# end. A run of one command imports only that command's module (``glove exec`` must not pay
# for the journal, policy or MCP imports); ``--help`` imports them all.
_COMMAND_MODULES = {
    "doctor": "glove.host.doctor_cli",
    "exec": "glove.run.exec_cli",
    "run": "glove.run.run_cli",
    "mcp": "glove.mcp.cli",
    "policy": "glove.policy.cli",
    "journal": "glove.journal.cli",
    "diag": "glove.control.diag_cli",
    "network": "glove.egress.cli",
}


# Commands whose module parses its own arguments (``main(argv) -> int``): run without
# building the typer app at all, because they sit on a launch hot path.
_FAST_COMMANDS = {"exec": "glove.run.exec_cli"}


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

    wanted = [_COMMAND_MODULES[only]] if only in _COMMAND_MODULES else _COMMAND_MODULES.values()
    for module in wanted:
        importlib.import_module(module).register(app)
    return app


def main() -> None:
    """Entry point of the ``glove`` console script."""
    args = sys.argv[1:]
    if args and args[0] in _FAST_COMMANDS:
        sys.exit(importlib.import_module(_FAST_COMMANDS[args[0]]).main(args[1:]))
    build_app(only=args[0] if args else None)()


if __name__ == "__main__":
    main()
