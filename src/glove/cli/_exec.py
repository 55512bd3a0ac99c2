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
import os
import sys
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


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, sized without ``shutil``.

    argparse builds a formatter for every ``add_argument`` (to check the metavar), and one
    left to size itself imports ``shutil`` (with bz2, lzma and fnmatch) for
    ``get_terminal_size``: about 3% of ``glove exec``'s imports, for a width only ``--help``
    uses. The width is found the same way: ``$COLUMNS``, else the terminal of stdout, else 80.
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = _columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def build_parser() -> argparse.ArgumentParser:
    """The ``glove exec`` argument parser."""
    # glove.run (the sandbox) only once the command runs: `glove --help` lists this module.
    from glove.run import add_sandbox_arguments

    parser = UsageParser(
        prog="glove exec", description=_SUMMARY, epilog=EPILOG, formatter_class=_Formatter
    )
    parser.add_argument(
        "--audit",
        metavar="FILE",
        help="with --network proxy: the egress audit log (default: "
        "$XDG_STATE_HOME/glove/egress-audit.log; glove run uses its config's log)",
    )
    add_sandbox_arguments(parser)
    return parser


def _import_msgspec_alone() -> None:
    """Import msgspec without ``typing_extensions`` (a third of msgspec's import here).

    msgspec takes ``get_type_hints``, ``Required`` and ``NotRequired`` from
    ``typing_extensions`` when it is installed (it is: typer and the MCP SDK need it), and
    from ``typing`` otherwise; on Python 3.11+ those are the same functions and markers for
    every annotation Glove's Structs use (Glove imports nothing from ``typing_extensions``),
    and ``typing_extensions`` itself imports ``inspect``, ``ast``, ``dis`` and ``tokenize``.
    So while msgspec is first imported, ``typing_extensions`` is refused (its
    ``sys.modules`` entry is None); the entry is removed right after, so a later import of
    ``typing_extensions`` finds the real module. ``glove exec`` is one thread here.
    """
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    try:
        import msgspec  # noqa: F401 - kept in sys.modules
    finally:
        del sys.modules["typing_extensions"]


def main(argv: list[str]) -> int:
    """Parse ``argv`` (what follows ``glove exec``), run the sandbox, return the exit code."""
    _import_msgspec_alone()
    parser = build_parser()
    from glove.run import exec_command, sandbox_options

    opts = sandbox_options(parser, parser.parse_args(argv))

    code = exec_command(opts)
    _exit_without_teardown(code)
    return code


def _exit_without_teardown(code: int) -> None:
    """End the process with ``code`` now, skipping the interpreter's teardown, when nothing
    but ``sys.stdout`` and ``sys.stderr`` can still hold data.

    Tearing down the ~180 modules of the launch path costs a ``glove exec`` about a sixth of
    its CPU, after the sandbox is gone and its result written (the ``--json-status``
    document is an ``os.write`` and its descriptor closed, the cgroups removed). It is
    skipped only while this process has one thread and never loaded the egress proxy
    (``--network proxy`` writes an audit log from its own threads): then the two streams
    are flushed and the process exits. A flush that fails returns to the ordinary exit,
    which reports it as Python does.
    """
    threads = sys.modules.get("threading")
    if "glove.egress" in sys.modules or (threads is not None and threads.active_count() != 1):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


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
