"""``glove capabilities`` and ``glove session status``: one control call each, printed.

Both run from :mod:`glove.cli._fast` before typer is imported, and from their typer commands
in :mod:`glove.cli._session`: the same functions, so the two paths print the same. The call
is :func:`glove.control.call_once`, JSON alone: this module and what it imports load
neither msgspec, ``dataclasses`` nor ``pathlib`` (docs/decisions/0049-a-json-only-one-shot-call.md;
``tests/test_cli_imports.py`` pins the set). The helpers every client command shares (a
failure as one line and an exit code, the session table) live here for the same reason.

What ``call_once`` returns is JSON, typed here as :class:`SessionStatusJson` and
:class:`CapabilitiesJson`: the fields of the typed clients' ``SessionStatus`` and
``Capabilities`` (``tests/control/test_results.py`` holds them to those Structs), without
their decoder. Decoding strictly would load msgspec, the +24 ms decision 0049 measured.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any, Final, NoReturn, TypedDict

from glove.cli._echo import echo
from glove.exits import EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE

#: How long one call may take (a create persists the plan; the default is generous).
CALL_TIMEOUT_S: Final = 30.0

RuntimeDir = str | os.PathLike[str] | None
#: A receipt's outcome or a refinement's evaluation as JSON: read tolerantly (a newer gloved
#: may add a kind or a member; ``glove.control.SessionStatus`` reads them the same way).
Outcome = Mapping[str, object]


class SessionStatusJson(TypedDict):
    """A ``session.status`` result as JSON: :class:`glove.control.SessionStatus`'s fields."""

    session_id: str
    state: str
    harness: str
    created_ns: int
    updated_ns: int
    plan_sha256: str
    plan_blake3: str
    receipt_seq: int | None
    outcome: Outcome | None
    launch_binding: str | None
    cleaned: bool
    terminal: str
    evaluation: Outcome | None


class CapabilitiesJson(TypedDict):
    """A ``capabilities`` result as JSON: :class:`glove.protocol.Capabilities`' fields."""

    schema_version: int
    protocol: int
    lifecycle_operational: bool
    runtimes: list[str]
    limits: dict[str, str]
    networks: list[str]
    terminals: list[str]
    reason: str | None
    backend: str


def _fail(verb: str, message: str, code: int, detail: list[str] | None = None) -> NoReturn:
    echo(f"glove {verb}: {message}", err=True)
    for line in detail or ():
        echo(line, err=True)
    raise SystemExit(code)


def _call_once(
    verb: str, runtime_dir: RuntimeDir, method: str, params: Mapping[str, str] | None = None
) -> Any:
    """One call through the JSON-only one-shot client (no msgspec: docs/decisions/0049);
    every failure is the line and code :func:`_with_client` gives for it."""
    from glove.control import call_once
    from glove.control.errors import ControlError

    try:
        return call_once(runtime_dir, method, params, timeout=CALL_TIMEOUT_S)
    except ControlError as exc:
        _refused(verb, runtime_dir, exc)


def _refused(verb: str, runtime_dir: RuntimeDir, exc: Exception) -> NoReturn:
    """The one line and exit code of a failed control call."""
    from glove.control.errors import DaemonUnavailable, RemoteError

    if isinstance(exc, RemoteError):
        if exc.code == "method_not_found":
            _fail(verb, _no_sessions(runtime_dir, exc.message), EXIT_REFUSED)
        if exc.code == "invalid_params":  # an option's value the daemon cannot take
            _fail(verb, f"{exc.code}: {exc.message} (see glove {verb} --help)", EXIT_USAGE)
        _fail(verb, f"{exc.code}: {exc.message}", EXIT_REFUSED)
    if isinstance(exc, DaemonUnavailable):
        _fail(verb, str(exc), EXIT_UNAVAILABLE)
    _fail(verb, str(exc), EXIT_REFUSED)


def _no_sessions(runtime_dir: RuntimeDir, message: str) -> str:
    """Why gloved has no session methods, and what to do: its capabilities' reason.

    A gloved started before ``glove setup`` runs on without sessions; the line says so and
    names the fix (set up, then restart gloved) rather than the method it lacks.
    """
    from glove.control import call_once
    from glove.control.errors import ControlError

    try:
        caps: CapabilitiesJson = call_once(runtime_dir, "capabilities", timeout=CALL_TIMEOUT_S)
        reason = caps.get("reason")
    except ControlError:
        reason = None
    if not reason:
        return f"{message} (gloved runs no sessions: see `glove capabilities`)"
    if "glove setup" in reason:
        return (
            f"gloved runs no sessions: it was started before `glove setup` ({reason}); "
            "run `glove setup`, then restart gloved"
        )
    return f"gloved runs no sessions: {reason}"


def _print_json(value: object) -> None:
    """``value`` (JSON: what gloved answered) on one line, keys sorted."""
    echo(json.dumps(value, sort_keys=True))


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    )


def outcome_text(outcome: Outcome | None) -> str:
    """A session outcome in a few words."""
    if not outcome:
        return "-"
    kind = str(outcome.get("kind"))
    if kind == "exited":
        return f"exited {outcome.get('exit_code')}"
    if kind == "limit":
        return f"limit {outcome.get('limit')} ({outcome.get('mechanism')})"
    if kind == "signaled":
        return f"signal {outcome.get('signal')}"
    return kind


def session_row(  # noqa: PLR0917 - a row's columns
    session_id: str,
    state: str,
    harness: str,
    outcome: Outcome | None,
    receipt_seq: int | None,
    created_ns: int,
) -> list[str]:
    """One session's row of the session table (:data:`_SESSION_HEADERS`)."""
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created_ns // 10**9))
    seq = "-" if receipt_seq is None else str(receipt_seq)
    return [session_id, state, harness, outcome_text(outcome), seq, created]


_SESSION_HEADERS: Final = ["SESSION", "STATE", "HARNESS", "OUTCOME", "RECEIPT", "CREATED"]


def show_capabilities(as_json: bool, runtime_dir: RuntimeDir) -> None:
    """``glove capabilities``: one call, printed as a report or JSON (no typer needed)."""
    caps: CapabilitiesJson = _call_once("capabilities", runtime_dir, "capabilities")
    if as_json:
        _print_json(caps)
        return
    state = "operational" if caps["lifecycle_operational"] else "not operational"
    echo(f"schema {caps['schema_version']}, protocol {caps['protocol']}: {state}")
    if caps.get("reason"):
        echo(f"reason: {caps['reason']}")
    echo(f"backend: {caps.get('backend', '-')}")
    echo(f"runtimes: {', '.join(caps['runtimes']) or '-'}")
    echo(f"networks: {', '.join(caps['networks']) or '-'}")
    echo(f"terminals: {', '.join(caps['terminals']) or '-'}")
    rows = [[name, mech] for name, mech in sorted(caps["limits"].items())]
    echo(_table(rows, ["LIMIT", "MECHANISM"]))


def show_session_status(session_id: str, as_json: bool, runtime_dir: RuntimeDir) -> None:
    """``glove session status``: one call, printed as a one-row table or JSON (no typer)."""
    params = {"session_id": session_id}
    view: SessionStatusJson = _call_once("session status", runtime_dir, "session.status", params)
    if as_json:
        _print_json(view)
        return
    row = session_row(
        view["session_id"],
        view["state"],
        view["harness"],
        view["outcome"],
        view["receipt_seq"],
        int(view["created_ns"]),
    )
    echo(_table([row], _SESSION_HEADERS))
