"""``glove exec`` without the CLI framework: options in, sandbox run, exit code out.

Kept apart from the argument parser so it can be tested directly and so ``glove --help``
does not import the sandbox.
"""

from __future__ import annotations

import os
import sys

import msgspec

from glove.container import (
    SandboxError,
    SandboxResult,
    SandboxSpec,
    describe,
    plan_limits,
    probe_host_limits,
    run,
)
from glove.container._result import setup_failure
from glove.errors import GloveError
from glove.run._options import SandboxOptions
from glove.run._prepare import (
    build_from_options,
    current_directory,
    open_status,
    prepare_agent_for,
)
from glove.run._report import exit_summary, notes_before, render_description


def say(prog: str, line: str) -> None:
    """Write one line for the operator on stderr."""
    sys.stderr.write(f"{prog}: {line}\n")


def dry_run(prog: str, spec: SandboxSpec, *, as_json: bool, platform: str | None = None) -> int:
    """Describe the sandbox ``spec`` would build; 0, or 125 if a launch would be refused.

    ``platform="macos"`` prints the Seatbelt profile the macOS backend would apply (on any
    machine: it is rendered, not applied).
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
    try:
        description = describe(spec)
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


def report_result(
    prog: str,
    result: SandboxResult,
    *,
    quiet: bool,
    denied_calls: int = 0,
    first_denied: str | None = None,
) -> None:
    """The error line of a failed setup, and the exit summary (or, quiet, a limit's line)."""
    if result.outcome in ("setup_error", "exec_error", "mediation_failed") and result.error:
        say(prog, result.error)
    if quiet:
        if result.outcome == "limit" and result.error:
            say(prog, result.error)
        return
    summary = exit_summary(result, denied_calls, first_denied)
    if summary is not None:
        say(prog, summary)


def write_status(prog: str, fd: int, result: SandboxResult) -> None:
    """Write the ``--json-status`` document and close its descriptor."""
    if fd < 0:
        return
    try:
        os.write(fd, result.to_json())
    except OSError as exc:
        say(prog, f"cannot write --json-status: {exc.strerror}")
    finally:
        os.close(fd)


def exec_command(opts: SandboxOptions) -> int:
    """Run ``glove exec`` and return its exit code (see ``docs/sandbox.md``)."""
    prog = "glove exec"
    status_fd = -1
    try:
        status_path: str | None = None
        if opts.json_status is not None and not opts.dry_run:
            status_fd, status_path = open_status(opts.json_status)
        host_env = dict(os.environ)
        agent = prepare_agent_for(opts, host_env)
        spec = build_from_options(
            opts, cwd=current_directory(), host_env=host_env, status_path=status_path, agent=agent
        )
        if opts.dry_run:
            return dry_run(prog, spec, as_json=opts.json, platform=opts.platform)
        if agent is not None:
            from glove.agents import write_agent_config

            write_agent_config(
                agent, workdir=spec.working_directory, mcp=False, sandbox_env=spec.env
            )
        if not opts.quiet:
            print_notes(prog, spec)
        result = run(
            spec, stdin=sys.stdin.fileno(), stdout=sys.stdout.fileno(), stderr=sys.stderr.fileno()
        )
    except (SandboxError, GloveError) as exc:  # GloveError: the agent adapters' errors
        result = setup_failure(str(exc))
    report_result(prog, result, quiet=opts.quiet)
    write_status(prog, status_fd, result)
    return result.exit_code
