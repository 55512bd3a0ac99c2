"""``glove attach``, ``glove session log/input/resize/signal``: a session's terminal, and
``glove session output``: a pipes session's stdout and stderr.

``glove attach ID`` is a person's client (raw mode, the detach key, the window size
followed); the others are for scripts. Exit codes as the rest of ``glove session``
(docs/cli.md): 0 done, 1 the daemon refused (its code is printed), 64 a usage error, 69 no
gloved. ``glove attach`` exits 0 when detached; when the session ended while attached, as
``glove session wait`` does (the command's own exit code, or 1).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

import typer

from glove.cli._session import _RUNTIME_HELP, _print_result, _with_client, wait_exit_code
from glove.cli._status import _fail, _no_sessions, outcome_text
from glove.exits import EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE

if TYPE_CHECKING:
    from glove.cli._terminal_client import AttachEnd
    from glove.control import AsyncClient, Client, SessionStatus

#: What ``glove attach`` replays by default: the last bytes of the transcript.
DEFAULT_TAIL_BYTES: Final = 256 * 1024
#: How long ``glove attach`` waits for a session that ended to have its receipt.
FINAL_STATE_WAIT_S: Final = 10.0
LOG_CALL_TIMEOUT_S: Final = 24 * 3600.0
#: How often ``glove session output --follow`` looks for more output (a file, no stream).
OUTPUT_POLL_S: Final = 0.2


class Start(NamedTuple):
    """Where a replay starts: byte ``offset`` (``--from``), the last ``tail`` bytes, or
    neither (everything the transcript ring holds)."""

    offset: int | None
    tail: int | None


def _start(verb: str, offset: int | None, tail: int | None) -> Start:
    if offset is not None and tail is not None:
        _fail(verb, "give --from or --tail, not both", EXIT_USAGE)
    for name, value in (("--from", offset), ("--tail", tail)):
        if value is not None and value < 0:
            _fail(verb, f"{name} must be 0 or more", EXIT_USAGE)
    return Start(offset=offset, tail=tail)


def register(app: typer.Typer) -> None:
    """Add ``attach`` to ``app``."""

    @app.command("attach")
    def attach_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
        session_id: str = typer.Argument(..., help="The session (its plan says terminal pty)."),
        offset: int | None = typer.Option(
            None, "--from", help="Replay from this byte offset (the one a detach printed)."
        ),
        tail: int | None = typer.Option(
            None, "--tail", help=f"Replay the last N bytes (default {DEFAULT_TAIL_BYTES})."
        ),
        read_only: bool = typer.Option(False, "--read-only", help="Watch; never type."),
        detach_key: str = typer.Option(
            "^]", "--detach-key", help="The key that detaches (^X, a character, or none)."
        ),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Attach this terminal to a session's: type to the agent, Ctrl-] detaches."""
        from glove.cli._terminal_client import parse_detach_key

        start = _start("attach", offset, tail)
        if start.offset is None and start.tail is None:
            start = start._replace(tail=DEFAULT_TAIL_BYTES)
        try:
            key = parse_detach_key(detach_key)
        except ValueError as exc:
            _fail("attach", str(exc), EXIT_USAGE)
        end, final = _run_attach(session_id, start, read_only, key, runtime_dir)
        if end.session_ended:
            outcome = outcome_text(final.outcome if final is not None else None)
            sys.stderr.write(f"\n[glove: session {session_id} ended: {outcome}]\n")
            raise typer.Exit(wait_exit_code(final) if final is not None else 0)
        sys.stderr.write(
            f"\n[glove: detached from {session_id} at offset {end.offset}; "
            f"`glove attach {session_id} --from {end.offset}` resumes]\n"
        )


def _run_attach(
    session_id: str,
    start: Start,
    read_only: bool,
    key: bytes | None,
    runtime_dir: Path | None,
) -> tuple[AttachEnd, SessionStatus | None]:
    import asyncio

    from glove.cli._terminal_client import AttachBroken, TerminalClient
    from glove.control import AsyncClient, ControlError, DaemonUnavailable, RemoteError

    def notice(text: str) -> None:
        sys.stderr.write(f"\r\n[glove: {text}]\r\n")
        sys.stderr.flush()

    async def main() -> tuple[AttachEnd, SessionStatus | None]:
        async with AsyncClient.for_runtime_dir(runtime_dir) as client:
            stdin = sys.stdin.fileno() if sys.stdin is not None else None
            terminal = TerminalClient(
                client,
                session_id,
                stdin=stdin,
                out=sys.stdout.fileno(),
                read_only=read_only,
                offset=start.offset,
                tail=start.tail,
                detach_key=key,
                notice=notice,
            )
            end = await terminal.run()
            final = None
            if end.session_ended:
                final = await _final_state(client, session_id)
            return end, final

    try:
        return asyncio.run(main())
    except RemoteError as exc:
        if exc.code == "method_not_found":
            _fail("attach", _no_sessions(runtime_dir, exc.message), EXIT_REFUSED)
        _fail("attach", f"{exc.code}: {exc.message}", EXIT_REFUSED)
    except DaemonUnavailable as exc:
        _fail("attach", str(exc), EXIT_UNAVAILABLE)
    except (ControlError, AttachBroken) as exc:
        _fail("attach", str(exc), EXIT_REFUSED)


async def _final_state(client: AsyncClient, session_id: str) -> SessionStatus | None:
    from glove.control import ControlError

    last = None
    try:
        async with client.session_watch(session_id, timeout=FINAL_STATE_WAIT_S) as views:
            async for view in views:
                last = view
    except ControlError:
        return None
    return last if last is not None and last.state == "terminal" else None


