"""``glove exec``: run a command in the sandbox (thin typer layer over ``glove.run``)."""

from __future__ import annotations

import typer

_EPILOG = (
    "Exit status: the command's own code; 128+N if killed by signal N (limits kill with "
    "SIGKILL: 137); 125 sandbox setup failed (nothing ran); 126 command not executable; "
    "127 command not found. --json-status tells these apart from the command's own codes."
)


def register(app: typer.Typer) -> None:
    """Add the ``exec`` command to ``app``."""

    @app.command(
        "exec",
        context_settings={"allow_interspersed_args": False},
        epilog=_EPILOG,
    )
    def exec_(  # noqa: PLR0917 - typer maps each parameter to an option
        command: list[str] = typer.Argument(..., help="The command and its arguments."),
        profile: str | None = typer.Option(None, "--profile", help="Profile name or path."),
        workspace: str | None = typer.Option(None, "--workspace", help="Workspace directory."),
        workspace_mode: str | None = typer.Option(None, "--workspace-mode", help="rw or ro."),
        bind: list[str] = typer.Option([], "--bind", help="SRC[:DST[:ro|rw]], repeatable."),
        env: list[str] = typer.Option([], "--env", help="KEY=VALUE, repeatable."),
        network: str = typer.Option("none", "--network", help="Only 'none' (loopback)."),
        pty: bool = typer.Option(False, "--pty", help="Give the command a fresh terminal."),
        wall_time: str | None = typer.Option(None, "--wall-time", help="Seconds."),
        cpu_time: str | None = typer.Option(None, "--cpu-time", help="CPU seconds."),
        memory: str | None = typer.Option(None, "--memory", help="Bytes (64M, 1G)."),
        pids: str | None = typer.Option(None, "--pids", help="Tasks alive at once."),
        disk: str | None = typer.Option(None, "--disk", help="Writable scratch bytes."),
        output: str | None = typer.Option(None, "--output", help="Output bytes before cut."),
        accept_weaker: list[str] = typer.Option(
            [], "--accept-weaker", help="LIMIT or all: allow a per-process mechanism."
        ),
        json_status: str | None = typer.Option(
            None, "--json-status", help="FILE or FD for the structured result."
        ),
    ) -> None:
        """Run CMD inside the sandbox: own namespaces, minimal root, no network, limits."""
        from glove.run import ExecOptions, exec_command

        if workspace_mode not in (None, "rw", "ro"):
            typer.echo("glove exec: --workspace-mode must be rw or ro", err=True)
            raise typer.Exit(125)
        opts = ExecOptions(
            argv=command,
            profile=profile,
            workspace=workspace,
            workspace_mode=workspace_mode,  # type: ignore[arg-type]
            binds=bind,
            env=env,
            network=network,
            pty=pty,
            wall_time=wall_time,
            cpu_time=cpu_time,
            memory=memory,
            pids=pids,
            disk=disk,
            output=output,
            accept_weaker=accept_weaker,
            json_status=json_status,
        )
        raise typer.Exit(exec_command(opts))
