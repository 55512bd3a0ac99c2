"""``glove exec`` without the CLI framework: options in, sandbox run, exit code out.

Kept apart from the argument parser so it can be tested directly and so ``glove --help``
does not import the sandbox.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import msgspec

from glove.container import (
    SandboxError,
    SandboxResult,
    SandboxSpec,
    plan_limits,
    probe_host_limits,
    run,
    setup_failure,
)
from glove.errors import GloveError
from glove.run._egress import NetworkChoice, audit_protected, exec_audit_path, network_choice
from glove.run._options import SandboxOptions
from glove.run._prepare import (
    agent_argv,
    build_from_options,
    current_directory,
    guest_additions,
    open_status,
    prepare_agent_for,
    profile_for,
)
from glove.run._report import exit_summary, notes_before, render_description
from glove.run._terminal import dropped, terminal_filters, withheld

if TYPE_CHECKING:
    from glove.agents import AgentLaunch
    from glove.container import Profile
    from glove.egress import RuleSet
    from glove.session import GuestParts, TerminalFilter


def say(prog: str, line: str) -> None:
    """Write one line for the operator on stderr."""
    sys.stderr.write(f"{prog}: {line}\n")


def dry_run(
    prog: str,
    spec: SandboxSpec,
    *,
    as_json: bool,
    platform: str | None = None,
    network: Mapping[str, object] | None = None,
) -> int:
    """Describe the sandbox ``spec`` would build; 0, or 125 if a launch would be refused.

    ``platform="macos"`` prints the Seatbelt profile the macOS backend would apply (on any
    machine: it is rendered, not applied). ``network`` adds to the description's network
    object (the egress rules of ``proxy`` mode).
    """
    if platform == "macos":
        from glove.container.macos import render_sbpl

        profile = render_sbpl(spec)
        if as_json:
            sys.stdout.write(msgspec.json.encode({"platform": "macos", "sbpl": profile}).decode())
            sys.stdout.write("\n")
        else:
            sys.stdout.write(profile if profile.endswith("\n") else profile + "\n")
        return 0
    from glove.container import describe  # the --dry-run path only

    try:
        description = describe(spec)
        if network:
            description = msgspec.structs.replace(
                description, network={**description.network, **network}
            )
    except SandboxError as exc:
        say(prog, str(exc))
        return setup_failure(str(exc)).exit_code
    if as_json:
        sys.stdout.write(msgspec.json.encode(description).decode() + "\n")
    else:
        sys.stdout.write(render_description(description) + "\n")
    return 0


def print_notes(prog: str, spec: SandboxSpec) -> None:
    """Say, once, which limits are weaker here and where the workspace appears."""
    try:
        plans = plan_limits(spec.limits, probe_host_limits(), spec.accept_weaker)
    except SandboxError:
        return  # the launch itself reports the refusal
    for note in notes_before(spec, plans):
        say(prog, note)


def say_agent_notes(
    prog: str,
    agent: AgentLaunch | None,
    spec: SandboxSpec,
    mode: str,
    rules: RuleSet | None,
) -> None:
    """Say, before the start, what the agent would wait on: no route to its API, no key."""
    if agent is None:
        return
    from glove.agents import agent_notes

    def reaches(host: str, port: int) -> bool:
        return rules is not None and rules.decide(host, port, tunnel=True).allowed

    for note in agent_notes(agent, spec.env, network=mode, reaches=reaches):
        say(prog, note)


def report_result(
    prog: str,
    result: SandboxResult,
    *,
    quiet: bool,
    denied_calls: int = 0,
    first_denied: str | None = None,
    egress: str | None = None,
    withheld: int = 0,
) -> None:
    """The error line of a failed setup, and the exit summary (or, quiet, a limit's line).

    ``egress`` is the proxy's own summary line (``EgressStats.summary()``), if any;
    ``withheld`` what the terminal filter kept from the terminal.
    """
    if result.outcome in ("setup_error", "exec_error", "mediation_failed") and result.error:
        say(prog, result.error)
    if quiet:
        if result.outcome == "limit" and result.error:
            say(prog, result.error)
        return
    summary = exit_summary(result, denied_calls, first_denied, egress, withheld)
    if summary is not None:
        say(prog, summary)


def write_status(
    prog: str, fd: int, result: SandboxResult, extra: Mapping[str, object] | None = None
) -> None:
    """Write the ``--json-status`` document and close its descriptor.

    ``extra`` adds members beside the sandbox's result (``"egress"`` in proxy mode,
    ``"terminal_sequences_dropped"``).
    """
    if fd < 0:
        return
    document = result.to_json()
    if extra:
        merged = {**msgspec.to_builtins(result), **extra}
        document = msgspec.json.encode(merged) + b"\n"
    try:
        os.write(fd, document)
    except OSError as exc:
        say(prog, f"cannot write --json-status: {exc.strerror}")
    finally:
        os.close(fd)


def exec_command(opts: SandboxOptions) -> int:
    """Run ``glove exec`` and return its exit code (see ``docs/sandbox.md``)."""
    prog = "glove exec"
    status_fd = -1
    filters: dict[int, TerminalFilter] = {}
    try:
        status_path: str | None = None
        if opts.json_status is not None and not opts.dry_run:
            status_fd, status_path = open_status(opts.json_status)
        host_env = dict(os.environ)
        agent = prepare_agent_for(opts, host_env)
        profile = profile_for(opts, agent)
        network = network_choice(opts, profile)
        if network.mode == "proxy":
            return _exec_proxied(prog, opts, network, status_fd, status_path, agent, profile)
        spec = build_from_options(
            opts,
            cwd=current_directory(),
            host_env=host_env,
            status_path=status_path,
            agent=agent,
            profile=profile,
        )
        if opts.dry_run:
            return dry_run(prog, spec, as_json=opts.json, platform=opts.platform)
        _write_agent_config(agent, spec)
        if not opts.quiet:
            print_notes(prog, spec)
            say_agent_notes(prog, agent, spec, network.mode, None)
        filters = terminal_filters(pty=spec.pty, raw=opts.raw)
        result = run(
            spec,
            stdin=sys.stdin.fileno(),
            stdout=sys.stdout.fileno(),
            stderr=sys.stderr.fileno(),
            filters=filters,
        )
    except (SandboxError, GloveError) as exc:  # GloveError: the agent adapters' errors
        result = setup_failure(str(exc))
    report_result(prog, result, quiet=opts.quiet, withheld=withheld(filters))
    write_status(prog, status_fd, result, dropped(filters))
    return result.exit_code


def _write_agent_config(agent: AgentLaunch | None, spec: SandboxSpec) -> None:
    if agent is not None:
        from glove.agents import write_agent_config

        write_agent_config(agent, workdir=spec.working_directory, mcp=False, sandbox_env=spec.env)


def _exec_proxied(  # noqa: PLR0917 - the one call site passes what it prepared
    prog: str,
    opts: SandboxOptions,
    network: NetworkChoice,
    status_fd: int,
    status_path: str | None,
    agent: AgentLaunch | None,
    profile: Profile,
) -> int:
    """``glove exec`` in ``proxy`` mode: the sandbox and its egress proxy on a session tree."""
    import asyncio

    from glove.run._proxied import new_session_id, run_proxied
    from glove.session import SessionDescription

    egress: dict[str, object] | None = None
    summary: str | None = None
    filters: dict[int, TerminalFilter] = {}
    try:
        rules = network.rules()
        cwd = current_directory()
        audit_path = exec_audit_path(opts, cwd, os.environ)
        protected = audit_protected(audit_path, "the egress audit log")
        argv = agent_argv(opts, agent)

        def spec_for(guest: GuestParts) -> SandboxSpec:
            return build_from_options(
                opts,
                cwd=cwd,
                host_env=dict(os.environ),
                status_path=status_path,
                additions=guest_additions(guest, protected),
                agent=agent,
                profile=profile,
                network="proxy",
            )

        if opts.dry_run:
            return _dry_run_proxied(prog, opts, network, argv, spec_for)

        def before_run(spec: SandboxSpec) -> dict[int, TerminalFilter]:
            _write_agent_config(agent, spec)
            if not opts.quiet:
                print_notes(prog, spec)
                say_agent_notes(prog, agent, spec, network.mode, rules)
            filters.update(terminal_filters(pty=spec.pty, raw=opts.raw))
            return filters

        description = SessionDescription(
            new_session_id(), rules=rules, hostname=network.hostname, audit_path=audit_path
        )
        done = asyncio.run(run_proxied(description, argv, spec_for, before_run))
        result = done.result
        egress, summary = done.egress.json_status(), done.egress.summary()
    except (SandboxError, GloveError, OSError) as exc:
        result = setup_failure(str(exc))
    report_result(prog, result, quiet=opts.quiet, egress=summary, withheld=withheld(filters))
    extra = {**dropped(filters), **({"egress": egress} if egress is not None else {})}
    write_status(prog, status_fd, result, extra)
    return result.exit_code


def _dry_run_proxied(
    prog: str,
    opts: SandboxOptions,
    network: NetworkChoice,
    argv: tuple[str, ...],
    spec_for: Callable[[GuestParts], SandboxSpec],
) -> int:
    """Describe the proxied sandbox (the helper's guest parts included); nothing starts."""
    import shutil

    from glove.egress import prepare_egress
    from glove.session import egress_guest

    parts = prepare_egress()
    try:
        spec = spec_for(egress_guest(parts.guest, argv, mcp=False))
        return dry_run(
            prog, spec, as_json=opts.json, platform=opts.platform, network=network.described()
        )
    finally:
        parts.close()
        shutil.rmtree(parts.guest.bind_dir, ignore_errors=True)
