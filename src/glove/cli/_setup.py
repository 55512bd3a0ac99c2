"""``glove setup``: create Glove's own files for this user (owner-only; idempotent).

Exit codes: 0 done (or nothing to do); 1 a path is unsafe or a file cannot be written.
"""

from __future__ import annotations

import typer

from glove.exits import EXIT_FAILED


def register(app: typer.Typer) -> None:
    """Add the ``setup`` command to ``app``."""

    @app.command("setup")
    def setup_cmd(
        as_json: bool = typer.Option(False, "--json", help="Print what was made as JSON."),
    ) -> None:
        """Create the config, state and runtime directories, the keys and gloved.toml."""
        import msgspec

        from glove.errors import GloveError
        from glove.host import setup

        try:
            report = setup()
        except (GloveError, OSError) as exc:
            text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            typer.echo(f"glove setup: {text}", err=True)
            raise typer.Exit(EXIT_FAILED) from exc
        if as_json:
            typer.echo(msgspec.json.encode(report).decode())
            return
        if not report.changed:
            typer.echo("glove setup: everything is already in place; nothing changed")
        for path in report.created:
            typer.echo(f"created {path}")
        typer.echo(f"config:   {report.config}")
        typer.echo(f"state:    {report.state_dir} (receipts: {report.receipts_journal})")
        typer.echo(f"runtime:  {report.runtime_dir}")
        typer.echo(f"receipts public key: {report.public_key}")
