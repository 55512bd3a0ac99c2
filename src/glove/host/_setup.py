"""``glove setup``: create Glove's own files for this user, owner-only, once.

It creates (0700 directories, 0600 files) the XDG configuration, state and runtime
directories, the journals' HMAC key, the receipts' Ed25519 signing key, the receipt and
session journal directories, and a commented ``gloved.toml`` (rendered from
``deploy/gloved.toml``). An existing path owned by someone else, open to others or a
symlink is refused, never repaired. Run twice, it changes nothing and says so.
"""

from __future__ import annotations

import secrets
from importlib import resources
from pathlib import Path
from typing import Final

import msgspec

from glove.config import GlovePaths, create_private_file, ensure_private_dir, glove_paths

#: Bytes of the journals' HMAC key.
HMAC_KEY_BYTES: Final = 32


class SetupReport(msgspec.Struct, frozen=True):
    """What ``glove setup`` made (``--json`` prints this)."""

    config: str
    state_dir: str
    runtime_dir: str
    receipts_journal: str
    sessions_journal: str
    key_file: str
    signing_key: str
    public_key: str
    created: list[str]
    changed: bool


def gloved_toml_template(home: str) -> bytes:
    """The commented ``gloved.toml`` that setup writes (``deploy/gloved.toml``, rendered)."""
    text = resources.files("glove.host").joinpath("deploy", "gloved.toml").read_text()
    return text.replace("@HOME@", home).encode()


def setup(paths: GlovePaths | None = None, *, home: str | None = None) -> SetupReport:
    """Create what is missing; check what exists.

    Raises:
        UnsafePath: an existing path is not an owner-only one of ours (nothing is changed).
        SigningKeyError: the signing key cannot be created or read.
        OSError: a file cannot be written.
    """
    from glove.journal import generate_signing_key

    where = paths or glove_paths()
    created: list[str] = []

    def note(made: bool, path: Path) -> None:
        if made:
            created.append(str(path))

    for directory in (
        where.config_dir,
        where.state_dir,
        where.runtime_dir,
        where.receipts_journal,
        where.sessions_journal,
        where.sessions_data,
    ):
        note(ensure_private_dir(directory), directory)
    key = secrets.token_bytes(HMAC_KEY_BYTES).hex().encode() + b"\n"
    note(create_private_file(where.hmac_key, key), where.hmac_key)
    signing, made = generate_signing_key(where.signing_key)
    note(made, where.signing_key)
    template = gloved_toml_template(home or str(Path.home()))
    note(create_private_file(where.gloved_toml, template), where.gloved_toml)
    return SetupReport(
        config=str(where.gloved_toml),
        state_dir=str(where.state_dir),
        runtime_dir=str(where.runtime_dir),
        receipts_journal=str(where.receipts_journal),
        sessions_journal=str(where.sessions_journal),
        key_file=str(where.hmac_key),
        signing_key=str(where.signing_key),
        public_key=signing.verifier.text,
        created=created,
        changed=bool(created),
    )
