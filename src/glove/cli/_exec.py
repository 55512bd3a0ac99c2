"""``glove exec``: run a command in the sandbox.

The options are defined once (:mod:`glove.run._options`, shared with ``glove run``), with
argparse, so ``glove exec`` runs without typer at all: :func:`glove.cli.main` sends ``glove
exec ...`` straight to :func:`main`, which keeps the CLI launch close to the interpreter's
own start. The typer registration only lists the command in ``glove --help`` and forwards
its arguments here.
"""

# No ``from __future__ import annotations`` here: typer reads the stub's annotations at
# registration time, and ``typer`` is imported inside ``register`` only.
import argparse
from typing import TYPE_CHECKING, Final

from glove.usage import UsageParser

if TYPE_CHECKING:
    import typer

EPILOG: Final = (
    "Exit status: the command's own code; 128+N if killed by signal N (limits kill with "
    "SIGKILL: 137); 64 bad usage (nothing ran); 125 sandbox setup failed (nothing ran); 126 "
    "command not executable; 127 command not found. --json-status tells these apart from "
    "the command's own codes."
)
_SUMMARY: Final = "Run CMD inside the sandbox: own namespaces, minimal root, no network, limits."


def build_parser() -> argparse.ArgumentParser:
    """The ``glove exec`` argument parser."""
    # glove.run (the sandbox) only once the command runs: `glove --help` lists this module.
    from glove.run import add_sandbox_arguments

    parser = UsageParser(prog="glove exec", description=_SUMMARY, epilog=EPILOG)
    parser.add_argument(
        "--audit",
        metavar="FILE",
        help="with --network proxy: the egress audit log (default: "
        "$XDG_STATE_HOME/glove/egress-audit.log; glove run uses its config's log)",
    )
    add_sandbox_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    """Parse ``argv`` (what follows ``glove exec``), run the sandbox, return the exit code."""
    parser = build_parser()
    from glove.run import exec_command, sandbox_options

    opts = sandbox_options(parser, parser.parse_args(argv))

    return exec_command(opts)


def register(app: "typer.Typer") -> None:
    """List ``exec`` in ``app`` and forward its arguments to :func:`main`."""
    import typer

    @app.command(
        "exec",
        help=_SUMMARY + " Options: glove exec --help.",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
    def exec_(ctx: typer.Context) -> None:
        raise typer.Exit(main(list(ctx.args)))
