"""``glove audit show``: read the activity log as a person (a table) or a program (JSON lines).

Exit codes: 0 shown (even if nothing matched); 1 the file cannot be read; 2 bad usage.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import typer

from glove.exits import EXIT_FAILED

#: How often ``--follow`` looks for new lines.
FOLLOW_POLL_S: Final = 0.2
#: Largest line read (a record is at most 64 KiB).
MAX_LINE_BYTES: Final = 128 * 1024
REASON_CHARS: Final = 90

_COLUMNS: Final = (("SEQ", 6), ("TIME", 15), ("RUN", 12), ("DECISION", 14), ("TOOL", 28))


def register(app: typer.Typer) -> None:
    """Add the ``audit`` command group to ``app``."""
    group = typer.Typer(help="Read the mediator's activity (audit) log.", no_args_is_help=True)
    group.command("show")(show_cmd)
    app.add_typer(group, name="audit")


Filters = tuple[str | None, str | None, str | None]


def _matches(record: dict[str, Any], filters: Filters) -> bool:
    tool, decision, run = filters
    if tool is not None and not fnmatch.fnmatchcase(str(record.get("tool", "")), tool):
        return False
    if decision is not None and record.get("decision") != decision:
        return False
    return run is None or record.get("run") == run


def _row(record: dict[str, Any]) -> str:
    ts = str(record.get("ts", ""))
    when = ts[11:26] if len(ts) >= 26 else ts
    values = (
        str(record.get("seq", "")),
        when,
        str(record.get("run", "-")),
        str(record.get("decision", "-")),
        str(record.get("tool", "-")),
    )
    cells = [value[:width].ljust(width) for value, (_, width) in zip(values, _COLUMNS, strict=True)]
    detail = str(record.get("reason", ""))  # it names the deciding rule
    if len(detail) > REASON_CHARS:
        detail = detail[: REASON_CHARS - 3] + "..."
    return " ".join(cells) + " " + detail


def _header() -> str:
    return " ".join(name.ljust(width) for name, width in _COLUMNS) + " WHY"


class _Reader:
    """Reads whole lines from the log, following it across rotation when asked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skipped = 0
        self._handle = path.open("rb")
        self._identity = os.fstat(self._handle.fileno())
        self._pending = b""

    def lines(self) -> Iterator[bytes]:
        """Every complete line available now."""
        while True:
            chunk = self._handle.readline(MAX_LINE_BYTES)
            if not chunk:
                return
            self._pending += chunk
            if not self._pending.endswith(b"\n"):
                if len(self._pending) > MAX_LINE_BYTES:
                    self.skipped += 1
                    self._pending = b""
                continue  # a line being written: wait for the rest
            line, self._pending = self._pending, b""
            yield line

    def rotated(self) -> bool:
        """Whether the path now names another file (the log rotated); if so, reopen it."""
        try:
            current = self.path.stat()
        except FileNotFoundError:
            return False
        if (current.st_dev, current.st_ino) == (self._identity.st_dev, self._identity.st_ino):
            return False
        self._handle.close()
        self._handle = self.path.open("rb")
        self._identity = os.fstat(self._handle.fileno())
        self._pending = b""
        return True

    def close(self) -> None:
        """Close the file."""
        self._handle.close()


def _emit(
    reader: _Reader, filters: tuple[str | None, str | None, str | None], as_json: bool
) -> None:
    for line in reader.lines():
        try:
            record = json.loads(line)
        except ValueError:
            reader.skipped += 1
            continue
        if not isinstance(record, dict) or not _matches(record, filters):
            continue
        if as_json:
            sys.stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
        else:
            sys.stdout.write(_row(record) + "\n")
    sys.stdout.flush()


def show_cmd(  # noqa: PLR0917 - typer maps each parameter to an option
    path: Path = typer.Argument(..., help="The audit log (the `audit` file of glove.toml)."),
    as_json: bool = typer.Option(False, "--json", help="Print matching records as JSON lines."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new records."),
    tool: str | None = typer.Option(None, "--tool", help="Only this exposed tool (a glob)."),
    decision: str | None = typer.Option(
        None, "--decision", help="Only this decision: allow, deny, unknown_tool, ..."
    ),
    run: str | None = typer.Option(None, "--run", help="Only the records of this run id."),
) -> None:
    """Show the activity log: one row per decision (or --json), oldest first."""
    try:
        reader = _Reader(path)
    except OSError as exc:
        typer.echo(f"glove audit show: cannot read {path}: {exc.strerror or exc}", err=True)
        raise typer.Exit(EXIT_FAILED) from exc
    filters = (tool, decision, run)
    if not as_json:
        typer.echo(_header())
    try:
        _emit(reader, filters, as_json)
        while follow:
            time.sleep(FOLLOW_POLL_S)
            _emit(reader, filters, as_json)  # drain the current file first
            if reader.rotated():
                _emit(reader, filters, as_json)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        typer.echo(f"glove audit show: reading {path} failed: {exc.strerror or exc}", err=True)
        raise typer.Exit(EXIT_FAILED) from exc
    finally:
        reader.close()
    if reader.skipped:
        typer.echo(
            f"glove audit show: skipped {reader.skipped} line(s) that are not records", err=True
        )
