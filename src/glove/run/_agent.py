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
import logging
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from glove.container import (
    Bind,
    Protected,
    SandboxError,
    SandboxResult,
    SandboxSpec,
    describe,
    run_async,
)
from glove.container._result import setup_failure
from glove.errors import GloveError
from glove.mcp._config import McpConfig, UpstreamConfig, child_environment, load_config
from glove.mcp._run import (
    GUEST_CHANNEL_FD,
    GUEST_DIR,
    GuestSetup,
    MediationReport,
    guest_env,
    prepare_guest_dir,
    run_mediated,
)
from glove.mcp.errors import MediationFailed
from glove.run._exec import dry_run, print_notes, report_result, write_status
from glove.run._options import SandboxOptions
from glove.run._prepare import (
    Additions,
    agent_argv,
    build_from_options,
    current_directory,
    open_status,
    prepare_agent_for,
)

if TYPE_CHECKING:
    from glove.agents import AgentLaunch

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
    setup: GuestSetup | None,
    protected: tuple[Protected, ...],
    status_path: str | None,
    agent: AgentLaunch | None = None,
) -> SandboxSpec:
    """The sandbox of this run; without ``setup``, the same without the guest parts."""
    additions = Additions(protected=protected)
    if setup is not None:
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


def _dry_run(
    opts: SandboxOptions, protected: tuple[Protected, ...], agent: AgentLaunch | None
) -> int:
    """Describe the sandbox, guest parts included, without starting any upstream."""
    private = prepare_guest_dir()
    try:
        setup = GuestSetup(
            bind_dir=str(private),
            env=guest_env(),
            pass_fds={GUEST_CHANNEL_FD: GUEST_CHANNEL_FD},
        )
        spec = _spec_for(opts, setup, protected, None, agent)
        return dry_run(PROG, spec, as_json=opts.json, platform=opts.platform)
    finally:
        shutil.rmtree(private, ignore_errors=True)


async def _mediated(
    opts: SandboxOptions,
    config: McpConfig,
    protected: tuple[Protected, ...],
    status: str | None,
    agent: AgentLaunch | None,
) -> tuple[SandboxResult, MediationReport]:
    report = MediationReport()

    async def sandbox(setup: GuestSetup) -> SandboxResult:
        spec = _spec_for(opts, setup, protected, status, agent)
        if not opts.quiet:
            print_notes(PROG, spec)
        return await run_async(spec)

    result = await run_mediated(config, sandbox, report=report)
    return result, report


def run_agent(opts: SandboxOptions, config_path: str) -> int:
    """Run ``glove run`` and return its exit code (see ``docs/mcp.md``).

    Everything the sandbox will show is checked against the mediator's files before any
    upstream starts, so a refused layout starts nothing at all.
    """
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="glove run: %(levelname)s %(message)s"
    )
    status_fd = -1
    report = MediationReport()
    try:
        status_path: str | None = None
        if opts.json_status is not None and not opts.dry_run:
            status_fd, status_path = open_status(opts.json_status)
        config = load_config(config_path)
        protected = mediator_protected(config_path, config)
        agent = prepare_agent_for(opts, dict(os.environ))
        if opts.dry_run:
            return _dry_run(opts, protected, agent)
        preflight = _spec_for(opts, None, protected, status_path, agent)
        describe(preflight)  # the preflight checks
        if agent is not None:
            from glove.agents import write_agent_config

            write_agent_config(
                agent, workdir=preflight.working_directory, mcp=True, sandbox_env=preflight.env
            )
        result, report = asyncio.run(_mediated(opts, config, protected, status_path, agent))
    except MediationFailed as exc:
        result = SandboxResult(
            outcome="mediation_failed", exit_code=EXIT_MEDIATION_FAILED, error=str(exc)
        )
    except (GloveError, SandboxError) as exc:
        result = setup_failure(str(exc))
    report_result(
        PROG,
        result,
        quiet=opts.quiet,
        denied_calls=report.denied,
        first_denied=report.first_denied,
    )
    write_status(PROG, status_fd, result)
    return result.exit_code
