"""``glove mcp``: the MCP mediator on this process's stdio.

Imports nothing heavy at module level, so ``glove --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

EXIT_CONFIG_ERROR = 2


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command group to ``app``."""
    group = typer.Typer(
        name="mcp", help="MCP mediation: policy-checked, audited tool calls.", no_args_is_help=True
    )

    @group.command("serve")
    def serve(
        config: Path = typer.Option(..., "--config", "-c", help="Mediator configuration (TOML)."),
    ) -> None:
        """Serve MCP on stdin/stdout: upstream tools, checked by policy and audited."""
        import asyncio
        import logging
        import sys

        from glove.errors import GloveError
        from glove.mcp._config import load_config
        from glove.mcp._service import serve as serve_agent
        from glove.mcp._service import stdio_streams

        logging.basicConfig(
            stream=sys.stderr, level=logging.WARNING, format="glove mcp: %(levelname)s %(message)s"
        )

        async def main() -> int:
            settings = load_config(config)
            reader, writer = await stdio_streams()
            return await serve_agent(settings, reader, writer)

        try:
            code = asyncio.run(main())
        except GloveError as exc:
            typer.echo(f"glove mcp serve: {exc}", err=True)
            raise typer.Exit(EXIT_CONFIG_ERROR) from exc
        raise typer.Exit(code)

    @group.command("tools")
    def tools(
        config: Path = typer.Option(..., "--config", "-c", help="Mediator configuration (TOML)."),
        as_json: bool = typer.Option(False, "--json", help="Print the tools as JSON."),
    ) -> None:
        """Start the upstreams and list every tool: its exposed name and the policy's verdict."""
        import asyncio
        import logging
        import sys

        import msgspec

        from glove.errors import GloveError
        from glove.mcp._config import load_config
        from glove.mcp._inspect import list_tools

        logging.basicConfig(
            stream=sys.stderr, level=logging.WARNING, format="glove mcp: %(levelname)s %(message)s"
        )
        try:
            listings = asyncio.run(list_tools(load_config(config)))
        except GloveError as exc:
            typer.echo(f"glove mcp tools: {exc}", err=True)
            raise typer.Exit(EXIT_CONFIG_ERROR) from exc
        if as_json:
            typer.echo(msgspec.json.encode({"tools": listings}).decode())
            return
        width = max([len(item.name) for item in listings] + [4])
        typer.echo(f"{'TOOL':<{width}}  {'VERDICT':<7}  RULE / WHY")
        for item in listings:
            verdict = "listed" if item.listed else "hidden"
            typer.echo(f"{item.name:<{width}}  {verdict:<7}  {item.reason}")

    app.add_typer(group)
