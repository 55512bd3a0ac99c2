"""Signed notes and checkpoints: the C2SP formats byte for byte, and every way they fail."""

from __future__ import annotations

import base64

import pytest

from glove.journal import (
    EMPTY_ROOT,
    Checkpoint,
    NoteError,
    SignatureInvalid,
    SigningKey,
    UnverifiedSignature,
    open_checkpoint,
    open_note,
    parse_signing_key,
    parse_verifier_key,
    sign_checkpoint,
    sign_note,
)
from glove.journal._checkpoint import parse_checkpoint_text
from glove.journal._note import parse_note

GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT + "\n"
    "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqd"
    "ngotpRZb6KE6RyyBwJnAM=\n"
)
KEY = SigningKey("example.com/log", bytes(range(32)))
OTHER = SigningKey("example.com/log", bytes(range(1, 33)))


def test_go_example_note_is_signed_byte_for_byte() -> None:
    """Signing Go's example text with Go's example key gives Go's published note exactly."""
    assert sign_note(GO_TEXT, parse_signing_key(GO_SKEY)) == GO_NOTE
    assert open_note(GO_NOTE, parse_verifier_key(GO_VKEY)) == GO_TEXT
    assert open_note(GO_NOTE.encode(), parse_verifier_key(GO_VKEY)) == GO_TEXT


def test_a_note_verifies_only_with_exactly_its_signers() -> None:
    """A line of any key not given (a witness, a key of our name with another hash) is
    refused, never ignored; a note without our key's line says so and names what it holds."""
    witness = SigningKey("witness.example/w1", bytes(32))
    ours = sign_note("hello\n", KEY)
    theirs = sign_note("hello\n", witness)
    both = ours + theirs.split("\n\n", 1)[1]
    assert open_note(ours, KEY.verifier) == "hello\n"
    with pytest.raises(UnverifiedSignature, match=r"signature line 2 \(witness\.example/w1"):
        open_note(both, KEY.verifier)
    with pytest.raises(UnverifiedSignature, match=r"signature line 1 \(example\.com/log"):
        open_note(both, witness.verifier)  # the log's line is the unknown one now
    with pytest.raises(SignatureInvalid, match=r"no signature of key example\.com/log"):
        open_note(theirs, KEY.verifier)
    # Same name, other key (other hash): not ours, so refused, naming both hashes.
    with pytest.raises(SignatureInvalid, match=f"{KEY.key_hash:08x}.*{OTHER.key_hash:08x}"):
        open_note(sign_note("hello\n", OTHER), KEY.verifier)
    with pytest.raises(UnverifiedSignature, match=r"line 1 \(example\.com/log"):
        open_note(sign_note("hello\n", OTHER) + ours.split("\n\n", 1)[1], KEY.verifier)
    with pytest.raises(NoteError, match="repeats"):
        open_note(ours + ours.split("\n\n", 1)[1], KEY.verifier)


def test_a_failing_known_signature_rejects_the_note() -> None:
    """A signature whose name and hash are ours but whose bytes fail rejects the whole note."""
    note = sign_note("hello\n", KEY)
    forged = note.replace("hello", "hellp")
    with pytest.raises(SignatureInvalid, match="does not verify"):
        open_note(forged, KEY.verifier)


@pytest.mark.parametrize(
    "data",
    [
        "hello\n",  # no signature block
        "hello\n\n",  # empty signature block
        "hello\n\n\u2014 example.com/log AAAA\n",  # signature too short
        "hello\n\n- example.com/log AAAAAAAA\n",  # not an em dash
        "hello\n\n\u2014 example.com/log\n",  # no signature
        "hello\n\n\u2014 example.com/log AAAAAAB=\n",  # not canonical base64 (padding bits)
        "hello\n\n\u2014 example.com/log AAAAAA==\n",  # 4 bytes: a key hash and nothing
        "hello\n\n\u2014 example.com/log AAAAAAAA",  # no final newline
        "hel\tlo\n\n\u2014 example.com/log AAAAAAAA\n",  # control character
        "hello\n\n\u2014 ex+ample AAAAAAAA\n",  # bad key name
    ],
)
def test_malformed_notes_are_refused(data: str) -> None:
    """Every malformed note is a NoteError, never anything else."""
    with pytest.raises(NoteError):
        parse_note(data)


def test_non_utf8_and_oversized_notes_are_refused() -> None:
    """Bytes that are not UTF-8, and notes over the size cap, are refused before parsing."""
    with pytest.raises(NoteError, match="UTF-8"):
        parse_note(b"\xff\n\n\xe2\x80\x94 a AAAAAAAA\n")
    with pytest.raises(NoteError, match="at most"):
        parse_note("a" * 70000 + "\n\n\u2014 a AAAAAAAA\n")


def test_checkpoint_text_is_the_c2sp_layout() -> None:
    """A checkpoint's text is origin, decimal size and base64 root, one per line."""
    root = bytes(range(32))
    checkpoint = Checkpoint("example.com/log", 20852163, root)
    assert checkpoint.text == f"example.com/log\n20852163\n{base64.b64encode(root).decode()}\n"
    signed = sign_checkpoint(checkpoint, KEY)
    assert signed.note.startswith(checkpoint.text + "\n\u2014 example.com/log ")
    assert open_checkpoint(signed.note, KEY.verifier) == signed
    assert open_checkpoint(signed.note.encode(), KEY.verifier).checkpoint == checkpoint


def test_c2sp_example_checkpoint_parses() -> None:
    """The example checkpoint text of C2SP tlog-checkpoint parses to its three fields."""
    text = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    checkpoint = parse_checkpoint_text(text)
    assert checkpoint.origin == "example.com/behind-the-sofa"
    assert checkpoint.size == 20852163
    assert checkpoint.text == text


def test_empty_tree_checkpoint() -> None:
    """The empty tree has size 0 and the SHA-256 of nothing as its root."""
    signed = sign_checkpoint(Checkpoint(KEY.name, 0, EMPTY_ROOT), KEY)
    assert open_checkpoint(signed.note, KEY.verifier).size == 0


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("o\n1\n", "origin, a tree size"),
        ("o\n01\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "canonical decimal"),
        ("o\n-1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "canonical decimal"),
        ("o\n\u0661\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "canonical decimal"),
        (
            "o\n" + "9" * 5000 + "\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
            "canonical decimal",
        ),
        ("o\n9223372036854775808\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "range"),
        ("o\n1\nAAAA\n", "32"),
        ("o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=\n", "canonical"),
        ("\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "empty"),
        ("o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\nx\n", "empty"),
    ],
)
def test_malformed_checkpoints_are_refused(text: str, fragment: str) -> None:
    """Short, non-canonical, out-of-range or empty-line checkpoints are NoteErrors."""
    with pytest.raises(NoteError, match=fragment):
        parse_checkpoint_text(text)


def test_checkpoint_of_another_origin_is_refused() -> None:
    """A checkpoint signed by our key for another origin is not a checkpoint of this log."""
    signed = sign_checkpoint(Checkpoint("another.example/log", 1, bytes(32)), KEY)
    with pytest.raises(NoteError, match="origin"):
        open_checkpoint(signed.note, KEY.verifier)
    assert open_checkpoint(signed.note, KEY.verifier, origin="another.example/log").size == 1


def test_checkpoint_by_another_key_is_refused() -> None:
    """A checkpoint signed by any other key fails against ours."""
    signed = sign_checkpoint(Checkpoint(KEY.name, 1, bytes(32)), OTHER)
    with pytest.raises(SignatureInvalid):
        open_checkpoint(signed.note, KEY.verifier)
