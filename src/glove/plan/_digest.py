"""The two digests of a plan's canonical bytes (sans-IO).

The controller names a plan by its BLAKE3 digest, Glove by its SHA-256 content digest; both
are over the same RFC 8785 bytes and both are persisted with the plan and put in its receipt.
Each is written ``<algorithm>:<lowercase hex>`` so a reader never guesses which it holds.
"""

from __future__ import annotations

import hashlib
from typing import Final

import blake3
import msgspec

#: The prefixes of the two digest strings.
SHA256_PREFIX: Final = "sha256:"
BLAKE3_PREFIX: Final = "blake3:"
#: Length of each digest, in bytes (both are 256-bit).
DIGEST_BYTES: Final = 32


class PlanDigests(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Both digests of one plan's canonical bytes.

    Attributes:
        sha256: ``"sha256:<64 hex>"``, Glove's content digest.
        blake3: ``"blake3:<64 hex>"``, the controller's digest.
    """

    sha256: str
    blake3: str


def plan_digests(canonical: bytes) -> PlanDigests:
    """SHA-256 and BLAKE3 of ``canonical`` (the output of :func:`canonical_bytes`).

    Raises:
        TypeError: ``canonical`` is not bytes-like.
    """
    return PlanDigests(
        sha256=SHA256_PREFIX + hashlib.sha256(canonical).hexdigest(),
        blake3=BLAKE3_PREFIX + blake3.blake3(canonical).hexdigest(),
    )
