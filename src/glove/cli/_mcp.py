"""``glove mcp``: the MCP mediator on this process's stdio (or Streamable HTTP).

Imports nothing heavy at module level, so ``glove --help`` stays fast. ``glove mcp serve``
sits on a start-up hot path (an MCP client launches it and waits for its first answer), so
:func:`main` parses it with argparse, without building the typer app; every other
``glove mcp`` command (and ``--help``) goes through typer as usual.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from glove.exits import EXIT_INVALID, EXIT_USAGE

if TYPE_CHECKING:
    import subprocess

    import typer

    from glove.mcp import HttpOptions, McpConfig

MAX_TOKEN_FILE_BYTES = 4096


class _Done(Exception):
    """``glove mcp serve`` ends with this exit code (raised, so typer and argparse share it)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _say(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _usage(message: str) -> NoReturn:
    _say(f"glove mcp serve: {message}")
    raise _Done(EXIT_USAGE)


def _http_options(
    listen: str,
    token_file: Path | None,
    allow_host: list[str],
    max_sessions: int,
    session_idle_s: float,
) -> HttpOptions:
    """The HTTP front's options from the command line (a usage error exits 64)."""
    from glove.mcp import HttpOptions, is_loopback, parse_listen

    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        _usage(str(exc))
    token = None
    if token_file is not None:
        try:
            token = token_file.read_bytes()[:MAX_TOKEN_FILE_BYTES].decode().strip()
        except (OSError, UnicodeDecodeError) as exc:
            _usage(f"cannot read --token-file {token_file}: {exc}")
        if not token or any(c.isspace() for c in token):
            _usage(f"--token-file {token_file} must hold one token without spaces")
    if not is_loopback(host) and token is None:
        _usage(f"{host} is not a loopback address: give --token-file to serve it")
    if max_sessions < 1 or session_idle_s <= 0:
        _usage("--max-sessions and --session-idle-s must be positive")
    return HttpOptions(
        host=host,
        port=port,
        token=token,
        allowed_hosts=tuple(allow_host),
        max_sessions=max_sessions,
        session_idle_s=session_idle_s,
    )


def _serve_parser() -> argparse.ArgumentParser:
    from glove.usage import UsageParser

    parser = UsageParser(prog="glove mcp serve", add_help=False)
    parser.add_argument("--config", "-c", required=True, type=Path)
    parser.add_argument("--http")
    parser.add_argument("--token-file", type=Path)
    parser.add_argument("--allow-host", action="append", default=[])
    parser.add_argument("--max-sessions", type=int, default=64)
    parser.add_argument("--session-idle-s", type=float, default=1800.0)
    return parser


def main(argv: list[str]) -> int:
    """``glove mcp ARGV``: ``serve`` parsed here (fast), everything else through typer.

    Returns the exit code.
    """
    if argv[:1] == ["serve"] and not {"-h", "--help"} & set(argv[1:]):
        opts = _serve_parser().parse_args(argv[1:])
        try:
            return _serve(
                opts.config,
                opts.http,
                opts.token_file,
                opts.allow_host,
                (opts.max_sessions, opts.session_idle_s),
                prestart=True,
            )
        except _Done as done:
            return done.code
    from glove.cli._main import _one_usage_code, build_app

    _one_usage_code()
    try:
        build_app(only="mcp")(args=["mcp", *argv], prog_name="glove")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 0
    return 0


def _serve(
    config: Path,
    http: str | None,
    token_file: Path | None,
    allow_host: list[str],
    limits: tuple[int, float],
    *,
    prestart: bool = False,
) -> int:
    """Run ``glove mcp serve``; return its exit code (imports no typer on the way).

    Raises:
        _Done: a usage error (64).
    """
    # The stdio upstreams are spawned first, with only the configuration module loaded
    # (glove.mcp imports lazily): their start-up then overlaps Glove's own (_prestart).
    from glove.mcp import load_config
    from glove.mcp.errors import McpError

    started: dict[str, subprocess.Popen[bytes]] = {}
    early: McpConfig | None = None
    if http is None and prestart:
        from glove.mcp import prestart as spawn_early

        try:
            early = load_config(config)
        except McpError as exc:
            _say(f"glove mcp serve: {exc}")
            return EXIT_INVALID
        started = spawn_early(early)
    try:
        return _serve_now(
            config,
            http,
            token_file=token_file,
            allow_host=allow_host,
            limits=limits,
            early=early,
            started=started,
        )
    finally:
        if started:
            from glove.mcp import kill_all

            kill_all(started)


def _serve_now(
    config: Path,
    http: str | None,
    *,
    token_file: Path | None,
    allow_host: list[str],
    limits: tuple[int, float],
    early: McpConfig | None,
    started: dict[str, subprocess.Popen[bytes]],
) -> int:
    import asyncio
    import logging
    from collections.abc import Awaitable, Callable

    from glove.errors import GloveError
    from glove.mcp import load_config

    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="glove mcp: %(levelname)s %(message)s"
    )
    main: Callable[[], Awaitable[int]]
    if http is None:
        if token_file is not None or allow_host:
            _usage("--token-file and --allow-host need --http")
        from glove.mcp import serve as serve_agent
        from glove.mcp import stdio_streams

        async def main() -> int:
            settings = early if early is not None else load_config(config)
            reader, writer = await stdio_streams()
            return await serve_agent(settings, reader, writer, prestarted=started)

    else:
        options = _http_options(http, token_file, allow_host, *limits)
        from glove.mcp import serve_http

        def ready(port: int) -> None:
            host = f"[{options.host}]" if ":" in options.host else options.host
            _say(f"glove mcp: serving http://{host}:{port}/mcp")

        async def main() -> int:
            return await serve_http(load_config(config), options, ready=ready)

    try:
        return asyncio.run(main())
    except GloveError as exc:
        _say(f"glove mcp serve: {exc}")
        return EXIT_INVALID
    except OSError as exc:
        _say(f"glove mcp serve: cannot listen on {http}: {exc.strerror}")
        return EXIT_INVALID


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command group to ``app``."""
    import typer

    group = typer.Typer(
        name="mcp", help="MCP mediation: policy-checked, audited tool calls.", no_args_is_help=True
    )

    @group.command("serve")
    def serve(  # noqa: PLR0917 - typer maps each option to a parameter
        config: Path = typer.Option(..., "--config", "-c", help="Mediator configuration (TOML)."),
        http: str | None = typer.Option(
            None, "--http", help="Serve Streamable HTTP on HOST:PORT instead of stdio."
        ),
        token_file: Path | None = typer.Option(
            None, "--token-file", help="With --http: require this file's bearer token."
        ),
        allow_host: list[str] = typer.Option(
            [], "--allow-host", help="With --http: one more name Host/Origin may carry."
        ),
        max_sessions: int = typer.Option(64, "--max-sessions", help="With --http: live sessions."),
        session_idle_s: float = typer.Option(
            1800.0, "--session-idle-s", help="With --http: end a session idle this long."
        ),
    ) -> None:
        """Serve MCP on stdin/stdout (or Streamable HTTP): upstream tools, prompts and
        resources, checked by policy and audited."""
        try:
            code = _serve(config, http, token_file, allow_host, (max_sessions, session_idle_s))
        except _Done as done:
            code = done.code
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
        from glove.mcp import list_tools, load_config

        logging.basicConfig(
            stream=sys.stderr, level=logging.WARNING, format="glove mcp: %(levelname)s %(message)s"
        )
        try:
            listings = asyncio.run(list_tools(load_config(config)))
        except GloveError as exc:
            typer.echo(f"glove mcp tools: {exc}", err=True)
            raise typer.Exit(EXIT_INVALID) from exc
        if as_json:
            typer.echo(msgspec.json.encode({"tools": listings}).decode())
            return
        width = max([len(item.name) for item in listings] + [4])
        typer.echo(f"{'TOOL':<{width}}  {'VERDICT':<7}  RULE / WHY")
        for item in listings:
            verdict = "listed" if item.listed else "hidden"
            typer.echo(f"{item.name:<{width}}  {verdict:<7}  {item.reason}")

    app.add_typer(group)
