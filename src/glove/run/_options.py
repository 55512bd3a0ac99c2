"""The sandbox options ``glove exec`` and ``glove run`` share: defined once, with argparse.

Both commands parse with :func:`add_sandbox_arguments`, so a flag means the same thing in
each and neither can drift. argparse, not typer: these commands sit on the launch hot path
(typer and its validation layer cost more than the sandbox itself). Usage errors exit with
:data:`EXIT_USAGE` in every ``glove`` command (``docs/cli.md``).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Final, Literal

LIMIT_FLAGS: Final = (
    ("--wall-time", "SECONDS", "wall-clock time, e.g. 90, 30m, 8h"),
    ("--cpu-time", "SECONDS", "CPU time of the whole tree, e.g. 600, 2h"),
    ("--memory", "BYTES", "memory, e.g. 512M, 4G"),
    ("--pids", "N", "tasks alive at once"),
    ("--disk", "BYTES", "writable scratch (/, /tmp, /dev/shm), e.g. 1G"),
    ("--output", "BYTES", "stdout+stderr (or terminal) bytes before the cut, e.g. 1G"),
    ("--cpus", "N", "CPU rate of the whole tree in CPUs, e.g. 0.5, 2 (throttles, never ends)"),
)


@dataclass(frozen=True, slots=True)
class SandboxOptions:
    """The parsed sandbox options (``glove exec`` and ``glove run`` alike).

    A dataclass, not a msgspec Struct: ``glove --help`` imports this module and must not pay
    for msgspec.
    """

    argv: list[str]
    profile: str | None = None
    workspace: str | None = None
    workspace_mode: Literal["rw", "ro"] | None = None
    binds: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    #: ``none`` or ``proxy``; None: the profile's mode (``proxy`` when rules are given).
    network: str | None = None
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    #: ``glove exec`` only: the egress audit log (default under the XDG state dir).
    audit: str | None = None
    pty: bool = False
    #: Write the command's output to a terminal as it is (no escape filter).
    raw: bool = False
    wall_time: str | None = None
    cpu_time: str | None = None
    memory: str | None = None
    pids: str | None = None
    disk: str | None = None
    output: str | None = None
    cpus: str | None = None
    accept_weaker: list[str] = field(default_factory=list)
    json_status: str | None = None
    dry_run: bool = False
    json: bool = False
    quiet: bool = False
    platform: str | None = None
    agent: str | None = None
    agent_install: str | None = None


#: The network modes ``--network`` knows.
NETWORK_MODES: Final = ("none", "proxy")
#: The agents ``--agent`` knows (each has an embedded profile of the same name).
AGENT_NAMES: Final = ("claude", "codex")


def add_sandbox_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every sandbox option to ``parser`` (the one definition of them)."""
    p = parser
    p.add_argument("--profile", help="profile name or path (default: the embedded 'default')")
    p.add_argument(
        "--workspace",
        help="workspace directory, shown at the same path inside (default: the current one)",
    )
    p.add_argument("--workspace-mode", choices=("rw", "ro"), help="bind the workspace rw or ro")
    p.add_argument(
        "--bind",
        action="append",
        default=[],
        dest="binds",
        metavar="SRC[:DST[:ro|rw]]",
        help="show a host path inside (read-only and at the same path by default); repeatable",
    )
    p.add_argument(
        "--use",
        action="append",
        default=[],
        dest="uses",
        metavar="DIR",
        help="make a host virtualenv or tool install usable inside: bound read-only at the "
        "same path, its bin/ first on PATH (a venv's base Python is bound too); repeatable",
    )
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="repeatable")
    p.add_argument(
        "--network",
        choices=NETWORK_MODES,
        help="none: loopback only; proxy: through the audited egress proxy, by the --allow "
        "and --deny rules (default: the profile's [network] mode; proxy when rules are given)",
    )
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="HOST[:PORTS][+OPTION]",
        help="let the sandbox reach HOST (ports 80 and 443 unless listed; *.x.com: subdomains "
        "only; +sni, +read-only) through the proxy; repeatable (docs/egress.md)",
    )
    p.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="HOST[:PORTS]",
        help="refuse HOST (every port unless listed); beats --allow; repeatable",
    )
    p.add_argument("--pty", action="store_true", help="give the command a fresh terminal")
    p.add_argument(
        "--raw",
        action="store_true",
        help="write the command's output to a terminal unfiltered (by default only drawing "
        "sequences pass, or with --pty all but clipboard access, queries and other "
        "sequences that make the terminal answer; pipes and files are never filtered)",
    )
    for flag, metavar, text in LIMIT_FLAGS:
        p.add_argument(flag, metavar=metavar, help=text)
    p.add_argument(
        "--accept-weaker",
        action="append",
        default=[],
        metavar="LIMIT|all",
        help="allow a per-process mechanism for LIMIT (repeatable)",
    )
    p.add_argument("--json-status", metavar="FILE|FD", help="where to write the result")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the sandbox that would be built (mounts, env, limits, network, seccomp) "
        "and run nothing",
    )
    p.add_argument("--json", action="store_true", help="with --dry-run: print it as JSON")
    p.add_argument(
        "--platform",
        choices=("linux", "macos"),
        help="with --dry-run: the platform to describe; macos prints the Seatbelt profile",
    )
    p.add_argument(
        "--agent",
        choices=AGENT_NAMES,
        help="run this coding agent: its profile, install, persistent home and wiring (and "
        "--pty when stdin is a terminal); what follows -- are the agent's own arguments",
    )
    p.add_argument(
        "--agent-install",
        metavar="DIR",
        help="with --agent: the agent's install (a prefix or node_modules) instead of PATH",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no notes or exit summary on stderr")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")