def register_session_verbs(session: typer.Typer) -> None:
    """Add ``log``, ``output``, ``input``, ``resize`` and ``signal`` to ``glove session``."""

    @session.command("log")
    def log_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
        session_id: str = typer.Argument(..., help="The session."),
        raw: bool = typer.Option(
            False, "--raw", help="The exact bytes, escape sequences included (unsafe to a tty)."
        ),
        offset: int | None = typer.Option(None, "--from", help="Start at this byte offset."),
        tail: int | None = typer.Option(None, "--tail", help="Only the last N bytes."),
        follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing live output."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """The session's transcript; without --raw, sequences that act on a terminal are
        shown inert (^[ notation)."""
        start = _start("session log", offset, tail)
        _with_client(
            "session log", runtime_dir, lambda c: _print_log(c, session_id, start, follow, raw)
        )

    @session.command("output")
    def output_cmd(
        session_id: str = typer.Argument(..., help="The session (its plan says terminal pipes)."),
        stderr: bool = typer.Option(False, "--stderr", help="Its stderr instead of its stdout."),
        raw: bool = typer.Option(
            False, "--raw", help="The exact bytes, escape sequences included (unsafe to a tty)."
        ),
        follow: bool = typer.Option(
            False, "--follow", "-f", help="Keep printing until the session ends."
        ),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """A pipes session's stdout (or --stderr); without --raw, sequences that act on a
        terminal are shown inert, as `glove session log` shows a transcript."""
        _print_output(session_id, "stderr" if stderr else "stdout", raw, follow, runtime_dir)

    @session.command("input")
    def input_cmd(
        session_id: str = typer.Argument(..., help="The session."),
        data: str = typer.Option(..., "--data", help="The text to type."),
        enter: bool = typer.Option(False, "--enter", help="Then press Enter (a CR)."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Type text into the session's terminal."""
        text = data + ("\r" if enter else "")
        result = _with_client(
            "session input", runtime_dir, lambda c: c.session_input(session_id, data=text)
        )
        if as_json:
            _print_result(result)

    @session.command("resize")
    def resize_cmd(
        session_id: str = typer.Argument(..., help="The session."),
        rows: int = typer.Argument(..., help="Rows (1-1000)."),
        cols: int = typer.Argument(..., help="Columns (1-1000)."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Resize the session's terminal (the agent gets SIGWINCH)."""
        if not (1 <= rows <= 1000 and 1 <= cols <= 1000):
            _fail("session resize", "rows and columns are 1-1000", EXIT_USAGE)
        _with_client(
            "session resize", runtime_dir, lambda c: c.session_resize(session_id, rows, cols)
        )

    @session.command("signal")
    def signal_cmd(
        session_id: str = typer.Argument(..., help="The session."),
        sig: str = typer.Argument(..., help="INT, QUIT, TSTP, TERM, HUP, USR1 or USR2."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Signal the agent: INT, QUIT, TSTP reach its terminal's foreground job."""
        from typing import get_args

        from glove.control import SignalName

        names: tuple[SignalName, ...] = get_args(SignalName)
        name = sig.upper().removeprefix("SIG")
        signal = next((known for known in names if known == name), None)
        if signal is None:
            _fail("session signal", f"{sig!r} is not one of {', '.join(names)}", EXIT_USAGE)
        result = _with_client(
            "session signal", runtime_dir, lambda c: c.session_signal(session_id, signal)
        )
        typer.echo(f"SIG{name} -> {result.to}")


def _print_output(
    session_id: str, stream: str, raw: bool, follow: bool, runtime_dir: Path | None
) -> None:
    """Print a pipes session's output file (see ``glove session output``)."""
    import time

    from glove.config import glove_paths
    from glove.session import LogFilter

    verb = "session output"

    def status(client: Client) -> SessionStatus:
        return client.session_status(session_id)

    view = _with_client(verb, runtime_dir, status)
    if view.terminal == "pty":
        _fail(
            verb,
            f"session {session_id} has a terminal: its output is its transcript, "
            f"`glove session log {session_id}`",
            EXIT_REFUSED,
        )
    path = glove_paths().sessions_data / session_id / stream
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        why = "removed by `glove session cleanup`" if view.cleaned else "not written yet"
        _fail(verb, f"session {session_id} has no {stream}: {why} ({path})", EXIT_REFUSED)
    except OSError as exc:
        _fail(verb, f"cannot read {path}: {exc.strerror or exc}", EXIT_REFUSED)
    out = sys.stdout.buffer
    text = LogFilter()
    with handle:
        while True:
            ended = view.state == "terminal"  # read before the bytes: none is missed
            while data := handle.read(64 * 1024):
                out.write(data if raw else text.feed(data).encode())
                out.flush()
            if not follow or ended:
                break
            time.sleep(OUTPUT_POLL_S)
            view = _with_client(verb, runtime_dir, status)
    if not raw:
        out.write(text.close().encode())
    out.flush()


def _print_log(client: Client, session_id: str, start: Start, follow: bool, raw: bool) -> None:
    from glove.control import Gap, Output
    from glove.session import LogFilter

    out = sys.stdout.buffer
    text = LogFilter()
    events = client.session_attach(
        session_id,
        offset=start.offset,
        tail=start.tail,
        follow=follow,
        timeout=LOG_CALL_TIMEOUT_S,
    )
    for event in events:
        if isinstance(event, Output):
            out.write(event.data if raw else text.feed(event.data).encode())
            out.flush()
        elif isinstance(event, Gap):
            sys.stderr.write(
                f"[glove: bytes {event.offset}..{event.until} were evicted "
                f"({event.evicted} in all)]\n"
            )
    if not raw:
        out.write(text.close().encode())
    out.flush()
