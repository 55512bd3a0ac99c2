"""Bundle names and digests: ``sha256:<64 hex>`` outside, ``sha256-<64 hex>`` on disk.

Pure. A reference that is not exactly one of those two forms is refused here, before any
system call sees it, and the refusal says which kind of attempt it looks like (an absolute
path, a ``..`` walk, anything else); ``openat2``'s ``RESOLVE_BENEATH`` stays behind it as
the second line.
"""

from __future__ import annotations

import re
from typing import Final

from glove.library.errors import BundleNameError

#: The only digest algorithm bundles are named by (OCI and the remote execution API's).
ALGORITHM: Final = "sha256"
#: What a bundle's file name must match, whole.
BUNDLE_NAME_PATTERN: Final = r"^sha256-[0-9a-f]{64}$"
_NAME: Final = re.compile(r"sha256-[0-9a-f]{64}", re.ASCII)
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
#: Longest reference quoted back in an error, in characters.
MAX_QUOTED_CHARS: Final = 100


def quoted(text: str) -> str:
    """``text`` as a bounded, printable Python literal for a message."""
    shown = repr(text)
    if len(shown) > MAX_QUOTED_CHARS:
        return shown[: MAX_QUOTED_CHARS - 3] + "..."
    return shown


def is_bundle_name(name: str) -> bool:
    """Whether ``name`` is a well-formed bundle file name."""
    return _NAME.fullmatch(name) is not None


def digest_of(name: str) -> str:
    """The digest (``sha256:<hex>``) of a well-formed bundle name."""
    return ALGORITHM + ":" + name[len(ALGORITHM) + 1 :]


def name_of(hexdigest: str) -> str:
    """The bundle file name of a SHA-256 hex digest."""
    return f"{ALGORITHM}-{hexdigest}"


def bundle_name(ref: str) -> str:
    """The bundle file name for ``ref``: a digest ``sha256:<hex>`` or a name ``sha256-<hex>``.

    Raises:
        BundleNameError: ``projection_name_absolute`` (``/...``), ``projection_name_traversal``
            (a ``..`` component) or ``projection_name_invalid`` (anything else that is not
            exactly one of the two forms, in lower-case hex).
    """
    if _DIGEST.fullmatch(ref):
        return name_of(ref[len(ALGORITHM) + 1 :])
    if _NAME.fullmatch(ref):
        return ref
    if ref.startswith("/"):
        raise BundleNameError(
            "projection_name_absolute",
            f"bundle reference {quoted(ref)} is an absolute path; bundles are named only by "
            "their digest (sha256:<64 lower-case hex>)",
            subject=ref,
        )
    if ".." in re.split(r"[/:]", ref):
        raise BundleNameError(
            "projection_name_traversal",
            f"bundle reference {quoted(ref)} walks up with '..'; bundles are named only by "
            "their digest (sha256:<64 lower-case hex>)",
            subject=ref,
        )
    raise BundleNameError(
        "projection_name_invalid",
        f"bundle reference {quoted(ref)} is not a digest sha256:<64 lower-case hex>",
        subject=ref,
    )
