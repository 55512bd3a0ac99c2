"""``glove doctor``: check what the sandbox needs and explain what is missing."""

from __future__ import annotations

import typer

from glove.exits import EXIT_FAILED

_MARK = {"ok": "[ ok ]", "warn": "[warn]", "fail": "[FAIL]"}


def register(app: typer.Typer) -> None:
    """Add the ``doctor`` command to ``app``."""

    @app.command("doctor")
    def doctor(
        json_output: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Check this machine for everything the sandbox needs; exit 1 if a required check fails."""
        import msgspec

        from glove.host import run_checks

        report = run_checks()
        if json_output:
            typer.echo(msgspec.json.encode(report).decode())
        else:
            typer.echo(f"glove doctor: kernel {report.kernel}, uid {report.uid}")
            for check in report.checks:
                need = "required" if check.required else "optional"
                typer.echo(f"{_MARK[check.status]} {check.name} ({need}): {check.summary}")
                for line in check.detail.splitlines():
                    typer.echo(f"       {line}")
                if check.fix and check.status != "ok":
                    typer.echo(f"       fix: {check.fix}")
            verdict = "all required checks passed" if report.ok else "a required check FAILED"
            typer.echo(f"glove doctor: {verdict}")
        if not report.ok:
            raise typer.Exit(EXIT_FAILED)
