"""The ``glove`` command line: parse, call the library, print.

Each command family lives in its own module exposing ``register(app)``; this module only
assembles them. Command modules import nothing heavy at module level so ``glove --help``
stays fast: the work a command does is imported inside the command.
"""

from __future__ import annotations

import importlib

import typer

from glove._version import __version__

# Command families, in the order ``glove --help`` lists them. A module is listed here only
# once its commands work end to end.
_COMMAND_MODULES = (
    "glove.host.doctor_cli",
    "glove.run.exec_cli",
    "glove.control.diag_cli",
    "glove.journal.cli",
    "glove.policy.cli",
    "glove.mcp.cli",
    "glove.run.run_cli",
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"glove {__version__}")
        raise typer.Exit


def build_app() -> typer.Typer:
    """Assemble the typer application from the registered command modules."""
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

    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


def main() -> None:
    """Entry point of the ``glove`` console script."""
    build_app()()


if __name__ == "__main__":
    main()
