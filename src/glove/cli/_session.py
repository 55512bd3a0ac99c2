"""``glove init``, ``glove capabilities``, ``glove plan``, ``glove session``: gloved's client.

Each command is one authenticated call (or a watch) on the owner's ``gloved`` socket.
Human output is a short table or line; ``--json`` prints the daemon's result as is, for
programs. Exit codes (docs/cli.md, :mod:`glove.exits`): 0 done; 1 the daemon refused (the
error's code is printed) or the plan is invalid; 64 a usage error; 69 no gloved is running
(or its socket is not this user's); 75 ``session wait --timeout`` expired (the session goes
on). ``session wait`` exits 0 only if the command exited 0: with the command's own code when
it exited non-zero, and 1 for every other outcome (a limit, a signal, a stop, a lost daemon,
a setup error).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar, cast

from glove.cli._status import (
    _SESSION_HEADERS,
    CALL_TIMEOUT_S,
    _fail,
    _print_json,
    _refused,
    _table,
    outcome_text,
    session_row,
    show_capabilities,
    show_session_status,
)
from glove.exits import (
    EXIT_DEADLINE,
    EXIT_NOT_AN_EXIT,
    EXIT_REFUSED,
    EXIT_USAGE,
)

# typer only where a command is registered: ``capabilities`` and ``session status`` also run
# without it (glove.cli._fast calls show_capabilities and show_session_status).
if TYPE_CHECKING:
    import msgspec
    import typer

    from glove.control import Client, SessionState, SessionStatus

MAX_EXIT_STATUS: Final = 255
#: The largest plan file read (the daemon refuses more than 64 KiB anyway).
MAX_PLAN_FILE_BYTES: Final = 1024 * 1024

T = TypeVar("T")

_RUNTIME_HELP = "gloved's runtime directory (default: the one `glove doctor` names)."


def _with_client(verb: str, runtime_dir: Path | None, action: Callable[[Client], T]) -> T:
    """Run ``action(client)`` on a connected client; every failure is one line and a code."""
    from glove.control import Client, ControlError

    try:
        with Client.for_runtime_dir(runtime_dir, timeout=CALL_TIMEOUT_S) as client:
            return action(client)
    except ControlError as exc:
        _refused(verb, runtime_dir, exc)


def _read_plan(verb: str, path: Path) -> str:
    """The plan file's text (sent as is: the daemon judges its exact bytes)."""
    try:
        if str(path) == "-":
            import sys

            data = sys.stdin.buffer.read(MAX_PLAN_FILE_BYTES + 1)
        else:
            with path.open("rb") as handle:
                data = handle.read(MAX_PLAN_FILE_BYTES + 1)
    except OSError as exc:
        _fail(verb, f"cannot read {path}: {exc.strerror or exc}", EXIT_REFUSED)
    if len(data) > MAX_PLAN_FILE_BYTES:
        _fail(verb, f"{path} is larger than {MAX_PLAN_FILE_BYTES} bytes", EXIT_REFUSED)
    return data.decode("utf-8", "surrogateescape")


#: The states ``glove session list --state`` takes (a session's life, in order).
SESSION_STATES: Final = ("created", "preparing", "composed", "running", "finalizing", "terminal")


def _print_result(result: msgspec.Struct) -> None:
    """A typed call's result as JSON: what gloved sent (the Structs encode as the server's)."""
    import msgspec

    _print_json(msgspec.to_builtins(result))


def status_rows(views: list[SessionStatus]) -> list[list[str]]:
    """The session table's rows of ``views``."""
    return [
        session_row(v.session_id, v.state, v.harness, v.outcome, v.receipt_seq, v.created_ns)
        for v in views
    ]


def wait_exit_code(view: SessionStatus) -> int:
    """``session wait``'s exit code for a terminal session (see the module docstring)."""
    outcome = view.outcome or {}
    if outcome.get("kind") == "exited":
        code = outcome.get("exit_code")
        if isinstance(code, int) and 0 <= code <= MAX_EXIT_STATUS:
            return code
    return EXIT_NOT_AN_EXIT


def register(app: typer.Typer) -> None:
    """Add ``init``, ``capabilities``, ``plan`` and ``session`` to ``app``."""
    _register_init(app)
    _register_capabilities(app)
    _register_plan(app)
    _register_session(app)


