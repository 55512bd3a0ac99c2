"""The committed must-fail vectors: byte-stable, and caught by verify and by the CLI."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from glove.cli import build_app
from glove.cli._journal import EXIT_BY_ERROR
from glove.exits import EXIT_JOURNAL_OTHER
from glove.journal import parse_checkpoint, verify
from tests.vectors.journal.generate import HERE, build_vectors, render

VECTOR_FILES = sorted(HERE.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _materialize(vector: dict[str, Any], root: Path) -> Path:
    jdir = root / vector["name"]
    jdir.mkdir()
    for name, content in vector["files"].items():
        (jdir / name).write_bytes(base64.b64decode(content))
    return jdir


def test_vectors_are_byte_stable() -> None:
    """The committed vector files are exactly what the generator produces."""
    built = build_vectors()
    assert sorted(built) == sorted(p.stem for p in VECTOR_FILES)
    for path in VECTOR_FILES:
        assert path.read_text() == render(built[path.stem]), path.name


def test_there_are_must_fail_vectors_of_every_class() -> None:
    """The set covers reorder, replay, delete, splice, re-emit, truncation and damage."""
    wanted = {_load(p)["wantErr"] for p in VECTOR_FILES}
    assert {None, "JournalTampered", "JournalCorrupt", "JournalTruncated"} <= wanted
    names = {p.stem for p in VECTOR_FILES}
    for probe in (
        "reorder",
        "replay",
        "delete-middle",
        "splice-foreign-record",
        "reemit-old-segment",
    ):
        assert probe in names


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_verify_classifies_vector(tmp_path: Path, path: Path) -> None:
    """verify() reports the vector's expected error class, sequence, offset and segment."""
    vector = _load(path)
    jdir = _materialize(vector, tmp_path)
    checkpoint = parse_checkpoint(vector["checkpoint"]) if vector["checkpoint"] else None
    report = verify(jdir, bytes.fromhex(vector["key"]), checkpoint)
    assert report.ok == (vector["wantErr"] is None), report
    assert report.error == vector["wantErr"], report
    if vector["wantSeq"] is not None:
        assert report.seq == vector["wantSeq"], report
    if vector["wantOffset"] is not None:
        assert report.offset == vector["wantOffset"], report
    if vector["wantSegment"] is not None:
        assert report.segment == vector["wantSegment"], report


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_cli_verify_agrees_on_vector(tmp_path: Path, path: Path) -> None:
    """``glove journal verify --json`` exits by the vector's class and reports the same error."""
    vector = _load(path)
    jdir = _materialize(vector, tmp_path)
    key_file = tmp_path / "key"
    key_file.write_text(vector["key"])
    args = ["journal", "verify", str(jdir), "--key-file", str(key_file), "--json"]
    if vector["checkpoint"]:
        args += ["--checkpoint", vector["checkpoint"]]
    result = CliRunner().invoke(build_app(), args)
    want = vector["wantErr"]
    assert result.exit_code == (0 if want is None else EXIT_BY_ERROR.get(want, EXIT_JOURNAL_OTHER))
    assert json.loads(result.stdout)["error"] == want
