"""A receipt bundle verifies only as it was exported: every line and field of the checkpoint
and of the JSON, appended, removed, duplicated, reordered or re-encoded, is refused, with the
log's key and with witnesses named; and bundles exported by earlier code still verify."""

from __future__ import annotations

import asyncio
import base64
import collections
import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from glove.cli import build_app
from glove.exits import EXIT_OK, EXIT_RECEIPT_SIGNATURE
from glove.journal import (
    NoteError,
    ReceiptError,
    SignatureInvalid,
    SigningKey,
    UnverifiedSignature,
    WitnessKey,
    WitnessSigningKey,
    add_cosignature,
    decode_bundle,
    encode_bundle,
    open_checkpoint,
    parse_verifier_key,
    verify_bundle,
)
from glove.journal._keys import key_hash
from tests.conftest import Unpriv
from tests.journal._mutate import DASH, byte_mutants, json_mutants, note_mutants
from tests.vectors.receipts import generate

VECTORS = generate.HERE
VERIFIER = parse_verifier_key((VECTORS / "v1-log.pub").read_text())
ALPHA = WitnessSigningKey("alpha.example/witness", bytes(range(40, 72)))
BETA = WitnessSigningKey("beta.example/witness", bytes(range(80, 112)))
STRANGER = WitnessSigningKey("stranger.example/witness", bytes(range(120, 152)))
IMPOSTOR = SigningKey(VERIFIER.name, bytes(range(160, 192)))  # the log's name, another key
COSIGNED_AT = (1_790_000_000, 1_790_000_005)


def _line(name: str, blob: bytes) -> str:
    return f"{DASH} {name} {base64.b64encode(blob).decode()}"


def _extra_lines(note: str) -> dict[str, str]:
    """Signature lines an attacker can add: zero signatures of any name and of the log's
    name and key hash, real signatures of other keys, a real cosignature of a stranger."""
    text = note.split("\n\n", 1)[0] + "\n"
    own_hash = VERIFIER.key_hash.to_bytes(4, "big")
    wrong_hash = key_hash(VERIFIER.name, bytes(32)).to_bytes(4, "big")
    return {
        "zero signature, any name": _line("witness.example/w1", bytes(68)),
        "zero cosignature, any name": _line("witness.example/w1", bytes(76)),
        "zero signature, the log's name and hash": _line(VERIFIER.name, own_hash + bytes(64)),
        "the log's name, another hash": _line(VERIFIER.name, wrong_hash + bytes(64)),
        "real signature of another key of the log's name": _line(
            IMPOSTOR.name, IMPOSTOR.key_hash.to_bytes(4, "big") + IMPOSTOR.sign(text.encode())
        ),
        "real cosignature of a witness not named": add_cosignature(note, STRANGER, 7)
        .split("\n\n", 1)[1]
        .splitlines()[-1],
        "a witness's line with the log's signature bytes": _line(
            ALPHA.name,
            ALPHA.witness.key_hash.to_bytes(4, "big")
            + bytes(8)
            + base64.b64decode(note.split("\n\n", 1)[1].splitlines()[0].split(" ")[2])[4:],
        ),
        "an unknown signature type": _line("other.example/log", bytes([0x05]) * 90),
    }


def _leaf_forgeries(leaf: bytes) -> Iterator[tuple[str, bytes]]:
    """The same receipt, other bytes: what a forger who re-encodes the entry would write."""
    value = json.loads(leaf)
    yield "compact", json.dumps(value, separators=(",", ":")).encode()
    yield "key order", json.dumps(dict(reversed(list(value.items())))).encode()
    yield "ASCII escapes", json.dumps(value, ensure_ascii=True).encode()
    yield "non-ASCII raw", json.dumps(value, ensure_ascii=False).encode()
    yield "trailing newline", leaf + b"\n"
    yield "leading space", b" " + leaf
    yield "exponent", leaf.replace(b"1.5e-07", b"1.5e-7")
    yield "pretty", json.dumps(value, indent=2).encode()


