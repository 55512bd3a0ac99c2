"""``glove run``: the agent in the sandbox, its MCP tools mediated on the host.

The sandbox is built from the same options as ``glove exec`` (:mod:`glove.run._prepare`),
plus the guest parts of the mediation (:mod:`glove.mcp._run`: the read-only ``/opt/glove``
directory, the channel as descriptor 3, the relay wrapping the agent) and the mediator's
own files as protected paths: its configuration, policy, audit log (and rotated files), and
each upstream's working directory (the directory and its files) are never shown to the
sandbox; each upstream's program and the files it is started with are never shown writable
(decision 0006).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

from glove.actors import Actor, ChildSpec, Supervisor
from glove.container import (
    Bind,
    Protected,
    SandboxError,
    SandboxResult,
    SandboxSpec,
    describe,
)
from glove.container._result import setup_failure
from glove.container.linux._async_run import FdWriter
from glove.container.linux._pty import RawTerminal
from glove.egress import EgressStats
from glove.errors import GloveError
from glove.mcp._config import McpConfig, UpstreamConfig, child_environment, load_config
from glove.mcp._kernel import RUN_ID_BYTES
from glove.mcp._run import (
    GUEST_CHANNEL_FD,
    GUEST_DIR,
    GuestSetup,
    guest_env,
    prepare_guest_dir,
)
from glove.mcp._service import build_mediation
from glove.run._egress import EgressParts, NetworkChoice, network_choice, prepare_egress
from glove.run._exec import dry_run, print_notes, report_result, write_status
from glove.run._options import SandboxOptions
from glove.run._prepare import (
    Additions,
    agent_argv,
    build_from_options,
    current_directory,
    open_status,
    prepare_agent_for,
    profile_for,
)
from glove.run._proxied import all_started
from glove.run._terminal import DROPPED_KEY, terminal_filters
from glove.run._tree import SignalRelay, session_result
from glove.session import SANDBOX_CHILD, SandboxActor, run_session, session_tree
from glove.session._wiring import GuestParts, SessionWiring

if TYPE_CHECKING:
    from glove.agents import AgentLaunch
    from glove.session import TerminalFilter

PROG: Final = "glove run"
#: Exit code when the mediation failed while the agent ran (the agent was stopped).
EXIT_MEDIATION_FAILED: Final = 124
#: Rotated audit files protected beside the log (``audit.log.1`` .. ``.N``).
PROTECTED_ROTATIONS: Final = 16


def _program_of(upstream: UpstreamConfig, cwd: str) -> str | None:
    """The host file an upstream runs, as the subprocess would find it."""
    name = upstream.command[0]
    if "/" in name:
        return os.path.normpath(Path(cwd, name))
    path = child_environment(upstream, dict(os.environ)).get("PATH", os.defpath)
    return shutil.which(name, path=path)


def _files_among(arguments: list[str], cwd: str) -> list[str]:
    """Arguments that name an existing regular file (a script the upstream loads)."""
    found: list[str] = []
    for argument in arguments:
        if not argument or argument.startswith("-") or "\0" in argument:
            continue
        candidate = os.path.normpath(Path(cwd, argument))
        try:
            if stat.S_ISREG(Path(candidate).stat().st_mode):
                found.append(candidate)
        except (OSError, ValueError):
            continue
    return found


def mediator_protected(config_path: str, config: McpConfig) -> tuple[Protected, ...]:
    """Every host path of the mediation the sandbox must not see (or not write)."""
    items = [
        Protected(str(Path(config_path).absolute()), "the mediator's configuration"),
        Protected(config.policy, "the mediator's policy file"),
        Protected(config.audit, "the mediator's audit log"),
        Protected(f"{config.audit}.lock", "the audit log's lock"),
    ]
    items += [
        Protected(f"{config.audit}.{n}", "a rotated audit log")
        for n in range(1, PROTECTED_ROTATIONS + 1)
    ]
    for upstream_id, upstream in config.upstreams.items():
        for header, source in upstream.headers.items():
            if source.file is not None:  # a key file (a bearer token): never seen at all
                what = f"the {header} header's key file of upstream {upstream_id!r}"
                items.append(Protected(source.file, what))
        if not upstream.command:
            continue  # a Streamable HTTP upstream: no process, no working directory
        cwd = upstream.cwd or str(Path(config_path).absolute().parent)
        # The directory itself and its files, never a subdirectory: a workspace beside the
        # configuration (config/ws) is fine, a workspace that is (or holds) it is not.
        items.append(Protected(cwd, f"the working directory of upstream {upstream_id!r}"))
        program = _program_of(upstream, cwd)
        if program is not None:
            what = f"the program of upstream {upstream_id!r}"
            items.append(Protected(program, what, writable_only=True))
        for path in _files_among(upstream.command[1:], cwd):
            what = f"a file upstream {upstream_id!r} is started with"
            items.append(Protected(path, what, writable_only=True))
    return tuple(items)


def _spec_for(
    opts: SandboxOptions,
    setup: GuestSetup | EgressParts | None,
    protected: tuple[Protected, ...],
    status_path: str | None,
    agent: AgentLaunch | None = None,
) -> SandboxSpec:
    """The sandbox of this run; without ``setup``, the same without the guest parts.

    ``setup`` is the relay's guest parts offline, or the egress helper's (which then also
    relays MCP: ``glove-egress --mcp``) in ``proxy`` mode.
    """
    additions = Additions(protected=protected)
    if isinstance(setup, EgressParts):
        argv = agent_argv(opts, agent)
        additions = setup.additions(argv, protected=protected, mcp_env=guest_env())
    elif setup is not None:
        additions = Additions(
            binds=(Bind(source=setup.bind_dir, target=GUEST_DIR, mode="ro"),),
            env=setup.env,
            pass_fds=setup.pass_fds,
            protected=protected,
            argv=setup.command(agent_argv(opts, agent)),
        )
    return build_from_options(
        opts,
        cwd=current_directory(),
        host_env=dict(os.environ),
        status_path=status_path,
        additions=additions,
        agent=agent,
    )


def _spec_with(
    opts: SandboxOptions,
    guest: GuestParts,
    protected: tuple[Protected, ...],
    status_path: str | None,
    agent: AgentLaunch | None,
) -> SandboxSpec:
    """The sandbox of this run with the session wiring's guest parts."""
    additions = Additions(
        binds=tuple(Bind(source=src, target=dst, mode="ro") for src, dst in guest.binds),
        env=guest.env,
        pass_fds=guest.pass_fds,
        protected=protected,
        argv=guest.argv,
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
    try:
        setup: GuestSetup | EgressParts
        if network.mode == "proxy":
            parts = prepare_egress(private)
            setup = parts
        else:
            setup = GuestSetup(
                bind_dir=str(private),
                env=guest_env(),
                pass_fds={GUEST_CHANNEL_FD: GUEST_CHANNEL_FD},
            )
        spec = _spec_for(opts, setup, protected, None, agent)
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
    """One session tree: the mediation, the agent channel, [egress,] then the sandbox."""
    loop = asyncio.get_running_loop()
    private = await asyncio.to_thread(prepare_guest_dir, relay=network.mode != "proxy")
    relay: SignalRelay | None = None
    wiring: SessionWiring | None = None
    filters: dict[int, TerminalFilter] = {}
    run_id = secrets.token_hex(RUN_ID_BYTES)
    try:
        mediation = build_mediation(config, run_id=run_id)
        wiring = SessionWiring(
            run_id=run_id,
            mediation=mediation,
            rules=network.rules() if network.mode == "proxy" else None,
            hostname=network.hostname,
            private=private,
        )
        spec = _spec_with(opts, wiring.guest(agent_argv(opts, agent)), protected, status, agent)
        if not opts.quiet:
            print_notes(PROG, spec)
        filters = terminal_filters(pty=spec.pty, raw=opts.raw)
        writer = FdWriter({"stdout": 1, "stderr": 2, "pty": 1}, filters)
        ready = wiring.ready
        tree = session_tree(
            f"session-{run_id}",
            wiring.before,
            ChildSpec(
                SANDBOX_CHILD,
                lambda: SandboxActor(
                    spec, on_output=writer.write, stdin=0, winsize_from=0, start_after=ready
                ),
            ),
        )

        terminal = RawTerminal(0 if spec.pty else None)
        relay = SignalRelay(loop, terminal)
        relay.install()  # before the upstreams start: a Ctrl-C then is the agent's too

        def started(tree: Supervisor) -> None:
            if relay is not None:
                relay.attach(tree)
            if wiring is not None:
                wiring.started(tree)

        with terminal:
            outcome = await run_session(tree, on_started=started)
        await writer.flush()
    except asyncio.CancelledError:
        if relay is not None:
            relay.reraise()  # a Ctrl-C before the agent ran: exit 130
        raise
    finally:
        if relay is not None:
            relay.remove()
        if wiring is not None:
            wiring.close()
        with contextlib.suppress(OSError):
            await asyncio.to_thread(shutil.rmtree, private)
    mediator = mediation.mediator
    denied = (mediator.denied, mediator.first_denied) if mediator is not None else (0, None)
    stats = wiring.proxy.stats if wiring.proxy is not None else None
    withheld = sum(flt.dropped for flt in filters.values())
    return _Run(session_result(outcome), *denied, stats, withheld)


async def _all_ready(mediation: asyncio.Future[None], *actors: Actor) -> None:
    """The mediation is ready and the channel and proxy have started: the agent may start."""
    await asyncio.shield(mediation)
    await all_started(*actors)


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
