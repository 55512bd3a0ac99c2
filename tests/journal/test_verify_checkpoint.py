"""``glove journal verify --checkpoint`` takes a receipt's ``SEQ:TAGHEX`` only as it was
printed: every other spelling of the same numbers is refused, never read as what it resembles."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from glove.cli import build_app
from glove.exits import EXIT_JOURNAL_OTHER, EXIT_OK
from glove.journal import JournalKind, open_journal, parse_checkpoint


def _respellings(seq: int, tag: str) -> dict[str, str]:
    arabic = "".join(chr(0x0660 + int(d)) for d in str(seq))
    fullwidth = "".join(chr(0xFF10 + int(d)) for d in str(seq))
    return {
        "leading zero": f"0{seq}:{tag}",
        "plus sign": f"+{seq}:{tag}",
        "leading space": f" {seq}:{tag}",
        "trailing newline": f"{seq}:{tag}\n",
        "underscore": f"{seq}_0:{tag}",
        "arabic-indic digits": f"{arabic}:{tag}",
        "fullwidth digits": f"{fullwidth}:{tag}",
        "upper-case hex": f"{seq}:{tag.upper()}",
        "spaced hex": f"{seq}:{tag[:2]} {tag[2:]}",
        "hex prefix": f"{seq}:0x{tag}",
        "short tag": f"{seq}:{tag[:-2]}",
        "long tag": f"{seq}:{tag}00",
        "two colons": f"{seq}::{tag}",
        "space after colon": f"{seq}: {tag}",
        "negative": f"-{seq}:{tag}",
        "empty": "",
    }


async def _receipt(tmp_path: Path) -> tuple[Path, Path, str]:
    jdir = tmp_path / "journal"
    key = bytes(range(32))
    journal = await open_journal(jdir, key, kind=JournalKind.SESSION)
    receipts = [await journal.append(f"record {i}".encode()) for i in range(12)]
    await journal.close()
    key_file = tmp_path / "key"
    key_file.write_text(key.hex())
    return jdir, key_file, receipts[10].checkpoint


async def test_only_the_printed_checkpoint_is_accepted(tmp_path: Path) -> None:
    """The receipt's own text verifies (exit 0); each respelling exits 4 with one line."""
    jdir, key_file, printed = await _receipt(tmp_path)
    seq, tag = printed.split(":")
    assert parse_checkpoint(printed) == (int(seq), bytes.fromhex(tag))
    base = ["journal", "verify", str(jdir), "--key-file", str(key_file), "--checkpoint"]
    result = CliRunner().invoke(build_app(), [*base, printed])
    assert result.exit_code == EXIT_OK, result.output
    for name, text in _respellings(int(seq), tag).items():
        with pytest.raises(ValueError, match="SEQ:TAGHEX"):
            parse_checkpoint(text)
        result = CliRunner().invoke(build_app(), [*base, text])
        assert result.exit_code == EXIT_JOURNAL_OTHER, (name, result.output)
        assert len(result.stderr.strip().splitlines()) == 1, (name, result.stderr)
