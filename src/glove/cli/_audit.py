"""``glove audit show``: read the activity log as a person (a table) or a program (JSON lines).

Exit codes: 0 shown (even if nothing matched); 1 the file cannot be read; 2 bad usage.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Final

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
#: One line of an audit log as JSON: a record of any kind (the mediator's, the egress
#: proxy's) and of any version, so read tolerantly: each cell takes the members it shows
#: and narrows their values (``--json`` prints the record as it was read).
AuditRecord = Mapping[str, object]


def _run_of(record: AuditRecord) -> object:
    """The run a record belongs to: the mediator's ``run``, the egress proxy's ``session``."""
    return record.get("run", record.get("session"))


def _matches(record: AuditRecord, filters: Filters) -> bool:
    tool, decision, run = filters
    if tool is not None and not fnmatch.fnmatchcase(str(record.get("tool", "")), tool):
        return False
    if decision is not None and _decision(record) != decision:
        return False
    return run is None or _run_of(record) == run


def _decision(record: AuditRecord) -> str:
    """The DECISION cell: the record's decision; an egress connection's end says ``end``."""
    if record.get("kind") == "egress.end":
        return "end"
    return str(record.get("decision", "-"))


def _destination(record: AuditRecord) -> str:
    host, port = record.get("host"), record.get("port")
    where = "?" if host is None else str(host)
    if port is not None:
        where = f"[{where}]:{port}" if ":" in where else f"{where}:{port}"
    proto = record.get("proto")
    return f"dns {where}" if proto == "dns" else where


#: The TOOL cell of each mediator record kind that is not a tool call.
_SUBJECTS: Final[dict[str, Callable[[AuditRecord], str]]] = {
    "mcp.prompt": lambda r: f"prompt {r.get('prompt', '?')}",
    "mcp.resource": lambda r: f"{r.get('op', 'resource')} {r.get('uri', '?')}",
    "mcp.complete": lambda r: f"complete {r.get('ref', '?')} {r.get('target', '')}".rstrip(),
    "mcp.logging": lambda r: f"logging {r.get('level', '?')}",
    "mcp.request": lambda r: f"request {r.get('request_id', '')} (error {r.get('code', '?')})",
}


def _subject(record: AuditRecord) -> str:
    """The TOOL cell: the tool called, or what else the record is about (by its kind)."""
    kind = str(record.get("kind", ""))
    if "tool" in record:
        return str(record["tool"])
    if kind.startswith("egress"):
        return _destination(record)
    if kind in _SUBJECTS:
        return _SUBJECTS[kind](record)
    if "upstream" in record:
        method = record.get("method")
        return f"{record['upstream']}: {method}" if method else f"upstream {record['upstream']}"
    return kind or "-"


def _why(record: AuditRecord) -> str:
    """The WHY cell: the reason (it names the deciding rule), and what a kind adds to it."""
    kind = record.get("kind")
    parts = [str(record["reason"])] if record.get("reason") else []
    if kind == "egress.end":
        parts.insert(
            0,
            f"{record.get('outcome', '?')}: up {record.get('bytes_up', 0)} B, down "
            f"{record.get('bytes_down', 0)} B, {record.get('duration_ms', 0)} ms"
            + (f" to {record['address']}" if record.get("address") else ""),
        )
    elif kind == "egress" and not parts and record.get("rule"):
        parts.append(str(record["rule"]))
    if record.get("excerpt"):
        parts.append(f"line: {record['excerpt']}")
    stderr = record.get("stderr")
    if isinstance(stderr, list) and stderr:
        parts.append(f"stderr: {stderr[-1]}")
    return "; ".join(parts)


def _row(record: AuditRecord) -> str:
    ts = str(record.get("ts", ""))
    when = ts[11:26] if len(ts) >= 26 else ts
    run = _run_of(record)
    values = (
        str(record.get("seq", "")),
        when,
        "-" if run is None else str(run),
        _decision(record),
        _subject(record),
    )
    cells = [value[:width].ljust(width) for value, (_, width) in zip(values, _COLUMNS, strict=True)]
    detail = _why(record)
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
    path: Path = typer.Argument(
        ..., help="The audit log (glove.toml's `audit`, or an egress audit log)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print matching records as JSON lines."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new records."),
    tool: str | None = typer.Option(None, "--tool", help="Only this exposed tool (a glob)."),
    decision: str | None = typer.Option(
        None, "--decision", help="Only this decision: allow, deny, unknown_tool, ..."
    ),
    run: str | None = typer.Option(
        None, "--run", help="Only the records of this run id (an egress log's session)."
    ),
) -> None:
    """Show an audit log (the mediator's or the egress proxy's): one row per record (or
    --json), oldest first; TOOL is the tool, or what another kind is about (host:port)."""
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