def _register_init(app: typer.Typer) -> None:
    import typer

    @app.command("init")
    def init_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
        alias: str = typer.Argument(..., help="The name plans use for this directory."),
        path: Path | None = typer.Argument(None, help="The directory to expose."),
        mode: str = typer.Option("ro", "--mode", help="ro (read-only) or rw."),
        target: str | None = typer.Option(
            None, "--target", help="Where it appears in the sandbox (default /workspace/ALIAS)."
        ),
        revoke: bool = typer.Option(False, "--revoke", help="Revoke the exposure ALIAS."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Expose a directory to sessions by alias (pinned, generation-bound), or revoke it."""
        if mode not in ("ro", "rw"):
            _fail("init", f"--mode must be ro or rw, not {mode!r}", EXIT_USAGE)
        if revoke:
            if path is not None:
                _fail("init", "--revoke takes the alias only", EXIT_USAGE)
            result = _with_client("init", runtime_dir, lambda c: c.exposure_revoke(alias))
        else:
            if path is None:
                _fail(
                    "init",
                    f"give the directory to expose: `glove init {alias} PATH` (this "
                    f"directory: `glove init {alias} {Path.cwd()}`)",
                    EXIT_USAGE,
                )
            where = str(Path.cwd() / path) if not path.is_absolute() else str(path)
            result = _with_client(
                "init",
                runtime_dir,
                lambda c: c.exposure_create(alias, where, mode=mode, target=target),
            )
        if as_json:
            _print_result(result)
        elif revoke:
            typer.echo(f"revoked {alias} (generation {result.generation})")
        else:
            typer.echo(
                f"exposed {result.path} as {alias!r} ({result.mode}, generation "
                f"{result.generation}) at {result.target}"
            )


def _register_capabilities(app: typer.Typer) -> None:
    import typer

    @app.command("capabilities")
    def capabilities_cmd(
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """What this gloved can run: schema, runtimes, each limit's mechanism."""
        show_capabilities(as_json, runtime_dir)


def _register_plan(app: typer.Typer) -> None:
    import typer

    plan = typer.Typer(help="Check plans against this gloved's local policy.")

    @plan.command("validate")
    def validate_cmd(
        file: Path = typer.Argument(..., help="The plan (JSON); - reads stdin."),
        as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Validate a plan: its digests when valid, every problem with its path when not."""
        text = _read_plan("plan validate", file)
        verdict = _with_client("plan validate", runtime_dir, lambda c: c.plan_validate(text))
        if as_json:
            _print_result(verdict)
        elif verdict.valid:
            typer.echo(f"valid\nsha256: {verdict.sha256}\nblake3: {verdict.blake3}")
            evaluation = verdict.evaluation
            if evaluation:
                fixture = evaluation["fixture"]
                typer.echo(
                    f"evaluation: {evaluation['kind']}, fixture {fixture['digest']} "
                    f"({fixture['size']} bytes)"
                )
        else:
            typer.echo("invalid", err=True)
            for problem in verdict.errors or ():
                typer.echo(f"  {problem['path']}: {problem['message']}", err=True)
        if not verdict.valid:
            raise typer.Exit(EXIT_REFUSED)

    app.add_typer(plan, name="plan")


def _register_session(app: typer.Typer) -> None:  # noqa: PLR0915 - one closure per verb
    import typer

    session = typer.Typer(help="Create, watch and stop gloved sessions.", no_args_is_help=True)

    @session.command("create")
    def create_cmd(
        file: Path = typer.Argument(..., help="The plan (JSON); - reads stdin."),
        as_json: bool = typer.Option(False, "--json", help="Print the new session as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Start a session from a plan; prints its id once the plan is durable."""
        from glove.control import RemoteError

        text = _read_plan("session create", file)

        def action(client: Client) -> SessionStatus:
            try:
                return client.session_create(text)
            except RemoteError as exc:
                errors = exc.data.get("errors") if isinstance(exc.data, dict) else None
                if exc.code != "invalid_plan" or not errors:
                    raise
                if as_json:
                    _print_json({"valid": False, "errors": errors})
                # Each problem once: the summary line does not repeat the first one.
                _fail(
                    "session create",
                    f"invalid_plan: plan refused ({len(errors)} "
                    f"problem{'s' if len(errors) != 1 else ''}):",
                    EXIT_REFUSED,
                    detail=[f"  {p['path']}: {p['message']}" for p in errors],
                )

        view = _with_client("session create", runtime_dir, action)
        if as_json:
            _print_result(view)
        else:
            typer.echo(view.session_id)

    @session.command("status")
    def status_cmd(
        session_id: str = typer.Argument(..., help="The session."),
        as_json: bool = typer.Option(False, "--json", help="Print the state as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """A session's state, and its outcome once terminal."""
        show_session_status(session_id, as_json, runtime_dir)

    @session.command("list")
    def list_cmd(
        state: str | None = typer.Option(None, "--state", help="Only sessions in this state."),
        after: str | None = typer.Option(None, "--after", help="Start after this session id."),
        limit: int = typer.Option(100, "--limit", min=1, max=500, help="At most this many."),
        as_json: bool = typer.Option(False, "--json", help="Print the page as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Sessions by id (paged; --after the last id for the next page)."""
        if state is not None and state not in SESSION_STATES:
            from glove.usage import did_you_mean

            _fail(
                "session list",
                f"--state {state!r} is not one of {', '.join(SESSION_STATES)}"
                + did_you_mean(state, SESSION_STATES),
                EXIT_USAGE,
            )
        page = _with_client(
            "session list",
            runtime_dir,
            lambda c: c.session_list(
                state=cast("SessionState | None", state), after=after, limit=limit
            ),
        )
        if as_json:
            _print_result(page)
            return
        typer.echo(_table(status_rows(page.sessions), _SESSION_HEADERS))
        if page.next is not None:
            typer.echo(f"more: glove session list --after {page.next}")

    @session.command("wait")
    def wait_cmd(
        session_id: str = typer.Argument(..., help="The session."),
        timeout: float | None = typer.Option(
            None, "--timeout", help="Give up after this many seconds (exit 75)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the final state as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Wait until the session is terminal; exit 0 only if its command exited 0."""
        from glove.control import ClientTimeout, RemoteError

        budget = timeout if timeout is not None else 24 * 3600.0
        if budget <= 0:
            _fail("session wait", "--timeout must be positive", EXIT_USAGE)

        def action(client: Client) -> SessionStatus | None:
            last = None
            try:
                for view in client.session_watch(session_id, timeout=budget):
                    last = view
            except ClientTimeout:
                return None
            except RemoteError as exc:
                if exc.code == "deadline_exceeded":
                    return None
                raise
            return last if last is not None and last.state == "terminal" else None

        final = _with_client("session wait", runtime_dir, action)
        if final is None:
            _fail("session wait", f"session {session_id} is not terminal yet", EXIT_DEADLINE)
        if as_json:
            _print_result(final)
        else:
            typer.echo(f"{session_id}: {outcome_text(final.outcome)}")
        raise typer.Exit(wait_exit_code(final))

    @session.command("watch")
    def watch_cmd(
        session_id: str = typer.Argument(..., help="The session."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Print each state of the session as it happens, until terminal."""

        def action(client: Client) -> None:
            for view in client.session_watch(session_id):
                if as_json:
                    _print_result(view)
                else:
                    typer.echo(f"{view.state} {outcome_text(view.outcome)}".rstrip(" -"))

        _with_client("session watch", runtime_dir, action)

    @session.command("stop")
    def stop_cmd(
        session_id: str = typer.Argument(..., help="The session."),
        as_json: bool = typer.Option(False, "--json", help="Print the state as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Stop a session: its sandbox is killed; the receipt says cancelled."""
        view = _with_client("session stop", runtime_dir, lambda c: c.session_stop(session_id))
        if as_json:
            _print_result(view)
        else:
            typer.echo(f"{session_id}: {view.state} (stopping)")

    @session.command("cleanup")
    def cleanup_cmd(
        session_id: str = typer.Argument(..., help="The terminal session."),
        as_json: bool = typer.Option(False, "--json", help="Print the state as JSON."),
        runtime_dir: Path | None = typer.Option(None, "--runtime-dir", help=_RUNTIME_HELP),
    ) -> None:
        """Remove a terminal session's output files (its record and receipt stay)."""
        view = _with_client("session cleanup", runtime_dir, lambda c: c.session_cleanup(session_id))
        if as_json:
            _print_result(view)
        else:
            typer.echo(f"{session_id}: output removed")

    from glove.cli._attach import register_session_verbs

    register_session_verbs(session)
    app.add_typer(session, name="session")
