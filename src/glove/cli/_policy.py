"""``glove policy check|explain|pin``: validate a policy, ask it a question, pin tool definitions.

Parse, call :mod:`glove.policy`, print. Exit codes: 0 valid / allowed; 1 denied
(``explain``); 2 the policy file or an input is invalid.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

import typer

from glove.exits import EXIT_DENIED, EXIT_INVALID, EXIT_OK

MAX_PIN_INPUT_BYTES: Final = 16 * 1024 * 1024


def register(app: typer.Typer) -> None:
    """Add the ``policy`` command group to ``app``."""
    group = typer.Typer(
        help="Check MCP tool policies, explain their decisions, pin tool definitions.",
        no_args_is_help=True,
    )
    group.command("check")(check_cmd)
    group.command("explain")(explain_cmd)
    group.command("pin")(pin_cmd)
    app.add_typer(group, name="policy")


def _fail(message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(EXIT_INVALID)


def check_cmd(
    path: Path = typer.Argument(..., help="The policy TOML file."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="A mediator configuration: start its upstreams and warn about rules that match "
        "no tool or can never pass.",
    ),
) -> None:
    """Validate a policy file; print its digest, or the key path of the first error.

    With --config, also warn about rules that match no offered tool or can never pass.
    """
    from glove.policy import PolicyFileError, load_policy

    try:
        policy = load_policy(path)
    except PolicyFileError as exc:
        if as_json:
            report = {"valid": False, "key_path": exc.key_path, "problem": exc.problem}
            typer.echo(json.dumps(report))
            raise typer.Exit(EXIT_INVALID) from exc
        raise _fail(f"invalid: {exc}") from exc
    warnings = _lint(policy, config) if config is not None else []
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "valid": True,
                    "digest": policy.digest,
                    "source": policy.source,
                    "warnings": [
                        {"rule": w.rule, "tool": w.tool, "message": w.message} for w in warnings
                    ],
                }
            )
        )
        return
    typer.echo(f"{policy.source}: valid ({policy.digest})")
    for warning in warnings:
        where = f" ({warning.tool})" if warning.tool else ""
        typer.echo(f"warning: {warning.rule}{where}: {warning.message}")


def _lint(policy: Any, config: Path) -> list[Any]:
    """Start the configuration's upstreams and lint ``policy`` against their tools."""
    import asyncio

    from glove.errors import GloveError
    from glove.mcp import load_config, upstream_tools
    from glove.policy import lint_policy

    try:
        _, definitions = asyncio.run(upstream_tools(load_config(config)))
    except GloveError as exc:
        raise _fail(f"cannot list the tools of {config}: {exc}") from exc
    return list(lint_policy(policy, definitions))


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _fail(f"{what} is not JSON: {exc}") from exc


def explain_cmd(
    path: Path = typer.Argument(..., help="The policy TOML file."),
    tool: str = typer.Argument(..., help="The exposed tool name, <upstream>__<tool>."),
    arguments: str | None = typer.Option(
        None, "--args", help="The call's arguments as a JSON object; omit to ask about listing."
    ),
    definition: Path | None = typer.Option(
        None, "--definition", help="The tool's definition as JSON (as tools/list gives it)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the decision as JSON."),
) -> None:
    """Show what the policy decides for a tool (listing) or for a call with --args."""
    from glove.policy import PolicyFileError, ToolDefinition, load_policy

    try:
        policy = load_policy(path)
    except PolicyFileError as exc:
        raise _fail(f"invalid: {exc}") from exc
    tool_definition = None
    if definition is not None:
        try:
            raw = _load_json(definition.read_text(), "--definition")
        except OSError as exc:
            raise _fail(f"cannot read {definition}: {exc.strerror or exc}") from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise _fail("--definition must be a tool object with a name")
        tool_definition = ToolDefinition(
            raw["name"], raw.get("description"), raw.get("inputSchema"), raw=raw
        )
    if arguments is None:
        decision = policy.check_tool(tool, tool_definition)
    else:
        decision = policy.check_call(tool, _load_json(arguments, "--args"), tool_definition)
    if as_json:
        report = {
            "allowed": decision.allowed,
            "reason": decision.reason,
            "rule": decision.rule,
            "inspected": decision.inspected,
        }
        typer.echo(json.dumps(report, sort_keys=True))
    else:
        typer.echo(f"{'allowed' if decision.allowed else 'denied'}: {decision.reason}")
        for pointer, value in decision.inspected.items():
            typer.echo(f"  inspected {pointer or '(whole arguments)'} = {json.dumps(value)}")
    raise typer.Exit(EXIT_OK if decision.allowed else EXIT_DENIED)


def _tools_of(document: Any) -> list[dict[str, Any]]:
    """The tool objects of a tools/list result, a JSON-RPC response, a list or one tool.

    MCP's JSON-RPC boundary: a tool object is arbitrary JSON (any member an upstream sends is
    pinned by ``--full``), checked here only for its ``name``.
    """
    if isinstance(document, dict) and isinstance(document.get("result"), dict):
        document = document["result"]
    if isinstance(document, dict) and isinstance(document.get("tools"), list):
        document = document["tools"]
    if isinstance(document, dict):
        document = [document]
    if not isinstance(document, list) or not all(
        isinstance(tool, dict) and isinstance(tool.get("name"), str) for tool in document
    ):
        raise _fail("expected a tools/list result, a list of tools or one tool object")
    return document


def pin_cmd(
    source: str = typer.Argument("-", help="JSON file with the reviewed tools ('-': stdin)."),
    upstream: str = typer.Option(
        ..., "--upstream", help="The upstream id the tools are exposed under (<id>__<tool>)."
    ),
    full: bool = typer.Option(
        False, "--full", help="Also pin the whole tool object (annotations, outputSchema...)."
    ),
) -> None:
    """Print [[tools]] rules pinning each tool's description and input schema.

    Feed it the tools/list result you reviewed; paste the output into the policy and add
    argument rules under each.
    """
    from glove.policy import ToolDefinition, definition_digests, full_definition_digest

    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_PIN_INPUT_BYTES + 1)
        else:
            with Path(source).open("rb") as handle:
                data = handle.read(MAX_PIN_INPUT_BYTES + 1)
        text = data.decode("utf-8")
    except OSError as exc:
        raise _fail(f"cannot read {source}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise _fail(f"{source} is not UTF-8 text: give the JSON of a tools/list result") from exc
    if len(text) > MAX_PIN_INPUT_BYTES:
        raise _fail(f"input larger than {MAX_PIN_INPUT_BYTES} bytes")
    for tool in _tools_of(_load_json(text, source)):
        definition = ToolDefinition(
            tool["name"], tool.get("description"), tool.get("inputSchema"), raw=tool
        )
        try:
            description, schema = definition_digests(definition)
            whole = full_definition_digest(definition)
        except (TypeError, RecursionError) as exc:
            raise _fail(f"tool {tool['name']!r} cannot be canonicalized: {exc}") from exc
        exposed = f"{upstream}__{tool['name']}"
        typer.echo("[[tools]]")
        typer.echo(f"name = {json.dumps(exposed)}")
        typer.echo(f'description_sha256 = "{description}"')
        typer.echo(f'schema_sha256 = "{schema}"')
        typer.echo(f'{"" if full else "# "}definition_sha256 = "{whole}"')
        typer.echo("")
