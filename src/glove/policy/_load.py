"""The one I/O adapter of the policy package: read a policy file from disk."""

from pathlib import Path

from glove.policy._compile import MAX_POLICY_FILE_BYTES
from glove.policy._engine import Policy, parse_policy
from glove.policy.errors import PolicyFileError

__all__ = ["load_policy"]


def load_policy(path: str | Path) -> Policy:
    """Read and compile the policy file at ``path``.

    Raises:
        PolicyFileError: the file cannot be read, is larger than 1 MiB, or is not a valid
            policy (the message names the key path at fault).
    """
    source = str(path)
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(MAX_POLICY_FILE_BYTES + 1)
    except OSError as exc:
        raise PolicyFileError(source, "", f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > MAX_POLICY_FILE_BYTES:
        raise PolicyFileError(source, "", f"larger than {MAX_POLICY_FILE_BYTES} bytes")
    return parse_policy(data, source=source)
