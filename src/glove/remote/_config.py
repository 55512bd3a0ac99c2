"""The ``[remote_backend]`` section of ``gloved.toml`` and its validation (sans-IO).

The section names one SSH-reachable Linux host and the container image it would run::

    [remote_backend]
    host = "builder.example.net"
    port = 22
    user = "glove"
    host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA..."
    container_image = "registry.example.net/agents/base@sha256:<64 lowercase hex>"
    container_image_digest = "sha256:<64 lowercase hex>"

``gloved`` decodes the table into :class:`RemoteBackendConfig` (unknown keys are refused by
msgspec with the key's path) and :func:`validate_remote_backend` then checks what types
cannot: the section excludes local materialization and Apple Container configuration; the
image is an untagged canonical ``name@sha256:<64 lowercase hex>`` reference whose digest is
exactly ``container_image_digest``; the host, user and host key are values that can be
written into an OpenSSH config without quoting tricks. Every refusal is a
:class:`RemoteConfigError` naming the key. Nothing here resolves a name or opens a socket.
"""

from __future__ import annotations

import binascii
import re
from typing import Final

import msgspec

from glove.remote.errors import RemoteConfigError

#: The only digest algorithm accepted for the image, and the length of its hex form.
DIGEST_ALGORITHM: Final = "sha256"
DIGEST_HEX_CHARS: Final = 64
#: The only host key type pinned, and the length of an Ed25519 public key.
HOST_KEY_TYPE: Final = "ssh-ed25519"
ED25519_KEY_BYTES: Final = 32
#: Bounds on the text fields (a DNS name is at most 253 characters; POSIX user names 32).
MAX_HOST_CHARS: Final = 253
MAX_USER_CHARS: Final = 32
MAX_IMAGE_REFERENCE_CHARS: Final = 512
MAX_HOST_KEY_COMMENT_CHARS: Final = 256
MIN_PORT: Final = 1
MAX_PORT: Final = 65535

