"""``glove diag tree``: print the live actor tree of a running ``gloved``."""

from __future__ import annotations

from pathlib import Path

import typer

from glove.exits import EXIT_FAILED


def register(app: typer.Typer) -> None:
    """Add the ``diag`` command group to ``app``."""
    diag = typer.Typer(help="Inspect a running gloved.", no_args_is_help=True)

    @diag.command("tree")
    def tree(
        json_output: bool = typer.Option(False, "--json", help="Print the snapshot as JSON."),
        runtime_dir: Path | None = typer.Option(
            None,
            "--runtime-dir",
            help="gloved's runtime directory (default: the one `glove doctor` names).",
        ),
    ) -> None:
        """Print gloved's live supervision tree: states, mailboxes, restarts, loop lag."""
        import msgspec

        from glove.actors import TreeSnapshot, render_tree
        from glove.control import ControlError, RuntimePaths, call, default_runtime_dir

        paths = RuntimePaths(runtime_dir or default_runtime_dir())
        try:
            result = call(paths.socket, "diag.tree")
        except ControlError as exc:
            typer.echo(f"glove diag tree: {exc}", err=True)
            raise typer.Exit(EXIT_FAILED) from exc
        if json_output:
            typer.echo(msgspec.json.encode(result).decode())
            return
        typer.echo(render_tree(msgspec.convert(result, TreeSnapshot)))

    app.add_typer(diag, name="diag")
