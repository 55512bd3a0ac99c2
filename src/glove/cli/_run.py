"""``glove run``: an agent in the ``glove exec`` sandbox, its MCP tools mediated on the host.

It takes every ``glove exec`` option (one definition, :mod:`glove.run._options`) plus
``--config``, and like ``glove exec`` it parses with argparse and runs without typer. The
orchestration is :func:`glove.run.run_agent`. See ``docs/mcp.md`` ("glove run").
"""

# No ``from __future__ import annotations`` here: typer reads the stub's annotations.
import argparse
from typing import TYPE_CHECKING, Final

from glove.usage import UsageParser

if TYPE_CHECKING:
    import typer

EPILOG: Final = (
    "Exit status: the agent's own code; 128+N if killed by signal N; 64 bad usage; 124 the "
    "mediation failed while the agent ran (it was stopped); 125 the mediation or the sandbox "
    "could not be set up (nothing ran); 126/127 the agent could not be executed."
)
_SUMMARY: Final = (
    "Run AGENT in the sandbox with a mediated MCP server at /opt/glove/glove-mcp: every tool "
    "call is checked by policy, audited, then forwarded to the host-side servers."
)


def build_parser() -> argparse.ArgumentParser:
    """The ``glove run`` argument parser: ``--config`` and every ``glove exec`` option."""
    # glove.run (the sandbox) only once the command runs: `glove --help` lists this module.
    from glove.run import add_sandbox_arguments

    parser = UsageParser(prog="glove run", description=_SUMMARY, epilog=EPILOG)
    parser.add_argument(
        "-c", "--config", required=True, metavar="FILE", help="mediator configuration (TOML)"
    )
    add_sandbox_arguments(parser)
    return parser


def main(argv: list[str]) -> int:
    """Parse ``argv`` (what follows ``glove run``), run the agent, return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from glove.run import run_agent, sandbox_options

    opts = sandbox_options(parser, args)

    return run_agent(opts, args.config)


def register(app: "typer.Typer") -> None:
    """List ``run`` in ``app`` and forward its arguments to :func:`main`."""
    import typer

    @app.command(
        "run",
        help=_SUMMARY + " Options: glove run --help.",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
    def run_(ctx: typer.Context) -> None:
        raise typer.Exit(main(list(ctx.args)))
