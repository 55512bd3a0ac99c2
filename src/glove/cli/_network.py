"""``glove network check``: what a sandbox could reach, and which rule decides a destination.

Parse, call :mod:`glove.egress` (:func:`~glove.egress.network_report`,
:func:`~glove.egress.explain`), print. Rules come from a profile's ``[network]`` table
(``--profile NAME|PATH``) and from ``--allow``/``--deny`` (which imply mode ``proxy``), or
from a plan v1 file's ``network`` member (``--plan FILE``, alone: ``"none"`` reaches nothing,
``{"mode": "proxy", ...}`` its own allow and deny rules); each ``QUERY`` (``HOST[:PORT]``)
is answered with the rule that decides it.

Exit codes: 0 the rules load (and every query is allowed); 1 a query is refused;
2 a rule, the profile, the plan or a query is invalid; 64 ``--plan`` given with
``--profile``, ``--allow`` or ``--deny``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import typer

from glove.exits import EXIT_DENIED, EXIT_INVALID

if TYPE_CHECKING:
    from glove.egress import Explanation, NetworkPolicy, NetworkReport

#: Embedded profiles live beside the sandbox code.
PROFILES_DIR: Final = Path(__file__).resolve().parent.parent / "container" / "profiles"


def register(app: typer.Typer) -> None:
    """Add the ``network`` command group to ``app``."""
    group = typer.Typer(
        help="Inspect what the egress rules let a sandbox reach.", no_args_is_help=True
    )
    group.command("check")(check_cmd)
    app.add_typer(group, name="network")


def _profile_bytes(name_or_path: str) -> tuple[bytes, str]:
    if "/" in name_or_path or name_or_path.endswith(".toml"):
        path = Path(name_or_path)
    elif name_or_path.isidentifier():
        path = PROFILES_DIR / f"{name_or_path}.toml"
    else:
        raise OSError(f"no embedded profile named {name_or_path!r}")
    return path.read_bytes(), str(path)


def _plan_policy(path: Path) -> NetworkPolicy:
    """The network rules of the plan v1 file at ``path``, as a policy.

    Raises:
        OSError: the file cannot be read.
        PlanError: the file is not a plan v1 document (too large, malformed, a bad rule).
    """
    from glove.egress import NetworkPolicy
    from glove.plan import MAX_PLAN_BYTES, ProxyNetwork, decode_plan

    with path.open("rb") as file:
        data = file.read(MAX_PLAN_BYTES + 1)  # one byte over: decode_plan refuses the size
    network = decode_plan(data).network
    if isinstance(network, ProxyNetwork):
        return NetworkPolicy(mode="proxy", allow=list(network.allow), deny=[*network.deny_rules])
    return NetworkPolicy(mode="none")


def check_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
    queries: list[str] = typer.Argument(None, help="HOST[:PORT] to explain (repeatable)."),
    profile: str | None = typer.Option(None, "--profile", help="Profile name or path."),
    plan: Path | None = typer.Option(
        None, "--plan", help="Plan v1 JSON file: check its network (not with the others)."
    ),
    allow: list[str] = typer.Option([], "--allow", help="HOST[:PORTS][+sni][+read-only]."),
    deny: list[str] = typer.Option([], "--deny", help="HOST[:PORTS], repeatable."),
    mcp: bool = typer.Option(False, "--mcp", help="Include the glove run MCP socket."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """List every host, port and socket the sandbox could reach; explain each QUERY."""
    import msgspec

    from glove.container import probe_unix_gate
    from glove.egress import NetworkPolicy, RuleError, explain, network_report, policy_from_toml
    from glove.plan import PlanError

    if plan is not None and (profile is not None or allow or deny):
        raise typer.BadParameter(
            "a plan's network is checked alone: not with --profile, --allow or --deny",
            param_hint="'--plan'",
        )
    try:
        if plan is not None:
            policy = _plan_policy(plan)
        else:
            if profile is not None:
                data, origin = _profile_bytes(profile)
                base = policy_from_toml(data, origin)
            else:
                base = NetworkPolicy()
            mode = "proxy" if allow or deny else base.mode
            policy = NetworkPolicy(mode=mode, allow=[*base.allow, *allow], deny=[*base.deny, *deny])
        report = network_report(policy, mcp=mcp, unix_gate=probe_unix_gate().mechanism)
        answers = [line for query in queries or [] for line in explain(policy, query)]
    except (RuleError, PlanError, OSError) as exc:
        typer.echo(f"glove network check: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from exc
    if as_json:
        typer.echo(msgspec.json.encode({"report": report, "queries": answers}).decode())
    else:
        _print(report, answers)
    if any(not answer.allowed for answer in answers):
        raise typer.Exit(EXIT_DENIED)


def _print(report: NetworkReport, answers: list[Explanation]) -> None:
    typer.echo(f"network mode: {report.mode}")
    if report.reachable:
        typer.echo("reachable through the proxy:")
    for item in report.reachable:
        checks = f" [{', '.join(item.checks)}]" if item.checks else ""
        typer.echo(f"  {item.hosts}, ports {item.ports}{checks}  ({item.rule})")
        for denied in item.denied_within:
            typer.echo(f"    except: {denied}")
    for denied in report.denied:
        typer.echo(f"refused: {denied}")
    if report.sockets:
        typer.echo("sockets inside the sandbox:")
    for sock in report.sockets:
        typer.echo(f"  {sock.address} {sock.transport}: {sock.serves}")
    for note in report.notes:
        typer.echo(f"note: {note}")
    for answer in answers:
        verdict = "allowed" if answer.allowed else "refused"
        rule = answer.rule or "no rule"
        extra = " (then the resolved address is checked)" if answer.address_check else ""
        typer.echo(f"{answer.host}:{answer.port}: {verdict} by {rule}: {answer.reason}{extra}")
