"""``glove run``: the agent in the sandbox, its MCP tools mediated on the host.

The sandbox is built from the same options as ``glove exec`` (:mod:`glove.run._prepare`),
plus the guest parts of the mediation (:mod:`glove.mcp`'s channel: the read-only ``/opt/glove``
directory, the channel as descriptor 3, the relay wrapping the agent) and the mediator's
own files as protected paths: its configuration, policy, audit log (and rotated files), and
each upstream's working directory (the directory and its files) are never shown to the
sandbox; each upstream's program and the files it is started with are never shown writable
(decision 0006).

The session itself (its tree, order, readiness and teardown) is :mod:`glove.session`'s,
built from a :class:`~glove.session.SessionDescription`; this module supplies the spec and
the terminal (:class:`~glove.run._foreground.TerminalForeground`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import sys
from typing import TYPE_CHECKING, Final, NamedTuple

from glove.container import (
    Protected,
    SandboxError,
    SandboxResult,
    SandboxSpec,
    describe,
    setup_failure,
)
from glove.egress import EgressParts, EgressStats, prepare_egress
from glove.errors import GloveError
from glove.mcp import (
    GUEST_CHANNEL_FD,
    RUN_ID_BYTES,
    GuestSetup,
    McpConfig,
    guest_env,
    load_config,
    mediator_protected,
    prepare_guest_dir,
)
from glove.run._egress import NetworkChoice, network_choice
from glove.run._exec import dry_run, print_notes, report_result, say_agent_notes, write_status
from glove.run._foreground import TerminalForeground
from glove.run._options import SandboxOptions
from glove.run._prepare import (
    Additions,
    agent_argv,
    build_from_options,
    current_directory,
    guest_additions,
    open_status,
    prepare_agent_for,
    profile_for,
)
from glove.run._terminal import DROPPED_KEY, terminal_filters
from glove.session import (
    GuestParts,
    SessionDescription,
    egress_guest,
    open_session,
    relay_guest,
    run_foreground,
    session_result,
)

if TYPE_CHECKING:
    from glove.agents import AgentLaunch
    from glove.session import TerminalFilter

PROG: Final = "glove run"


def _spec_for(
    opts: SandboxOptions,
    guest: GuestParts | None,
    protected: tuple[Protected, ...],
    status_path: str | None,
    agent: AgentLaunch | None = None,
) -> SandboxSpec:
    """The sandbox of this run with the session's guest parts; without ``guest``, the same
    without them (the preflight)."""
    additions = (
        guest_additions(guest, protected) if guest is not None else Additions(protected=protected)
    )
    return build_from_options(
        opts,
        cwd=current_directory(),
        host_env=dict(os.environ),
        status_path=status_path,
        additions=additions,
        agent=agent,
    )


def _dry_run(
    opts: SandboxOptions,
    protected: tuple[Protected, ...],
    agent: AgentLaunch | None,
    network: NetworkChoice,
) -> int:
    """Describe the sandbox, guest parts included, without starting any upstream."""
    private = prepare_guest_dir(relay=network.mode != "proxy")
    parts: EgressParts | None = None
    argv = agent_argv(opts, agent)
    try:
        if network.mode == "proxy":
            parts = prepare_egress(private)
            guest = egress_guest(parts.guest, argv, mcp=True)
        else:
            setup = GuestSetup(
                bind_dir=str(private),
                env=guest_env(),
                pass_fds={GUEST_CHANNEL_FD: GUEST_CHANNEL_FD},
            )
            guest = relay_guest(setup, argv)
        spec = _spec_for(opts, guest, protected, None, agent)
        return dry_run(
            PROG, spec, as_json=opts.json, platform=opts.platform, network=network.described()
        )
    finally:
        if parts is not None:
            parts.close()
        shutil.rmtree(private, ignore_errors=True)


class _Run(NamedTuple):
    result: SandboxResult
    denied: int
    first_denied: str | None
    egress: EgressStats | None = None
    terminal_dropped: int = 0


async def _session(
    opts: SandboxOptions,
    config: McpConfig,
    protected: tuple[Protected, ...],
    status: str | None,
    *,
    agent: AgentLaunch | None,
    network: NetworkChoice,
) -> _Run:
    """One session: the description to :mod:`glove.session`, the terminal from here."""
    rules = network.rules() if network.mode == "proxy" else None
    description = SessionDescription(
        secrets.token_hex(RUN_ID_BYTES), mcp=config, rules=rules, hostname=network.hostname
    )
    parts = await open_session(description)
    filters: dict[int, TerminalFilter] = {}
    try:
        spec = _spec_for(opts, parts.guest(agent_argv(opts, agent)), protected, status, agent)
        if not opts.quiet:
            print_notes(PROG, spec)
            say_agent_notes(PROG, agent, spec, network.mode, rules)
        filters = terminal_filters(pty=spec.pty, raw=opts.raw)
        foreground = TerminalForeground(pty=spec.pty, filters=filters)
        outcome = await run_foreground(parts, spec, foreground)
    finally:
        with contextlib.suppress(OSError):
            await parts.close()
    mediator = parts.mediation.mediator if parts.mediation is not None else None
    denied = (mediator.denied, mediator.first_denied) if mediator is not None else (0, None)
    stats = parts.proxy.stats if parts.proxy is not None else None
    withheld = sum(flt.dropped for flt in filters.values())
    return _Run(session_result(outcome), *denied, stats, withheld)


def run_agent(opts: SandboxOptions, config_path: str) -> int:
    """Run ``glove run`` and return its exit code (see ``docs/mcp.md``).

    Everything the sandbox will show is checked against the mediator's files before any
    upstream starts, so a refused layout starts nothing at all.
    """
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="glove run: %(levelname)s %(message)s"
    )
    status_fd = -1
    run = _Run(setup_failure("not started"), 0, None)
    try:
        status_path: str | None = None
        if opts.json_status is not None and not opts.dry_run:
            status_fd, status_path = open_status(opts.json_status)
        config = load_config(config_path)
        protected = mediator_protected(config_path, config)
        agent = prepare_agent_for(opts, dict(os.environ))
        network = network_choice(opts, profile_for(opts, agent))
        if network.mode == "proxy":
            network.rules()  # a bad rule starts nothing
        if opts.dry_run:
            return _dry_run(opts, protected, agent, network)
        preflight = _spec_for(opts, None, protected, status_path, agent)
        describe(preflight)  # the preflight checks
        if agent is not None:
            from glove.agents import write_agent_config

            write_agent_config(
                agent, workdir=preflight.working_directory, mcp=True, sandbox_env=preflight.env
            )
        run = asyncio.run(
            _session(opts, config, protected, status_path, agent=agent, network=network)
        )
    except (GloveError, SandboxError, OSError) as exc:
        run = _Run(setup_failure(str(exc)), 0, None)
    egress = run.egress
    report_result(
        PROG,
        run.result,
        quiet=opts.quiet,
        denied_calls=run.denied,
        first_denied=run.first_denied,
        egress=egress.summary() if egress is not None else None,
        withheld=run.terminal_dropped,
    )
    extra: dict[str, object] = {DROPPED_KEY: run.terminal_dropped}
    if egress is not None:
        extra["egress"] = egress.json_status()
    write_status(PROG, status_fd, run.result, extra)
    return run.result.exit_code
