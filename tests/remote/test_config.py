"""[remote_backend] validation: each refusal names its field; good sections pass untouched."""

from __future__ import annotations

import msgspec
import pytest

from glove.remote import (
    RemoteBackendConfig,
    RemoteConfigError,
    check_image_reference,
    validate_remote_backend,
)
from tests.remote.conftest import IMAGE, IMAGE_DIGEST, IMAGE_HEX, b64, section


def _refusal(**changes: object) -> RemoteConfigError:
    """Validate a section with ``changes`` and return the error it must raise."""
    with pytest.raises(RemoteConfigError) as info:
        validate_remote_backend(
            section(**changes), local_materialization=False, apple_container=False
        )
    return info.value


def test_valid_section_passes() -> None:
    """The reference section validates with neither collision set."""
    validate_remote_backend(section(), local_materialization=False, apple_container=False)


def test_toml_table_decodes_and_unknown_keys_are_refused_with_their_path() -> None:
    """The Struct decodes a TOML table strictly: a typo is an error naming the key."""
    good = (
        f'host = "h.example"\nport = 22\nuser = "u"\nhost_key = "{section().host_key}"\n'
        f'container_image = "{IMAGE}"\ncontainer_image_digest = "{IMAGE_DIGEST}"\n'
    )
    decoded = msgspec.toml.decode(good.encode(), type=RemoteBackendConfig)
    assert decoded.container_image == IMAGE
    with pytest.raises(msgspec.ValidationError, match="hots"):
        msgspec.toml.decode((good + 'hots = "x"\n').encode(), type=RemoteBackendConfig)
    with pytest.raises(msgspec.ValidationError, match="container_image_digest"):
        msgspec.toml.decode(
            good.replace(f'container_image_digest = "{IMAGE_DIGEST}"\n', "").encode(),
            type=RemoteBackendConfig,
        )


@pytest.mark.parametrize(
    ("local", "apple"), [(True, False), (False, True), (True, True)], ids=["local", "apple", "both"]
)
def test_mutually_exclusive_with_local_materialization_and_apple_container(
    local: bool, apple: bool
) -> None:
    """A remote backend next to local materialization or Apple Container config is refused."""
    with pytest.raises(RemoteConfigError) as info:
        validate_remote_backend(section(), local_materialization=local, apple_container=apple)
    assert info.value.field == "remote_backend"
    assert ("local materialization" if local else "Apple Container") in str(info.value)


@pytest.mark.parametrize(
    ("image", "words"),
    [
        (f"registry.example.net/agents/base:1.2@{IMAGE_DIGEST}", "tagged"),
        (f"registry.example.net:5000/base:latest@{IMAGE_DIGEST}", "tagged"),
        ("registry.example.net/agents/base:latest", "pinned by digest"),
        (f"registry.example.net/agents/base@sha256:{IMAGE_HEX.upper()}", "lowercase"),
        (f"registry.example.net/agents/base@sha256:{IMAGE_HEX[:12]}", "64 hex digits, got 12"),
        (f"registry.example.net/agents/base@sha512:{IMAGE_HEX}", "sha256"),
        (f"registry.example.net/agents/base@sha256:{'g' * 64}", "not hexadecimal"),
        (f"alpine@{IMAGE_DIGEST}", "registry"),
        (f"agents/base@{IMAGE_DIGEST}", "registry"),
        (f"registry.example.net/Agents/base@{IMAGE_DIGEST}", "not canonical"),
        (f"Registry.Example.net/agents/base@{IMAGE_DIGEST}", "lowercase host"),
        (f"registry.example.net//base@{IMAGE_DIGEST}", "not canonical"),
        (f"registry.example.net/base @{IMAGE_DIGEST}", "not canonical"),
        ("x" * 600, "longer than"),
    ],
)
def test_image_reference_refusals_name_container_image(image: str, words: str) -> None:
    """Tags, missing digests, uppercase or short hex and short names are refused by field."""
    error = _refusal(container_image=image)
    assert error.field == "container_image"
    assert words in str(error)
    assert str(error).startswith("remote_backend.container_image: ")


