"""``glove daemon``: install and control gloved as this user's service (systemd or launchd).

Exit codes: 0 done; 1 refused or failed (the message says why, never a traceback).
``status`` exits 0 when the service runs, 3 when it is installed but not running, 4 when
it is not installed (as ``systemctl status`` and LSB init scripts do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

import typer

from glove.exits import (
    EXIT_DAEMON_NOT_INSTALLED,
    EXIT_DAEMON_NOT_RUNNING,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
)

DEFAULT_LOG_LINES: Final = 100

T = TypeVar("T")


def _guarded(verb: str, work: Callable[[], T]) -> T:
    """Run ``work``; a Glove or OS error becomes one line on stderr and exit 1."""
    from glove.errors import GloveError

    try:
        return work()
    except (GloveError, OSError) as exc:
        typer.echo(f"glove daemon {verb}: {exc}", err=True)
        raise typer.Exit(EXIT_FAILED) from exc


def _json(value: object) -> None:
    import msgspec

    typer.echo(msgspec.json.encode(value).decode())


def register(app: typer.Typer) -> None:
    """Add the ``daemon`` command group to ``app``."""
    group = typer.Typer(
        help="Install and control gloved as this user's service (systemd or launchd).",
        no_args_is_help=True,
    )
    group.command("install")(install_cmd)
    group.command("uninstall")(uninstall_cmd)
    group.command("start")(start_cmd)
    group.command("stop")(stop_cmd)
    group.command("restart")(restart_cmd)
    group.command("status")(status_cmd)
    group.command("logs")(logs_cmd)
    app.add_typer(group, name="daemon")


def install_cmd(
    force: bool = typer.Option(
        False, "--force", help="Replace a service file install did not write, or one edited."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print every file install would write; change nothing."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Write the service definition for the local gloved, then enable and start it."""
    from glove.host import InstallPlan, install

    result = _guarded("install", lambda: install(force=force, dry_run=dry_run))
    if as_json:
        _json(result)
        return
    if isinstance(result, InstallPlan):
        for f in result.files:
            typer.echo(f"==> {f.path}")
            typer.echo(f.content, nl=not f.content.endswith("\n"))
        for argv in result.commands:
            typer.echo(f"==> would run: {' '.join(argv)}")
        return
    for change in result.files:
        typer.echo(f"{change.action}: {change.path}")
    for argv in result.commands:
        typer.echo(f"ran: {' '.join(argv)}")
    if not result.changed:
        typer.echo(f"{result.service} is already installed and running; nothing to do")
    elif result.state is not None:
        typer.echo(f"{result.service}: {result.state.state} ({result.state.sub_state or '-'})")
    for note in result.notes:
        typer.echo(f"note: {note}")


def uninstall_cmd(
    force: bool = typer.Option(
        False, "--force", help="Remove a service file even if it was edited; ignore failures."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Stop the service and remove exactly what install wrote."""
    from glove.host import uninstall

    report = _guarded("uninstall", lambda: uninstall(force=force))
    if as_json:
        _json(report)
        return
    if not report.changed:
        typer.echo(f"{report.service} is not installed; nothing to do")
    for argv in report.commands:
        typer.echo(f"ran: {' '.join(argv)}")
    for change in report.files:
        typer.echo(f"{change.action}: {change.path}")
    for directory in report.directories:
        typer.echo(f"removed directory: {directory}")
    for note in report.notes:
        typer.echo(f"note: {note}")


def _control(action: str, as_json: bool) -> None:
    from glove.host import control

    state = _guarded(action, lambda: control(action))  # type: ignore[arg-type]
    if as_json:
        _json(state)
    else:
        pid = f", pid {state.main_pid}" if state.main_pid else ""
        typer.echo(f"{action}: {state.state} ({state.sub_state or '-'}{pid})")


_JSON_OPTION = typer.Option(False, "--json", help="Print the state afterwards as JSON.")


def start_cmd(as_json: bool = _JSON_OPTION) -> None:
    """Start the installed service."""
    _control("start", as_json)


def stop_cmd(as_json: bool = _JSON_OPTION) -> None:
    """Stop the service (it stays installed and starts again at the next login)."""
    _control("stop", as_json)


def restart_cmd(as_json: bool = _JSON_OPTION) -> None:
    """Restart the service (its sessions end; each gets its receipt)."""
    _control("restart", as_json)


def status_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """Is the service installed as install wrote it, running, and answering?"""
    from glove.host import status

    report = _guarded("status", status)
    if as_json:
        _json(report)
    else:
        where = f"installed at {report.path}" if report.installed else "not installed"
        if report.installed:
            where += (
                ", edited since install"
                if report.modified
                else (", as install wrote it" if report.current else ", outdated: reinstall")
            )
        typer.echo(f"{report.service} ({report.platform}): {where}")
        state = report.manager
        if state is None:
            typer.echo(f"  manager: unreachable: {report.manager_error}")
        else:
            extra = [f"pid {state.main_pid}"] if state.main_pid else []
            extra += [state.enabled] if state.enabled else []
            extra += [f"watchdog {state.watchdog_s:g}s"] if state.watchdog_s else []
            extra += [f"restarts {state.restarts}"] if state.restarts is not None else []
            typer.echo(f"  manager: {state.state} ({state.sub_state or '-'}) {', '.join(extra)}")
            if state.status_text:
                typer.echo(f"  status: {state.status_text}")
        answers = "answers" if report.reachable else "no answer"
        typer.echo(f"  control socket: {report.socket} ({answers})")
    if not report.installed:
        raise typer.Exit(EXIT_DAEMON_NOT_INSTALLED)
    if report.manager is None or not report.manager.active:
        raise typer.Exit(EXIT_DAEMON_NOT_RUNNING)


def logs_cmd(
    lines: int = typer.Option(DEFAULT_LOG_LINES, "--lines", "-n", min=1, help="Lines to show."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
) -> None:
    """Show the service's log (journalctl on Linux, the log file on macOS)."""
    import shutil
    import subprocess

    from glove.host import logs_argv

    argv = _guarded("logs", lambda: logs_argv(lines, follow=follow))
    exe = shutil.which(argv[0])
    if exe is None:
        typer.echo(f"glove daemon logs: {argv[0]} is not on PATH", err=True)
        raise typer.Exit(EXIT_FAILED)
    try:
        code = subprocess.run([exe, *argv[1:]], check=False).returncode
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    raise typer.Exit(code)
