"""Signing keys: the signed-note formats, byte for byte, and the key file's safety rules."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from glove.journal import (
    SigningKey,
    SigningKeyError,
    SigningKeyUnsafe,
    default_signing_key_path,
    generate_signing_key,
    load_signing_key,
    parse_signing_key,
    parse_verifier_key,
    read_verifier_key_file,
)

# The example key pair published in the documentation of golang.org/x/mod/sumdb/note.
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"


def test_go_example_keys_round_trip() -> None:
    """Go's published signer key yields exactly Go's published verifier key, and back."""
    key = parse_signing_key(GO_SKEY)
    assert key.name == "PeterNeumann"
    assert key.key_hash == 0xC74F20A3
    assert key.verifier.text == GO_VKEY
    assert key.text == GO_SKEY
    assert parse_verifier_key(GO_VKEY) == key.verifier
    assert "seed" not in repr(key)


def test_key_hash_is_sha256_of_name_newline_alg_key() -> None:
    """The key hash is the first 4 bytes of SHA-256(name || 0x0A || 0x01 || public key)."""
    import hashlib

    vkey = parse_verifier_key(GO_VKEY)
    digest = hashlib.sha256(b"PeterNeumann\n\x01" + vkey.public_key).digest()
    assert vkey.key_hash == int.from_bytes(digest[:4], "big")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "hash"),
        ("PeterNeumann+c74f20a3+AhpcfsVkmqq/LDE4izWy10TW", "bytes"),
        ("PeterNeumann+c74f20a3+Ahpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "algorithm"),
        ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TX", "hash"),
        ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T", "base64"),
        ("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "holds"),
        ("+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "empty"),
        ("PeterNeumann+c74f20+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "8 hex"),
        ("PeterNeumann", "NAME.HASH.KEYDATA"),
        (GO_SKEY, "private"),
    ],
)
def test_bad_verifier_keys_are_refused(text: str, fragment: str) -> None:
    """A wrong hash, length, algorithm, encoding or name, or a private key, is refused."""
    with pytest.raises(SigningKeyError, match=fragment):
        parse_verifier_key(text)


def test_signer_key_with_wrong_hash_is_refused() -> None:
    """A signer key whose hash does not match its derived public key is refused."""
    with pytest.raises(SigningKeyError, match="hash"):
        parse_signing_key(GO_SKEY.replace("c74f20a3", "c74f20a2"))
    with pytest.raises(SigningKeyError, match="PRIVATE"):
        parse_signing_key(GO_VKEY)


def test_default_path_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The default key lives under $XDG_CONFIG_HOME/glove, or ~/.config/glove without it."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_signing_key_path() == tmp_path / "glove" / "receipt-signing.key"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_signing_key_path() == tmp_path / "home/.config/glove/receipt-signing.key"


def test_generate_creates_an_owner_only_file_once(tmp_path: Path) -> None:
    """The key file is created 0600 in a 0700 directory; a second call loads, never rewrites."""
    path = tmp_path / "cfg" / "glove" / "receipt-signing.key"
    key, created = generate_signing_key(path, name="example.com/log")
    assert created
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text() == key.text + "\n"
    before = path.stat()
    again, created_again = generate_signing_key(path, name="ignored")
    assert not created_again
    assert again == key
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert load_signing_key(path) == key


def test_generated_names_are_unique_and_valid(tmp_path: Path) -> None:
    """Without a name, each key gets glove/receipts/<16 hex> (a valid, unique note name)."""
    a, _ = generate_signing_key(tmp_path / "a")
    b, _ = generate_signing_key(tmp_path / "b")
    assert a.name.startswith("glove/receipts/")
    assert len(a.name) == len("glove/receipts/") + 16
    assert a.name != b.name
    assert parse_verifier_key(a.verifier.text) == a.verifier


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o601])
def test_key_file_open_to_others_is_refused_and_left_alone(tmp_path: Path, mode: int) -> None:
    """A key file with a group or other bit is refused by load and generate, never chmod'ed."""
    path = tmp_path / "k"
    key, _ = generate_signing_key(path)
    path.chmod(mode)
    with pytest.raises(SigningKeyUnsafe, match=f"{mode:04o}"):
        load_signing_key(path)
    with pytest.raises(SigningKeyUnsafe):
        generate_signing_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert path.read_text() == key.text + "\n"


def test_key_file_symlink_is_refused(tmp_path: Path) -> None:
    """A symlink at the key path is refused (O_NOFOLLOW) even if its target is safe."""
    target = tmp_path / "real"
    generate_signing_key(target)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(SigningKeyUnsafe, match="symlink"):
        load_signing_key(link)
    with pytest.raises(SigningKeyUnsafe, match="symlink"):
        generate_signing_key(link)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(SigningKeyUnsafe):
        generate_signing_key(dangling)
    assert not (tmp_path / "nowhere").exists()


def test_key_file_of_another_user_is_refused(tmp_path: Path) -> None:
    """A key file owned by another uid is refused (needs root to set up, as CI runs)."""
    if os.geteuid() != 0:
        pytest.fail("this test needs root to chown a file to another user (CI runs as root)")
    path = tmp_path / "k"
    generate_signing_key(path)
    os.chown(path, 65534, 65534)
    with pytest.raises(SigningKeyUnsafe, match="uid 65534"):
        load_signing_key(path)
    assert path.stat().st_uid == 65534


def test_non_regular_and_malformed_key_files_are_refused(tmp_path: Path) -> None:
    """A directory, a FIFO, a missing file, garbage, or an oversized file is refused."""
    (tmp_path / "dir").mkdir(mode=0o700)
    with pytest.raises(SigningKeyError):
        load_signing_key(tmp_path / "dir")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(SigningKeyUnsafe, match="regular"):
        load_signing_key(fifo)  # refused at once, never blocks waiting for a writer
    with pytest.raises(SigningKeyError, match="cannot open"):
        load_signing_key(tmp_path / "missing")
    for name, data in (("garbage", b"hello\n"), ("huge", b"P" * 5000), ("latin", b"\xff\xfe")):
        path = tmp_path / name
        path.write_bytes(data)
        path.chmod(0o600)
        with pytest.raises(SigningKeyError):
            load_signing_key(path)


def test_verifier_key_file(tmp_path: Path) -> None:
    """A public key file holds the verifier line; a private key there is refused by name."""
    key = SigningKey("example.com/log", bytes(32))
    pub = tmp_path / "pub"
    pub.write_text(key.verifier.text + "\n")
    assert read_verifier_key_file(pub) == key.verifier
    pub.write_text(key.text + "\n")
    with pytest.raises(SigningKeyError, match="private"):
        read_verifier_key_file(pub)
    with pytest.raises(SigningKeyError, match="cannot read"):
        read_verifier_key_file(tmp_path / "missing")
