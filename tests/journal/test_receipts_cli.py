"""``glove receipts``: export, verify and consistency from the command line, every exit code."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from glove.cli import build_app
from glove.cli._receipts import default_receipts_journal
from glove.exits import (
    EXIT_OK,
    EXIT_RECEIPT_ENTRY,
    EXIT_RECEIPT_LOG,
    EXIT_RECEIPT_MALFORMED,
    EXIT_RECEIPT_NO_PROOF,
    EXIT_RECEIPT_NOT_FOUND,
    EXIT_RECEIPT_NOT_SEALED,
    EXIT_RECEIPT_PROOF,
    EXIT_RECEIPT_SIGNATURE,
    EXIT_RECEIPT_UNREADABLE,
)
from glove.journal import generate_signing_key, open_transparency_log
from tests.journal._tlog_helpers import receipt, rewrite_segment


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(build_app(), ["receipts", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def _fails(code: int, *args: str) -> str:
    got, out, err = _cli(*args)
    assert got == code, (got, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # one line naming the problem, never a traceback
    assert lines[0].startswith("glove receipts ")
    return lines[0]


class Setup:
    """A sealed receipts journal, its key files, and a scratch directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.journal = root / "receipts"
        self.key = root / "config" / "receipt-signing.key"
        self.pub = root / "log.pub"
        self.signing, _ = generate_signing_key(self.key, name="example.com/cli-log")
        self.pub.write_text(self.signing.verifier.text + "\n")
        other, _ = generate_signing_key(root / "other.key", name="example.com/cli-log")
        self.other_pub = root / "other.pub"
        self.other_pub.write_text(other.verifier.text + "\n")

    def path(self, name: str) -> str:
        return str(self.root / name)


@pytest.fixture
async def setup(tmp_path: Path, key: bytes) -> Setup:
    """A journal with sessions a (early, sealed at size 3) and b, c (sealed at the end)."""
    s = Setup(tmp_path)
    log = await open_transparency_log(s.journal, key, s.signing)
    for i in range(3):
        await log.append_receipt(receipt("a", i))
    await log.checkpoint()
    shutil.copy(s.journal / "checkpoint", s.root / "old.checkpoint")
    for i in range(3, 12):
        await log.append_receipt(receipt("b" if i % 2 else "c", i))
    await log.close()
    shutil.copy(s.journal / "checkpoint", s.root / "sealed.checkpoint")
    return s


async def test_public_key_export_verify(setup: Setup) -> None:
    """public-key prints the verifier key; an exported bundle verifies with it."""
    code, out, _ = _cli("public-key", "--key", str(setup.key))
    assert code == EXIT_OK
    assert out.strip() == setup.signing.verifier.text
    code, out, _ = _cli(
        "export",
        "b",
        "-o",
        setup.path("b.json"),
        "--journal",
        str(setup.journal),
        "--key",
        str(setup.key),
    )
    assert code == EXIT_OK, out
    code, out, _ = _cli("verify", setup.path("b.json"), "--public-key", str(setup.pub))
    assert code == EXIT_OK
    assert out.startswith("OK: the receipt of session b is entry 11 of log example.com/cli-log")
    code, out, _ = _cli("verify", setup.path("b.json"), "--public-key", str(setup.pub), "--json")
    report = json.loads(out)
    assert report["verified"] is True
    assert report["receipt"] == {"session_id": "b", "n": 11}
    assert (report["tree_size"], report["leaf_index"]) == (12, 11)