@pytest.mark.parametrize(
    "reference",
    [
        IMAGE,
        f"localhost/base@{IMAGE_DIGEST}",
        f"registry.example.net:5000/a/b_c/d-e/f.g@{IMAGE_DIGEST}",
        f"ghcr.io/org/img__x@{IMAGE_DIGEST}",
    ],
)
def test_canonical_references_split_into_name_and_digest(reference: str) -> None:
    """Registry-qualified, untagged, lowercase references are canonical."""
    name, digest = check_image_reference(reference)
    assert f"{name}@{digest}" == reference


def test_digest_mismatch_is_refused_naming_the_digest_field() -> None:
    """An image whose digest differs from container_image_digest is refused."""
    other = "sha256:" + "b" * 64
    error = _refusal(container_image_digest=other)
    assert error.field == "container_image_digest"
    assert other in str(error)
    assert IMAGE_DIGEST in str(error)


@pytest.mark.parametrize(
    ("digest", "words"),
    [
        (IMAGE_HEX, "sha256:<64"),
        (f"sha256:{IMAGE_HEX.upper()}", "lowercase"),
        (f"sha256:{IMAGE_HEX[:40]}", "got 40"),
        (f"SHA256:{IMAGE_HEX}", "sha256:<64"),
    ],
)
def test_malformed_container_image_digest_is_refused_by_name(digest: str, words: str) -> None:
    """container_image_digest must itself be canonical sha256:<64 lowercase hex>."""
    error = _refusal(container_image_digest=digest)
    assert error.field == "container_image_digest"
    assert words in str(error)


@pytest.mark.parametrize(
    "host",
    ["", "a b", "-oProxyCommand=x", "h\nProxyCommand x", "%h", "h.example%x", "[::1]",
     "fe80::1%eth0", "a" * 254, "under_score.example", "x..y"],
)  # fmt: skip
def test_bad_hosts_are_refused(host: str) -> None:
    """Hosts that are not DNS names or IP literals (or could inject options) are refused."""
    assert _refusal(host=host).field == "host"


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "2001:db8::7", "build-01.example.net", "h"])
def test_good_hosts_pass(host: str) -> None:
    """DNS names and IP literals are accepted without any lookup."""
    validate_remote_backend(section(host=host), local_materialization=False, apple_container=False)


@pytest.mark.parametrize("port", [0, -1, 65536, 100000])
def test_ports_out_of_range_are_refused(port: int) -> None:
    """A port outside 1..65535 is refused."""
    assert _refusal(port=port).field == "port"


@pytest.mark.parametrize("user", ["", "-l", "a b", "root%u", "x" * 33, "1abc", "a\nb", "a@b"])
def test_bad_users_are_refused(user: str) -> None:
    """User names that are not POSIX-style names are refused."""
    assert _refusal(user=user).field == "user"


def _wire(key_type: bytes, key: bytes) -> bytes:
    return len(key_type).to_bytes(4, "big") + key_type + len(key).to_bytes(4, "big") + key


@pytest.mark.parametrize(
    "host_key",
    [
        "",
        "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ",
        f"ecdsa-sha2-nistp256 {b64(_wire(b'ecdsa-sha2-nistp256', b'k' * 65))}",
        f"ssh-ed25519 {b64(_wire(b'ssh-ed25519', b'k' * 31))}",
        f"ssh-ed25519 {b64(_wire(b'ssh-ed25519', b'k' * 33))}",
        f"ssh-ed25519 {b64(_wire(b'ssh-rsa', b'k' * 32))}",
        f"ssh-ed25519 {b64(_wire(b'ssh-ed25519', b'k' * 32) + b'x')}",
        "ssh-ed25519 !!!notbase64",
        "ssh-ed25519  AAAAC3NzaC1lZDI1NTE5",
        f"{section().host_key}\nssh-ed25519 {b64(_wire(b'ssh-ed25519', b'k' * 32))}",
        f"{section().host_key} comment\tx",
        f"{section().host_key} a b",
    ],
)
def test_host_keys_that_are_not_one_ed25519_key_are_refused(host_key: str) -> None:
    """Only one ssh-ed25519 public key with 32 key bytes is pinned."""
    assert _refusal(host_key=host_key).field == "host_key"


def test_host_key_comment_is_accepted() -> None:
    """A trailing printable comment (as in a .pub file) is allowed."""
    validate_remote_backend(
        section(host_key=section().host_key + " root@builder"),
        local_materialization=False,
        apple_container=False,
    )
