"""``glove exec``: run a command in the sandbox.

The options are defined once, with argparse, so ``glove exec`` can run without typer at all:
:func:`glove.cli.main` sends ``glove exec ...`` straight to :func:`main`, which keeps the CLI
launch close to the interpreter's own start (typer and its validation layer cost more than
the sandbox itself). The typer registration only lists the command in ``glove --help`` and
forwards its arguments here.
"""

# No ``from __future__ import annotations`` here: typer reads the stub's annotations at
# registration time, and ``typer`` is imported inside ``register`` only.
import argparse
import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import typer

EXIT_USAGE: Final = 125  # a usage error is a setup failure: nothing ran

_EPILOG: Final = (
    "Exit status: the command's own code; 128+N if killed by signal N (limits kill with "
    "SIGKILL: 137); 125 sandbox setup failed or bad usage (nothing ran); 126 command not "
    "executable; 127 command not found. --json-status tells these apart from the command's "
    "own codes."
)
_SUMMARY: Final = "Run CMD inside the sandbox: own namespaces, minimal root, no network, limits."


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"glove exec: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``glove exec`` argument parser (the one definition of its options)."""
    p = _Parser(prog="glove exec", description=_SUMMARY, epilog=_EPILOG)
    p.add_argument("--profile", help="profile name or path (default: the embedded 'default')")
    p.add_argument("--workspace", help="workspace directory (default: the current directory)")
    p.add_argument("--workspace-mode", choices=("rw", "ro"), help="bind the workspace rw or ro")
    p.add_argument(
        "--bind", action="append", default=[], metavar="SRC[:DST[:ro|rw]]", help="repeatable"
    )
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="repeatable")
    p.add_argument("--network", default="none", choices=("none",), help="only loopback")
    p.add_argument("--pty", action="store_true", help="give the command a fresh terminal")
    p.add_argument("--wall-time", metavar="SECONDS")
    p.add_argument("--cpu-time", metavar="SECONDS")
    p.add_argument("--memory", metavar="BYTES", help="e.g. 64M, 1G")
    p.add_argument("--pids", metavar="N", help="tasks alive at once")
    p.add_argument("--disk", metavar="BYTES", help="writable scratch bytes")
    p.add_argument("--output", metavar="BYTES", help="output bytes before the cut")
    p.add_argument(
        "--accept-weaker",
        action="append",
        default=[],
        metavar="LIMIT|all",
        help="allow a per-process mechanism for LIMIT (repeatable)",
    )
    p.add_argument("--json-status", metavar="FILE|FD", help="where to write the result")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    return p


def main(argv: list[str]) -> int:
    """Parse ``argv`` (what follows ``glove exec``), run the sandbox, return the exit code."""
    args = build_parser().parse_args(argv)
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        build_parser().error("a command to run is required: glove exec [OPTIONS] -- CMD")
    from glove.run import ExecOptions, exec_command

    opts = ExecOptions(
        argv=command,
        profile=args.profile,
        workspace=args.workspace,
        workspace_mode=args.workspace_mode,
        binds=args.bind,
        env=args.env,
        network=args.network,
        pty=args.pty,
        wall_time=args.wall_time,
        cpu_time=args.cpu_time,
        memory=args.memory,
        pids=args.pids,
        disk=args.disk,
        output=args.output,
        accept_weaker=args.accept_weaker,
        json_status=args.json_status,
    )
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
