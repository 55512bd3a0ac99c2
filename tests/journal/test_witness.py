"""Witness cosignatures (C2SP tlog-cosignature): a real witness's line verifies, and a note
is accepted only with exactly the log's signature and one cosignature per witness named."""

from __future__ import annotations

import base64

import pytest

from glove.journal import (
    Checkpoint,
    NoteError,
    SignatureInvalid,
    SigningKey,
    SigningKeyError,
    UnverifiedSignature,
    WitnessSigningKey,
    add_cosignature,
    open_checkpoint,
    parse_verifier_key,
    parse_witness_key,
    sign_checkpoint,
    verify_note,
)
from glove.journal._witness import MAX_COSIGNATURE_TIME, cosignature_message

# A checkpoint of the staging CT log arche2025h1.staging.ct.transparency.dev (1,432,088,532
# entries) as served with its cosignatures, and the published keys of the log (Ed25519, type
# 0x01) and of the witness remora.n621.de (type 0x04; also in transparency-dev/formats'
# note/note_cosigv1_test.go). Neither was made by Glove: the key ID and the signed message
# of a cosignature are checked against a witness that runs in the world.
REAL_TEXT = (
    "arche2025h1.staging.ct.transparency.dev\n1432088532\n"
    "U7WM79jrzyhGZ5/GUBTpM7NzwdyfFx61t3RovgcC4Ro=\n"
)
REAL_LINES = {
    "sth": "\u2014 arche2025h1.staging.ct.transparency.dev zTM8sQAAAZ5W0WdjBAMARjBEAiBjW5IQf9pvsYLf"
    "QFX6hoGREPMHbdQ3urbllzalApkptQIgIpwtEroeW2BXaHAI4kJXFbon5Ch9MNL5zRNZ55lvGt0=",
    "log": "\u2014 arche2025h1.staging.ct.transparency.dev ui8GwCF1+kWqZrxGdhj4aX3gcw7XUlXQQabg/27l"
    "efwhUkzbC3NygNI75MdhL1bfTW9g8Ei59RA23oHP7Ry1k3ZFWwQ=",
    "garden": "\u2014 transparency.dev/DEV:witness-little-garden 2AQqhwAAAABqEiEgzgFIqqhbUoDwjMWE6"
    "UP8nd8/KYTzwZ2rhIgcqoXHAwVkjZr4AscylP3v7sEodkRAErumC2q44vdgJY096st5BQ==",
    "smartit": "\u2014 witness1.smartit.nu/witness1 pIyCDwAAAABqEiEghIp82KWebrw7/oHQwlTAm3g2RKS4"
    "+eebl8eO0WH+/iEcxZ75W3u5hNI7TOQtmJbqmNWVuE0tgh0XwzdZsDsUAQ==",
    "remora": "\u2014 remora.n621.de 2net5wAAAABqEiEgPlfF3V06o0Y+fHM+J5J9s27wgxxcOVSpZ/2g/KSiXCg9"
    "DEZI+aVCIobWX9sXTynk5XeU/zZ0WBxtqB0DrAWfBw==",
}
REAL_LOG_KEY = (
    "arche2025h1.staging.ct.transparency.dev+ba2f06c0+AU0vHmlGCS/PdN8b2OaGmKprLI8HKM+dJ472xgFYh15f"
)
REAL_WITNESS_KEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
REAL_COSIGNED_AT = 1_779_573_024

LOG = SigningKey("example.com/log", bytes(range(32)))
ALPHA = WitnessSigningKey("alpha.example/w", bytes(range(40, 72)))
BETA = WitnessSigningKey("beta.example/w", bytes(range(80, 112)))


def _note(*names: str) -> str:
    return REAL_TEXT + "\n" + "".join(REAL_LINES[name] + "\n" for name in names)


def test_a_real_witness_cosignature_of_a_real_log_verifies() -> None:
    """The log's Ed25519 line and remora's cosignature verify; the timestamp is read."""
    log, witness = parse_verifier_key(REAL_LOG_KEY), parse_witness_key(REAL_WITNESS_KEY)
    assert witness.text == REAL_WITNESS_KEY  # the key ID Glove computes is the published one
    opened = verify_note(_note("log", "remora"), log, witnesses=[witness])
    assert opened.text == REAL_TEXT
    assert [(c.witness.name, c.timestamp) for c in opened.cosignatures] == [
        ("remora.n621.de", REAL_COSIGNED_AT)
    ]
    clobbered = REAL_TEXT.replace("1432088532", "42")
    blob = base64.b64decode(REAL_LINES["remora"].split(" ")[2])[4:]
    assert witness.open(REAL_TEXT, blob) == REAL_COSIGNED_AT
    assert witness.open(clobbered, blob) is None
    with pytest.raises(SignatureInvalid, match="does not verify"):
        verify_note(_note("log", "remora").replace("1432088532", "42"), log, witnesses=[witness])


def test_the_real_checkpoint_as_served_is_refused_without_every_key() -> None:
    """Served with an RFC 6962 signature and three more witnesses, the note is refused: the
    first line of a key not given is named, never skipped."""
    log, witness = parse_verifier_key(REAL_LOG_KEY), parse_witness_key(REAL_WITNESS_KEY)
    served = _note("sth", "log", "garden", "smartit", "remora")
    with pytest.raises(UnverifiedSignature, match=r"signature line 1 \(arche2025h1"):
        verify_note(served, log, witnesses=[witness])
    with pytest.raises(UnverifiedSignature, match=r"line 2 \(remora"):
        verify_note(_note("log", "remora"), log)  # remora not named: its line is refused


