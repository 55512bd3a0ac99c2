"""``glove journal verify`` and ``glove journal repair``: parse, call the library, print.

Exit codes of ``verify``: 0 the journal verifies; 1 corrupt (torn tail or garbled bytes);
2 tampered (chain, sequence, journal id, segment order); 3 truncated beneath the checkpoint;
4 anything else (unreadable key or directory, unsupported format).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import typer

from glove.exits import (
    EXIT_JOURNAL_CORRUPT,
    EXIT_JOURNAL_OTHER,
    EXIT_JOURNAL_TAMPERED,
    EXIT_JOURNAL_TRUNCATED,
)

EXIT_BY_ERROR: Final = {
    "JournalCorrupt": EXIT_JOURNAL_CORRUPT,
    "JournalTampered": EXIT_JOURNAL_TAMPERED,
    "JournalTruncated": EXIT_JOURNAL_TRUNCATED,
}


_KEY_HELP: Final = "The HMAC key file (default: the one glove setup made)."


def _key_path(given: Path | None) -> Path:
    """``--key-file``, or the journals' key ``glove setup`` made."""
    if given is not None:
        return given
    from glove.config import glove_paths

    return glove_paths().hmac_key


def read_key_file(path: Path) -> bytes:
    """Read a journal key: 64 hex digits (optionally newline-terminated) or raw bytes.

    Raises:
        OSError: the file cannot be read.
        ValueError: the key is shorter than 32 bytes.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise OSError(exc.errno, f"cannot read key file {path}: {exc.strerror}") from exc
    text = raw.strip()
    if len(text) == 64:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    if len(raw) < 32:
        raise ValueError(f"key file {path} holds {len(raw)} bytes; a key is at least 32")
    return raw


def _journal_dir(path: Path) -> None:
    """Refuse a path that is not a journal directory, with one clear line.

    Raises:
        OSError: missing, or not a directory.
    """
    if not path.exists():
        raise OSError(2, f"{path} does not exist")
    if not path.is_dir():
        raise OSError(20, f"{path} is not a journal directory (a journal is a directory)")


def _truncate_point(text: str) -> tuple[str, int]:
    """Parse ``SEGMENT:OFFSET``.

    Raises:
        ValueError: not of that form.
    """
    segment, _, offset = text.rpartition(":")
    if not segment or not offset.isdigit():
        raise ValueError(f"--truncate-at wants SEGMENT:OFFSET, got {text!r}")
    return segment, int(offset)


def _say(command: str, exc: OSError | ValueError) -> None:
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    typer.echo(f"glove journal {command}: {text}", err=True)


def register(app: typer.Typer) -> None:
    """Add the ``journal`` command group to ``app``."""
    group = typer.Typer(help="Verify and repair tamper-evident journals.", no_args_is_help=True)
    group.command("verify")(verify_cmd)
    group.command("repair")(repair_cmd)
    app.add_typer(group, name="journal")


def verify_cmd(
    path: Path = typer.Argument(..., help="The journal directory."),
    key_file: Path | None = typer.Option(None, "--key-file", "--key", help=_KEY_HELP),
    checkpoint: str | None = typer.Option(
        None, "--checkpoint", help="SEQ:TAGHEX from an earlier receipt; must still hold."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Verify a journal end to end; exit 0 only if it verifies."""
    import msgspec

    from glove.journal import parse_checkpoint, verify

    try:
        _journal_dir(path)
        key = read_key_file(_key_path(key_file))
        point = parse_checkpoint(checkpoint) if checkpoint is not None else None
        report = verify(path, key, point)
    except (OSError, ValueError) as exc:
        _say("verify", exc)
        raise typer.Exit(EXIT_JOURNAL_OTHER) from exc
    if as_json:
        typer.echo(msgspec.json.encode(report).decode())
    elif report.ok:
        typer.echo(
            f"OK {path}: journal {report.journal_id}, {report.segments} segment(s), "
            f"seq {report.first_seq}..{report.last_seq}, head {report.last_tag}"
        )
    else:
        typer.echo(f"FAILED {path}: {report.error}: {report.message}")
        if report.tail is not None and report.tail.recoverable:
            typer.echo("  the tail is a crash remnant; opening the journal cuts it")
    if not report.ok:
        raise typer.Exit(EXIT_BY_ERROR.get(report.error or "", EXIT_JOURNAL_OTHER))


def repair_cmd(
    path: Path = typer.Argument(..., help="The journal directory."),
    key_file: Path | None = typer.Option(None, "--key-file", "--key", help=_KEY_HELP),
    truncate_at: str | None = typer.Option(
        None,
        "--truncate-at",
        help="SEGMENT:OFFSET to cut there (later segments are moved aside).",
    ),
) -> None:
    """Repair a journal explicitly; every removed byte is kept in a .broken file."""
    from glove.journal import LOCK_NAME, JournalError, LockHeld, PosixStorage, repair

    storage = PosixStorage()
    try:
        where = _truncate_point(truncate_at) if truncate_at is not None else None
        _journal_dir(path)
        key = read_key_file(_key_path(key_file))
        lock_fd = storage.open_append(str(path / LOCK_NAME), create=False)
    except (OSError, ValueError) as exc:
        _say("repair", exc)
        raise typer.Exit(EXIT_JOURNAL_OTHER) from exc
    try:
        storage.lock(lock_fd)
        actions = repair(path, key, truncate_at=where, storage=storage)
    except LockHeld as exc:
        typer.echo(f"glove journal repair: {path} is open by a writer", err=True)
        raise typer.Exit(EXIT_JOURNAL_OTHER) from exc
    except (JournalError, OSError, ValueError) as exc:
        typer.echo(f"glove journal repair: {exc}", err=True)
        raise typer.Exit(EXIT_BY_ERROR.get(type(exc).__name__, EXIT_JOURNAL_OTHER)) from exc
    finally:
        storage.close(lock_fd)
    for line in actions or ["nothing to repair"]:
        typer.echo(line)
