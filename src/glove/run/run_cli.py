"""``glove run``: an agent in the ``glove exec`` sandbox, its MCP tools mediated on the host.

Thin typer layer: the orchestration is :func:`glove.mcp._run.run_mediated`, the sandbox is
:mod:`glove.container`. The sandbox's command is ``glove-relay`` (one process, counted in
the PID limit) wrapping the agent, and the relay's channel to the mediator is passed in as
descriptor 3. See ``docs/mcp.md`` ("glove run").
"""

from __future__ import annotations

import typer

EXIT_SETUP_FAILED = 125
EXIT_MEDIATION_FAILED = 124  # the mediation failed under the running agent, which was killed


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to ``app``."""

    @app.command("run", context_settings={"allow_interspersed_args": False})
    def run_(  # noqa: PLR0917 - typer maps each parameter to an option
        command: list[str] = typer.Argument(..., help="The agent and its arguments."),
        config: str = typer.Option(..., "--config", "-c", help="Mediator configuration (TOML)."),
        profile: str | None = typer.Option(None, "--profile", help="Sandbox profile name or path."),
        workspace: str | None = typer.Option(None, "--workspace", help="Workspace directory."),
        bind: list[str] = typer.Option([], "--bind", help="SRC[:DST[:ro|rw]], repeatable."),
        env: list[str] = typer.Option([], "--env", help="KEY=VALUE, repeatable."),
        accept_weaker: list[str] = typer.Option(
            [], "--accept-weaker", help="LIMIT or all: allow a per-process mechanism."
        ),
    ) -> None:
        """Run AGENT in the sandbox with a mediated MCP server at /opt/glove/glove-mcp."""
        import asyncio
        import logging
        import os
        import sys
        from pathlib import Path

        import msgspec

        from glove.container import (
            Bind,
            Overrides,
            SandboxError,
            build_spec,
            load_profile,
            run_async,
        )
        from glove.errors import GloveError
        from glove.mcp._config import load_config
        from glove.mcp._run import GUEST_DIR, GuestSetup, run_mediated
        from glove.mcp.errors import MediationFailed
        from glove.run import parse_bind

        logging.basicConfig(
            stream=sys.stderr, level=logging.WARNING, format="glove run: %(levelname)s %(message)s"
        )
        cwd = str(Path.cwd())

        async def sandbox(setup: GuestSetup) -> int:
            extra_env = dict(item.split("=", 1) for item in env if "=" in item)
            overrides = Overrides(
                workspace=workspace,
                binds=(
                    *(parse_bind(text, cwd) for text in bind),
                    Bind(source=setup.bind_dir, target=GUEST_DIR, mode="ro"),
                ),
                env={**extra_env, **setup.env},
                accept_weaker=frozenset(accept_weaker),
            )
            spec = build_spec(
                load_profile(profile),
                setup.command(command),
                cwd=cwd,
                host_env=dict(os.environ),
                overrides=overrides,
            )
            spec = msgspec.structs.replace(spec, pass_fds=setup.pass_fds)
            result = await run_async(spec)
            if result.outcome in ("setup_error", "exec_error", "limit") and result.error:
                sys.stderr.write(f"glove run: {result.error}\n")
            return result.exit_code

        async def main() -> int:
            return await run_mediated(load_config(config), sandbox)

        if any("=" not in item for item in env):
            typer.echo("glove run: --env wants KEY=VALUE", err=True)
            raise typer.Exit(EXIT_SETUP_FAILED)
        try:
            code = asyncio.run(main())
        except MediationFailed as exc:
            typer.echo(f"glove run: {exc}", err=True)
            raise typer.Exit(EXIT_MEDIATION_FAILED) from exc
        except (GloveError, SandboxError) as exc:
            typer.echo(f"glove run: {exc}", err=True)
            raise typer.Exit(EXIT_SETUP_FAILED) from exc
        raise typer.Exit(code)