def sandbox_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> SandboxOptions:
    """Turn parsed arguments into :class:`SandboxOptions`; a missing command is a usage error."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command and args.agent is None:
        parser.error("a command to run is required: " + parser.prog + " [OPTIONS] -- CMD")
    if args.agent_install is not None and args.agent is None:
        parser.error("--agent-install goes with --agent")
    if args.json and not args.dry_run:
        parser.error("--json goes with --dry-run (the result itself is --json-status)")
    if args.platform is not None and not args.dry_run:
        parser.error("--platform goes with --dry-run (a sandbox runs on this machine's own)")
    if (args.allow or args.deny) and args.network == "none":
        parser.error("--allow and --deny go with --network proxy (none reaches nothing)")
    bad_rule = _bad_rule(args.allow, args.deny)
    if bad_rule is not None:
        parser.error(bad_rule)
    return SandboxOptions(
        argv=command,
        profile=args.profile,
        workspace=args.workspace,
        workspace_mode=args.workspace_mode,
        binds=args.binds,
        uses=args.uses,
        env=args.env,
        network=args.network,
        allow=args.allow,
        deny=args.deny,
        audit=getattr(args, "audit", None),
        # --agent: a terminal on stdin means the agent's TUI, so it gets one inside too.
        pty=args.pty or (args.agent is not None and not args.dry_run and _stdin_is_a_tty()),
        raw=args.raw,
        wall_time=args.wall_time,
        cpu_time=args.cpu_time,
        memory=args.memory,
        pids=args.pids,
        disk=args.disk,
        output=args.output,
        cpus=args.cpus,
        accept_weaker=args.accept_weaker,
        json_status=args.json_status,
        dry_run=args.dry_run,
        json=args.json,
        quiet=args.quiet,
        platform=args.platform,
        agent=args.agent,
        agent_install=args.agent_install,
    )


def _bad_rule(allow: list[str], deny: list[str]) -> str | None:
    """What is wrong with the first malformed ``--allow``/``--deny`` rule, or None."""
    if not allow and not deny:
        return None  # the rules module is imported only when rules are given
    from glove.egress import parse_rule
    from glove.egress.errors import RuleError

    for flag, action, rules in (("--allow", "allow", allow), ("--deny", "deny", deny)):
        for text in rules:
            try:
                parse_rule(text, action)  # type: ignore[arg-type]
            except RuleError as exc:
                return f"{flag} {text!r}: {exc}"
    return None


def _stdin_is_a_tty() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False