def _mutants(data: bytes) -> Iterator[tuple[str, str, bytes]]:
    bundle = decode_bundle(data)
    extra = _extra_lines(bundle.checkpoint)
    for cls, name, note in note_mutants(bundle.checkpoint, extra):
        # A careful forger: the bundle re-encoded canonically around the edited checkpoint.
        forged = encode_bundle(type(bundle)(**{**_fields(bundle), "checkpoint": note}))
        yield "checkpoint " + cls, name, forged
    yield from json_mutants(
        data, leaf_forgeries=lambda leaf: (x for x in _leaf_forgeries(leaf) if x[1] != leaf)
    )
    yield from byte_mutants(data)


def _fields(bundle: object) -> dict[str, object]:
    return {name: getattr(bundle, name) for name in bundle.__slots__}  # type: ignore[attr-defined]


def _cosigned(data: bytes) -> bytes:
    """The bundle with its checkpoint cosigned by ALPHA and BETA (what a witnessed export
    would hold)."""
    bundle = decode_bundle(data)
    note = add_cosignature(bundle.checkpoint, BETA, COSIGNED_AT[1])
    note = add_cosignature(note, ALPHA, COSIGNED_AT[0])
    return encode_bundle(type(bundle)(**{**_fields(bundle), "checkpoint": note}))


def _survivors(
    data: bytes, witnesses: list[WitnessKey]
) -> tuple[list[tuple[str, str]], collections.Counter[str]]:
    survivors = []
    classes: collections.Counter[str] = collections.Counter()
    # Dropping the optional consistency proof gives exactly the bundle exported without
    # --since: another export of the same receipt, which makes one claim less, not more.
    bundle = decode_bundle(data)
    exported = {encode_bundle(dataclasses.replace(bundle, consistency=None))} - {data}
    for cls, name, mutant in _mutants(data):
        assert mutant != data, (cls, name)  # every mutant really changes the bundle
        classes[cls] += 1
        if mutant in exported:
            assert (cls, name) == ("field removed", "bundle: consistency")
            classes["another export"] += 1
            continue
        try:
            verify_bundle(mutant, VERIFIER, witnesses=witnesses)
        except ReceiptError as exc:
            if not str(exc):
                survivors.append((cls, f"{name}: refused without a reason"))
            continue
        survivors.append((cls, name))
    return survivors, classes


WANTED_CLASSES = {
    "checkpoint line removed",
    "checkpoint line duplicated",
    "checkpoint line moved",
    "checkpoint lines swapped",
    "checkpoint signature added",
    "checkpoint signature replaced",
    "checkpoint line re-encoded",
    "checkpoint dash look-alike",
    "checkpoint space re-encoded",
    "checkpoint name look-alike",
    "checkpoint signature re-encoded",
    "checkpoint signature bytes",
    "checkpoint size re-encoded",
    "checkpoint root re-encoded",
    "checkpoint origin look-alike",
    "checkpoint note re-encoded",
    "key order",
    "extra field",
    "field removed",
    "field value",
    "receipt key order",
    "receipt extra field",
    "receipt field removed",
    "receipt field value",
    "consistency key order",
    "consistency extra field",
    "duplicate key",
    "hash re-encoded",
    "proof hash",
    "leaf re-encoded",
    "leaf forged",
    "number re-encoded",
    "string re-encoded",
    "layout",
    "byte deleted",
    "byte inserted",
}


@pytest.mark.parametrize("name", ["v1-s1-since.json", "v1-first-since.json", "v1-s0.json"])
def test_no_mutant_of_an_exported_bundle_verifies(name: str) -> None:
    """Thousands of mutants of every line and field of an exported bundle: none verifies,
    each is refused with a reason, and the original still verifies."""
    data = (VECTORS / name).read_bytes()
    verify_bundle(data, VERIFIER)
    survivors, classes = _survivors(data, [])
    assert survivors == [], f"{len(survivors)} mutants verified, e.g. {survivors[:5]}"
    consistency = {"consistency key order", "consistency extra field"}
    wanted = WANTED_CLASSES if "since" in name else WANTED_CLASSES - consistency
    assert wanted <= set(classes), wanted - set(classes)
    assert classes["another export"] == (1 if "since" in name else 0)
    assert sum(classes.values()) > 3000