async def test_default_paths_follow_xdg(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --journal and --key, export uses the XDG state and config directories."""
    monkeypatch.setenv("XDG_STATE_HOME", str(setup.root / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(setup.root))
    (setup.root / "glove").mkdir()
    shutil.copytree(setup.journal, setup.root / "state" / "glove" / "receipts")
    shutil.copy(setup.key, setup.root / "glove" / "receipt-signing.key")
    assert default_receipts_journal() == setup.root / "state" / "glove" / "receipts"
    code, _, err = _cli("export", "c", "-o", setup.path("c.json"))
    assert code == EXIT_OK, err
    assert _cli("public-key")[1].strip() == setup.signing.verifier.text


async def test_verify_failures_have_their_exit_codes(setup: Setup) -> None:
    """Another key, a flipped byte, an edited receipt or proof, garbage, a missing file."""
    bundle = setup.root / "b.json"
    _cli("export", "b", "-o", str(bundle), "--journal", str(setup.journal), "--key", str(setup.key))
    assert "no signature" in _fails(
        EXIT_RECEIPT_SIGNATURE, "verify", str(bundle), "--public-key", str(setup.other_pub)
    )
    doc = json.loads(bundle.read_text())
    edited = setup.root / "edited.json"
    doc["receipt"]["n"] = 12
    edited.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    _fails(EXIT_RECEIPT_ENTRY, "verify", str(edited), "--public-key", str(setup.pub))
    doc = json.loads(bundle.read_text())
    doc["leaf_index"] = 3
    edited.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    _fails(EXIT_RECEIPT_PROOF, "verify", str(edited), "--public-key", str(setup.pub))
    edited.write_text("{not json")
    _fails(EXIT_RECEIPT_MALFORMED, "verify", str(edited), "--public-key", str(setup.pub))
    _fails(
        EXIT_RECEIPT_UNREADABLE,
        "verify",
        setup.path("missing.json"),
        "--public-key",
        str(setup.pub),
    )
    _fails(EXIT_RECEIPT_UNREADABLE, "verify", str(bundle), "--public-key", str(setup.key))
    code, out, _ = _cli("verify", str(edited), "--public-key", str(setup.pub), "--json")
    assert code == EXIT_RECEIPT_MALFORMED
    assert json.loads(out) == {
        "verified": False,
        "error": "BundleMalformed",
        "message": json.loads(out)["message"],
    }


async def test_export_failures_have_their_exit_codes(setup: Setup, key: bytes) -> None:
    """No such session, an unsealed receipt, a cut journal, an unsafe key."""
    common = ["--journal", str(setup.journal), "--key", str(setup.key)]
    _fails(EXIT_RECEIPT_NOT_FOUND, "export", "zzz", "-o", setup.path("z.json"), *common)
    log = await open_transparency_log(setup.journal, key, setup.signing)
    await log.append_receipt(receipt("late", 1))
    await log.close(seal=False)
    line = _fails(EXIT_RECEIPT_NOT_SEALED, "export", "late", "-o", setup.path("l.json"), *common)
    assert "not sealed" in line
    setup.key.chmod(0o644)
    _fails(EXIT_RECEIPT_UNREADABLE, "export", "b", "-o", setup.path("b.json"), *common)
    setup.key.chmod(0o600)
    rewrite_segment(setup.journal / "seg-00000000.glj", key, lambda rows: rows[:5])
    assert "tail was cut" in _fails(
        EXIT_RECEIPT_LOG, "export", "a", "-o", setup.path("a.json"), *common
    )
    assert not (setup.root / "a.json").exists()


async def test_consistency(setup: Setup, key: bytes) -> None:
    """NEW extends OLD by its embedded proof or the journal's; a cut or forked NEW fails."""
    old, sealed = setup.path("old.checkpoint"), setup.path("sealed.checkpoint")
    pub = ["--public-key", str(setup.pub)]
    assert _cli("consistency", old, sealed, *pub)[0] == EXIT_RECEIPT_NO_PROOF
    code, out, _ = _cli("consistency", old, sealed, *pub, "--journal", str(setup.journal))
    assert code == EXIT_OK, out
    assert "extends the tree of size 3" in out
    bundle = setup.path("b-since.json")
    code, _, err = _cli(
        "export",
        "b",
        "-o",
        bundle,
        "--since",
        old,
        "--journal",
        str(setup.journal),
        "--key",
        str(setup.key),
    )
    assert code == EXIT_OK, err
    code, out, _ = _cli("consistency", old, bundle, *pub, "--json")
    assert code == EXIT_OK
    assert json.loads(out)["proof"] == "the consistency proof NEW carries"
    assert _cli("verify", bundle, *pub)[0] == EXIT_OK
    assert _cli("consistency", sealed, sealed, *pub)[0] == EXIT_OK
    # The journal is cut back and continued, its checkpoint deleted: a fork.
    rewrite_segment(setup.journal / "seg-00000000.glj", key, lambda rows: rows[:6])
    (setup.journal / "checkpoint").unlink()
    log = await open_transparency_log(setup.journal, key, setup.signing)
    cut = await log.checkpoint()
    (setup.root / "cut.checkpoint").write_text(cut.note)
    for i in range(20):
        await log.append_receipt(receipt("fork", i))
    await log.close()
    shutil.copy(setup.journal / "checkpoint", setup.root / "fork.checkpoint")
    assert "fewer" in _fails(
        EXIT_RECEIPT_PROOF, "consistency", sealed, setup.path("cut.checkpoint"), *pub
    )
    _fails(EXIT_RECEIPT_NO_PROOF, "consistency", sealed, setup.path("fork.checkpoint"), *pub)
    assert "no root" in _fails(
        EXIT_RECEIPT_LOG,
        "consistency",
        sealed,
        setup.path("fork.checkpoint"),
        *pub,
        "--journal",
        str(setup.journal),
    )
    _fails(
        EXIT_RECEIPT_LOG,
        "export",
        "fork",
        "-o",
        setup.path("f.json"),
        "--since",
        sealed,
        "--journal",
        str(setup.journal),
        "--key",
        str(setup.key),
    )
    _fails(EXIT_RECEIPT_SIGNATURE, "consistency", old, sealed, "--public-key", str(setup.other_pub))


async def test_real_process_exit_codes_and_no_traceback(setup: Setup) -> None:
    """Run as a real process: a bad bundle gets its exit code and one stderr line."""
    bad = setup.root / "bad.json"
    bad.write_bytes(b"\x00\xff" * 10)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "glove",
            "receipts",
            "verify",
            str(bad),
            "--public-key",
            str(setup.pub),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == EXIT_RECEIPT_MALFORMED
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1


async def test_a_made_up_witness_line_is_refused_by_every_command(setup: Setup) -> None:
    """consistency and export --since read checkpoint files by the same exact rule as
    verify: one more signature line, any name and an all-zero signature, exits 1."""
    old, sealed = setup.path("old.checkpoint"), setup.path("sealed.checkpoint")
    forged = setup.root / "forged.checkpoint"
    line = "\u2014 witness.example/w1 " + base64.b64encode(bytes(68)).decode() + "\n"
    forged.write_text(Path(old).read_text() + line)
    pub = ["--public-key", str(setup.pub)]
    journal = ["--journal", str(setup.journal)]
    assert _cli("consistency", old, sealed, *pub, *journal)[0] == EXIT_OK
    assert "witness.example/w1" in _fails(
        EXIT_RECEIPT_SIGNATURE, "consistency", str(forged), sealed, *pub, *journal
    )
    args = ["export", "b", "-o", setup.path("b.json"), *journal, "--key", str(setup.key)]
    _fails(EXIT_RECEIPT_SIGNATURE, *args, "--since", str(forged))
    assert not (setup.root / "b.json").exists()
    witness = setup.root / "witness.pub"
    witness.write_text(setup.signing.verifier.text + "\n")  # a log's key is not a witness's
    assert "0x01" in _fails(
        EXIT_RECEIPT_UNREADABLE, *args, "--since", old, "--witness", str(witness)
    )
