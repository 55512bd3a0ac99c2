"""The receipt signing key on disk: created owner-only, loaded only from a safe file.

The key file holds one line, the signer key in Go's ``sumdb/note`` format
(``PRIVATE+KEY+<name>+<hash>+<base64(0x01 || seed)>``), so Go's ``note.NewSigner`` reads it
too. It is created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0600, fsync'ed, and its
directory fsync'ed. A file that exists is loaded only if it is a regular file (not a symlink),
owned by the effective user, and has no group or other permission bit; anything else is
refused with :class:`SigningKeyUnsafe` and left exactly as it is (never chmod'ed, never
rewritten), so an operator sees what happened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Final

from glove.journal._keys import (
    MAX_KEY_TEXT_BYTES,
    SEED_BYTES,
    SigningKey,
    VerifierKey,
    parse_signing_key,
    parse_verifier_key,
)
from glove.journal._witness import WitnessKey, parse_witness_key
from glove.journal.errors import SigningKeyError, SigningKeyUnsafe

SIGNING_KEY_FILE_NAME: Final = "receipt-signing.key"
KEY_FILE_MODE: Final = 0o600
KEY_DIR_MODE: Final = 0o700
DEFAULT_NAME_PREFIX: Final = "glove/receipts/"
"""Default key names (and log origins) are this prefix and 16 random hex digits."""
# O_NONBLOCK: opening a FIFO planted at the key path must not hang; fstat then refuses it.
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def default_signing_key_path() -> Path:
    """``$XDG_CONFIG_HOME/glove/receipt-signing.key`` (``~/.config`` when XDG is unset)."""
    config = os.environ.get("XDG_CONFIG_HOME")
    base = Path(config) if config and Path(config).is_absolute() else Path.home() / ".config"
    return base / "glove" / SIGNING_KEY_FILE_NAME


def default_key_name() -> str:
    """A fresh, unique key name: ``glove/receipts/<16 random hex digits>``."""
    return DEFAULT_NAME_PREFIX + secrets.token_hex(8)


def _check_safe(path: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise SigningKeyUnsafe(f"key file {path} is not a regular file; refusing it")
    if st.st_uid != os.geteuid():
        raise SigningKeyUnsafe(
            f"key file {path} is owned by uid {st.st_uid}, not by uid {os.geteuid()}; refusing it"
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise SigningKeyUnsafe(
            f"key file {path} has mode {stat.S_IMODE(st.st_mode):04o}; it must be 0600 "
            "(owner only); refusing it"
        )


def _read_bounded(fd: int, path: Path) -> str:
    data = os.read(fd, MAX_KEY_TEXT_BYTES + 1)
    if len(data) > MAX_KEY_TEXT_BYTES:
        raise SigningKeyError(f"key file {path} is larger than a key")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SigningKeyError(f"key file {path} is not UTF-8 text") from exc


def load_signing_key(path: Path | None = None) -> SigningKey:
    """Load the signing key from ``path`` (default :func:`default_signing_key_path`).

    Raises:
        SigningKeyUnsafe: a symlink, not a regular file, another owner, or group/other bits.
        SigningKeyError: missing, unreadable or malformed.
    """
    path = path if path is not None else default_signing_key_path()
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SigningKeyUnsafe(f"key file {path} is a symlink; refusing it") from exc
        raise SigningKeyError(f"cannot open key file {path}: {exc.strerror}") from exc
    try:
        _check_safe(path, os.fstat(fd))
        text = _read_bounded(fd, path)
    except OSError as exc:
        raise SigningKeyError(f"cannot read key file {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    try:
        return parse_signing_key(text)
    except SigningKeyError as exc:
        raise SigningKeyError(f"key file {path}: {exc}") from exc


def generate_signing_key(
    path: Path | None = None, *, name: str | None = None
) -> tuple[SigningKey, bool]:
    """Create a new signing key at ``path``, or load the one already there.

    Returns ``(key, created)``: ``created`` is false when a safe key file already existed (it
    is loaded and left unchanged, so ``glove setup`` can run twice). A missing parent
    directory is created with mode 0700.

    Raises:
        SigningKeyUnsafe: the path exists but is unsafe (see :func:`load_signing_key`).
        SigningKeyError: a bad ``name``, or the file cannot be created or read.
    """
    path = path if path is not None else default_signing_key_path()
    key = SigningKey(
        name if name is not None else default_key_name(), secrets.token_bytes(SEED_BYTES)
    )
    try:
        path.parent.mkdir(mode=KEY_DIR_MODE, parents=True, exist_ok=True)
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, KEY_FILE_MODE
        )
    except FileExistsError:
        return load_signing_key(path), False
    except OSError as exc:
        raise SigningKeyError(f"cannot create key file {path}: {exc.strerror}") from exc
    try:
        try:
            os.fchmod(fd, KEY_FILE_MODE)  # exact mode whatever the umask left
            data = (key.text + "\n").encode()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        raise SigningKeyError(f"cannot write key file {path}: {exc.strerror}") from exc
    return key, True


def _read_public_key_file(path: Path, what: str) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KEY_TEXT_BYTES + 1)
    except OSError as exc:
        raise SigningKeyError(f"cannot read {what} file {path}: {exc.strerror}") from exc
    if len(data) > MAX_KEY_TEXT_BYTES:
        raise SigningKeyError(f"{what} file {path} is larger than a key")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SigningKeyError(f"{what} file {path} is not UTF-8 text") from exc


def read_verifier_key_file(path: Path) -> VerifierKey:
    """Read a public verifier key file (one line, as ``glove receipts public-key`` prints).

    Raises:
        SigningKeyError: unreadable, too large or malformed.
    """
    text = _read_public_key_file(path, "public key")
    try:
        return parse_verifier_key(text)
    except SigningKeyError as exc:
        raise SigningKeyError(f"public key file {path}: {exc}") from exc


def read_witness_key_file(path: Path) -> WitnessKey:
    """Read a witness's public key file (one C2SP vkey line of type 0x04).

    Raises:
        SigningKeyError: unreadable, too large or malformed, or not a witness's key.
    """
    text = _read_public_key_file(path, "witness key")
    try:
        return parse_witness_key(text)
    except SigningKeyError as exc:
        raise SigningKeyError(f"witness key file {path}: {exc}") from exc