def test_no_mutant_of_a_cosigned_bundle_verifies_with_its_witnesses() -> None:
    """The same for a bundle whose checkpoint two witnesses cosigned, verified with both
    witnesses named: every line of the signature block, cosignatures included."""
    data = _cosigned((VECTORS / "v1-s1-since.json").read_bytes())
    witnesses = [ALPHA.witness, BETA.witness]
    verified = verify_bundle(data, VERIFIER, witnesses=witnesses)
    assert [c.timestamp for c in verified.checkpoint.cosignatures] == list(COSIGNED_AT)
    survivors, classes = _survivors(data, witnesses)
    assert survivors == [], f"{len(survivors)} mutants verified, e.g. {survivors[:5]}"
    moved = classes["checkpoint line moved"] + classes["checkpoint lines swapped"]
    assert moved >= 42  # 7 lines: each one to every other place


def test_the_witnesses_named_must_be_exactly_the_cosigners() -> None:
    """A cosigned bundle fails with no, fewer or more witnesses named; a plain one fails
    when any witness is named."""
    plain = (VECTORS / "v1-s1-since.json").read_bytes()
    cosigned = _cosigned(plain)
    gamma = STRANGER.witness
    with pytest.raises(UnverifiedSignature, match=r"line 2 \(alpha"):
        verify_bundle(cosigned, VERIFIER)
    with pytest.raises(UnverifiedSignature, match=r"line 3 \(beta"):
        verify_bundle(cosigned, VERIFIER, witnesses=[ALPHA.witness])
    with pytest.raises(SignatureInvalid, match="no cosignature of witness stranger"):
        verify_bundle(cosigned, VERIFIER, witnesses=[ALPHA.witness, BETA.witness, gamma])
    with pytest.raises(SignatureInvalid, match="no cosignature of witness alpha"):
        verify_bundle(plain, VERIFIER, witnesses=[ALPHA.witness])
    verify_bundle(cosigned, VERIFIER, witnesses=[BETA.witness, ALPHA.witness])


def test_the_reported_attack_is_refused_by_name() -> None:
    """The issue's reproduction: one more line, any key name, an all-zero signature."""
    data = (VECTORS / "v1-s1.json").read_bytes()
    bundle = decode_bundle(data)
    forged_note = bundle.checkpoint + _line("witness.example/w1", bytes(68)) + "\n"
    forged = encode_bundle(type(bundle)(**{**_fields(bundle), "checkpoint": forged_note}))
    with pytest.raises(UnverifiedSignature, match=r"signature line 2 \(witness.example/w1 "):
        verify_bundle(forged, VERIFIER)


@pytest.mark.parametrize("path", sorted(VECTORS.glob("v1-*.json")), ids=lambda p: p.name)
def test_bundles_exported_by_earlier_code_still_verify(path: Path) -> None:
    """Every bundle the code as of ac7a72f exported verifies today, by the library and
    by the command."""
    verified = verify_bundle(path.read_bytes(), VERIFIER)
    assert verified.session_id == path.stem.removeprefix("v1-").removesuffix("-since")
    result = CliRunner().invoke(
        build_app(),
        ["receipts", "verify", str(path), "--public-key", str(VECTORS / "v1-log.pub")],
    )
    assert result.exit_code == EXIT_OK, result.output


def test_a_library_file_is_none_of_an_earlier_bundles_projections(tmp_path: Path) -> None:
    """An earlier bundle (no projections) still verifies; given a --library file it cannot
    hold, the command says so and exits 4 (the entry does not match)."""
    path = VECTORS / "v1-s0.json"
    other = tmp_path / "skill.md"
    other.write_bytes(b"# not projected\n")
    args = ["receipts", "verify", str(path), "--public-key", str(VECTORS / "v1-log.pub")]
    assert CliRunner().invoke(build_app(), args).exit_code == EXIT_OK
    result = CliRunner().invoke(build_app(), [*args, "--library", str(other)])
    assert result.exit_code == 4, result.output
    assert "is not a projection of this receipt (0 listed)" in result.output