_HEX_DIGEST_RE: Final = re.compile(r"[0-9a-f]{64}")
_LABEL: Final = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME_RE: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_USER_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# The distribution reference grammar (github.com/distribution/reference), lowercase only:
# a registry domain (with an optional port), then slash-separated path components.
_DOMAIN_COMPONENT: Final = r"(?:[a-z0-9]|[a-z0-9][a-z0-9-]*[a-z0-9])"
_DOMAIN_RE: Final = re.compile(rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?")
_PATH_COMPONENT_RE: Final = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*")
_COMMENT_RE: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


class RemoteBackendConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[remote_backend]`` table of ``gloved.toml``.

    Attributes:
        host: the remote host's DNS name or IP address literal (never resolved here).
        port: its SSH port.
        user: the account the executor runs as.
        host_key: the one ``ssh-ed25519 AAAA...`` public host key pinned (a trailing comment
            is allowed and dropped).
        container_image: ``registry/name@sha256:<64 lowercase hex>``, untagged.
        container_image_digest: ``sha256:<64 lowercase hex>``, equal to the image's digest.
    """

    host: str
    user: str
    host_key: str
    container_image: str
    container_image_digest: str
    port: int = 22


def _check_digest(field: str, digest: str) -> str:
    """Return the hex of a ``sha256:<64 lowercase hex>`` digest, or name what is wrong."""
    algorithm, sep, hexpart = digest.partition(":")
    if not sep or algorithm != DIGEST_ALGORITHM:
        raise RemoteConfigError(field, f"digest must be sha256:<64 lowercase hex>, got {digest!r}")
    if len(hexpart) != DIGEST_HEX_CHARS:
        raise RemoteConfigError(
            field,
            f"digest must have {DIGEST_HEX_CHARS} hex digits, got {len(hexpart)} "
            "(short or truncated digests are refused)",
        )
    if _HEX_DIGEST_RE.fullmatch(hexpart) is None:
        if _HEX_DIGEST_RE.fullmatch(hexpart.lower()) is not None:
            raise RemoteConfigError(field, "digest hex must be lowercase (canonical form)")
        raise RemoteConfigError(field, f"digest is not hexadecimal: {hexpart!r}")
    return hexpart


def check_image_reference(reference: str) -> tuple[str, str]:
    """Split a canonical ``registry/name@sha256:<hex>`` reference into (name, digest).

    Canonical means: a registry domain (``example.net``, ``host:5000`` or ``localhost``)
    followed by lowercase path components, no tag, and a lowercase sha256 digest. A familiar
    short name such as ``alpine@sha256:...`` is refused because its registry would be implied.

    Raises:
        RemoteConfigError: naming ``container_image``.
    """
    field = "container_image"
    if len(reference) > MAX_IMAGE_REFERENCE_CHARS:
        raise RemoteConfigError(field, f"longer than {MAX_IMAGE_REFERENCE_CHARS} characters")
    name, at, digest = reference.rpartition("@")
    if not at:
        raise RemoteConfigError(
            field, f"must be pinned by digest as name@sha256:<64 lowercase hex>: {reference!r}"
        )
    _check_digest(field, digest)
    domain, slash, path = name.partition("/")
    if ":" in path.rpartition("/")[2] or (not slash and ":" in name):
        raise RemoteConfigError(field, f"tagged references are refused (untagged only): {name!r}")
    if not slash or not (domain == "localhost" or "." in domain or ":" in domain):
        raise RemoteConfigError(
            field,
            f"must name its registry (registry.example/name@sha256:...), got {name!r}: a "
            "short name leaves the registry implied",
        )
    if _DOMAIN_RE.fullmatch(domain) is None:
        raise RemoteConfigError(field, f"registry {domain!r} is not a lowercase host[:port]")
    for component in path.split("/"):
        if _PATH_COMPONENT_RE.fullmatch(component) is None:
            raise RemoteConfigError(
                field, f"path component {component!r} is not canonical (lowercase [a-z0-9._-])"
            )
    return name, digest


def check_host(host: str) -> str:
    """Return ``host`` if it is a DNS name or an IP literal safe to write into ssh_config.

    Raises:
        RemoteConfigError: naming ``host``.
    """
    import ipaddress  # here: the forced executor imports this module and never needs it

    if not host or len(host) > MAX_HOST_CHARS:
        raise RemoteConfigError("host", f"must be 1-{MAX_HOST_CHARS} characters")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if _HOSTNAME_RE.fullmatch(host) is None:
            raise RemoteConfigError(
                "host", f"not a DNS name or IP address literal: {host!r}"
            ) from None
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        raise RemoteConfigError("host", "an IPv6 zone (%...) is refused")
    return host


def check_host_key(host_key: str) -> tuple[str, str]:
    """Return (key type, base64 blob) of the one pinned ``ssh-ed25519`` public key.

    The blob must decode to exactly the SSH wire form of an Ed25519 key: the string
    ``ssh-ed25519`` and 32 key bytes, each length-prefixed, and nothing else.

    Raises:
        RemoteConfigError: naming ``host_key``.
    """
    parts = host_key.split(" ")
    if len(parts) not in (2, 3) or parts[0] != HOST_KEY_TYPE:
        raise RemoteConfigError(
            "host_key", "must be one 'ssh-ed25519 AAAA...' public key (single spaces)"
        )
    if len(parts) == 3 and (
        len(parts[2]) > MAX_HOST_KEY_COMMENT_CHARS or _COMMENT_RE.fullmatch(parts[2]) is None
    ):
        raise RemoteConfigError("host_key", "the comment after the key is not printable ASCII")
    blob_text = parts[1]
    try:
        blob = binascii.a2b_base64(blob_text, strict_mode=True)
    except binascii.Error as exc:
        raise RemoteConfigError("host_key", f"key is not strict base64: {exc}") from exc
    expected_type = HOST_KEY_TYPE.encode()
    wire = (
        len(expected_type).to_bytes(4, "big") + expected_type + ED25519_KEY_BYTES.to_bytes(4, "big")
    )
    if len(blob) != len(wire) + ED25519_KEY_BYTES or not blob.startswith(wire):
        raise RemoteConfigError(
            "host_key", "key blob is not an ssh-ed25519 public key (type and 32 key bytes)"
        )
    return HOST_KEY_TYPE, blob_text


def validate_remote_backend(
    section: RemoteBackendConfig, *, local_materialization: bool, apple_container: bool
) -> None:
    """Check ``[remote_backend]`` against the rest of the configuration and itself.

    Raises:
        RemoteConfigError: naming the offending key (``remote_backend`` for a collision with
            local materialization or Apple Container configuration).
    """
    if local_materialization:
        raise RemoteConfigError(
            "remote_backend",
            "is mutually exclusive with local materialization; disable local "
            "materialization explicitly to configure a remote backend",
        )
    if apple_container:
        raise RemoteConfigError(
            "remote_backend", "is mutually exclusive with Apple Container configuration"
        )
    check_host(section.host)
    if not MIN_PORT <= section.port <= MAX_PORT:
        raise RemoteConfigError("port", f"must be within {MIN_PORT}..{MAX_PORT}: {section.port}")
    if len(section.user) > MAX_USER_CHARS or _USER_RE.fullmatch(section.user) is None:
        raise RemoteConfigError(
            "user", f"not a user name ([A-Za-z_][A-Za-z0-9_.-], at most {MAX_USER_CHARS})"
        )
    check_host_key(section.host_key)
    _check_digest("container_image_digest", section.container_image_digest)
    _name, digest = check_image_reference(section.container_image)
    if digest != section.container_image_digest:
        raise RemoteConfigError(
            "container_image_digest",
            f"{section.container_image_digest} does not equal the digest of container_image "
            f"({digest})",
        )