def test_witness_keys_round_trip_and_are_not_log_keys() -> None:
    """A witness vkey (type 0x04) parses back; a log key is refused as a witness and a
    witness key as a log's, each saying which option it belongs to."""
    assert parse_witness_key(ALPHA.witness.text) == ALPHA.witness
    with pytest.raises(SigningKeyError, match="0x01"):
        parse_witness_key(LOG.verifier.text)
    with pytest.raises(SigningKeyError, match="witness"):
        parse_verifier_key(ALPHA.witness.text)
    name, _, data = ALPHA.witness.text.split("+", 2)
    with pytest.raises(SigningKeyError, match="key ID"):
        parse_witness_key(f"{name}+00000000+{data}")
    with pytest.raises(SigningKeyError, match="private"):
        parse_witness_key("PRIVATE+KEY+" + ALPHA.witness.text)


def test_the_signed_message_is_the_c2sp_layout() -> None:
    """A cosignature signs the header line, the time line and the whole note text."""
    text = "example.com/log\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
    assert cosignature_message(text, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\n" + text.encode()
    )
    for bad in (-1, MAX_COSIGNATURE_TIME + 1):
        with pytest.raises(SigningKeyError):
            cosignature_message(text, bad)


def _signed() -> str:
    return sign_checkpoint(Checkpoint(LOG.name, 7, bytes(range(32))), LOG).note


def test_cosignatures_go_after_the_log_sorted_and_verify_in_any_argument_order() -> None:
    """Cosigning in either order gives one note; naming the witnesses in either order
    verifies it; the cosignatures are reported in the note's order."""
    one = add_cosignature(add_cosignature(_signed(), BETA, 20), ALPHA, 10)
    two = add_cosignature(add_cosignature(_signed(), ALPHA, 10), BETA, 20)
    assert one == two
    lines = one.split("\n\n", 1)[1].splitlines()
    assert [line.split(" ")[1] for line in lines] == [LOG.name, ALPHA.name, BETA.name]
    for witnesses in ([ALPHA.witness, BETA.witness], [BETA.witness, ALPHA.witness]):
        signed = open_checkpoint(one, LOG.verifier, witnesses=witnesses)
        assert [(c.witness.name, c.timestamp) for c in signed.cosignatures] == [
            (ALPHA.name, 10),
            (BETA.name, 20),
        ]
    with pytest.raises(NoteError, match="already cosigned"):
        add_cosignature(one, ALPHA, 11)


def test_a_cosigned_note_is_refused_unless_its_lines_are_exactly_the_keys_given() -> None:
    """Missing, unnamed, swapped, moved before the log, replayed or re-timed cosignatures
    are each refused with their reason."""
    note = add_cosignature(add_cosignature(_signed(), ALPHA, 10), BETA, 20)
    text, block = note.split("\n\n", 1)
    log_line, alpha_line, beta_line = block.splitlines()
    both = [ALPHA.witness, BETA.witness]
    with pytest.raises(UnverifiedSignature, match="beta"):
        open_checkpoint(note, LOG.verifier, witnesses=[ALPHA.witness])
    with pytest.raises(SignatureInvalid, match="no cosignature of witness beta"):
        open_checkpoint(add_cosignature(_signed(), ALPHA, 10), LOG.verifier, witnesses=both)
    swapped = f"{text}\n\n{log_line}\n{beta_line}\n{alpha_line}\n"
    with pytest.raises(NoteError, match="sorted"):
        open_checkpoint(swapped, LOG.verifier, witnesses=both)
    first = f"{text}\n\n{alpha_line}\n{log_line}\n{beta_line}\n"
    with pytest.raises(NoteError, match="first"):
        open_checkpoint(first, LOG.verifier, witnesses=both)
    other = sign_checkpoint(Checkpoint(LOG.name, 8, bytes(32)), LOG).note
    replayed = add_cosignature(other, ALPHA, 10).split("\n\n", 1)[1].splitlines()[1]
    with pytest.raises(SignatureInvalid, match="cosignature of witness alpha"):
        open_checkpoint(f"{text}\n\n{log_line}\n{replayed}\n", LOG.verifier, witnesses=both[:1])
    retimed = add_cosignature(_signed(), ALPHA, 11).split("\n\n", 1)[1].splitlines()[1]
    assert retimed != alpha_line
    forged = alpha_line[: len("\u2014 alpha.example/w ")] + retimed.split(" ")[2][:16]
    forged += alpha_line.split(" ")[2][16:]  # the time of one signature, the bytes of another
    with pytest.raises(SignatureInvalid):
        open_checkpoint(f"{text}\n\n{log_line}\n{forged}\n", LOG.verifier, witnesses=both[:1])


def test_two_keys_of_one_identity_are_refused() -> None:
    """Two witnesses given with the same name and key ID cannot be told apart: refused."""
    with pytest.raises(SigningKeyError, match="share the name"):
        open_checkpoint(_signed(), LOG.verifier, witnesses=[ALPHA.witness, ALPHA.witness])