def test_todays_export_is_byte_for_byte_the_committed_one() -> None:
    """Exporting the vectors' log again gives exactly the committed files, so the bundle
    format has not changed under anyone holding one."""
    with tempfile.TemporaryDirectory() as scratch:
        files = asyncio.run(generate.export_all(Path(scratch)))
    for name, data in files.items():
        assert (VECTORS / name).read_bytes() == data, name


def test_stored_and_held_checkpoints_are_held_to_the_same_rule() -> None:
    """A checkpoint file (what consistency reads, what the log stores) with one more line
    is refused like the bundle's."""
    note = (VECTORS / "v1-old.checkpoint").read_text()
    assert open_checkpoint(note, VERIFIER).size == 1
    refused = 0
    for _cls, _name, mutant in note_mutants(note, _extra_lines(note)):
        with pytest.raises(ReceiptError):
            open_checkpoint(mutant, VERIFIER)
        refused += 1
    assert refused > 200
    with pytest.raises(NoteError):
        open_checkpoint(note + note.split("\n\n", 1)[1], VERIFIER)  # the log's line twice


@pytest.mark.parametrize("who", ["root", "unpriv"])
def test_the_command_refuses_the_forged_witness_line_as_each_user(who: str, unpriv: Unpriv) -> None:
    """``glove receipts verify`` as a real process, as root and as the test user: the
    exported bundle exits 0, the one with a made-up witness line exits 1 with one line
    naming it, and a bundle cosigned by named witnesses exits 0 and says who cosigned."""
    with tempfile.TemporaryDirectory(prefix="glove-verify-") as scratch:
        Path(scratch).chmod(0o755)  # the test user reads the files, writes nothing
        _run_verify_as(who, unpriv, Path(scratch))


def _run_verify_as(who: str, unpriv: Unpriv, tmp_path: Path) -> None:
    data = (VECTORS / "v1-s1.json").read_bytes()
    bundle = decode_bundle(data)
    note = bundle.checkpoint + _line("witness.example/w1", bytes(68)) + "\n"
    files = {
        "exported.json": data,
        "forged.json": encode_bundle(type(bundle)(**{**_fields(bundle), "checkpoint": note})),
        "cosigned.json": _cosigned(data),
        "log.pub": (VECTORS / "v1-log.pub").read_bytes(),
        "alpha.pub": (ALPHA.witness.text + "\n").encode(),
        "beta.pub": (BETA.witness.text + "\n").encode(),
    }
    for file_name, content in files.items():
        (tmp_path / file_name).write_bytes(content)
        (tmp_path / file_name).chmod(0o644)
    prefix = unpriv.command() if who == "unpriv" else []
    python = unpriv.python if who == "unpriv" else sys.executable

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [*prefix, python, "-m", "glove", "receipts", "verify", *args]
        argv += ["--public-key", str(tmp_path / "log.pub")]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)

    ok = run(str(tmp_path / "exported.json"))
    assert ok.returncode == EXIT_OK, ok.stderr
    forged = run(str(tmp_path / "forged.json"))
    assert forged.returncode == EXIT_RECEIPT_SIGNATURE
    assert forged.stderr.count("\n") == 1
    assert "Traceback" not in forged.stderr
    assert "signature line 2 (witness.example/w1 00000000)" in forged.stderr
    witnessed = ["--witness", str(tmp_path / "alpha.pub"), "--witness", str(tmp_path / "beta.pub")]
    cosigned = run(str(tmp_path / "cosigned.json"), *witnessed, "--json")
    assert cosigned.returncode == EXIT_OK, cosigned.stderr
    report = json.loads(cosigned.stdout)
    assert [c["witness"] for c in report["cosigned_by"]] == [ALPHA.name, BETA.name]
    assert run(str(tmp_path / "cosigned.json")).returncode == EXIT_RECEIPT_SIGNATURE
