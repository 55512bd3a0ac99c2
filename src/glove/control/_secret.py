"""A client's read of the bootstrap secret: the file's checks, without pathlib.

:mod:`glove.control._auth` describes the secret and writes it; reading it is here, on plain
paths, so the CLI's one-call commands need neither ``pathlib`` nor ``dataclasses``
(docs/decisions/0049-a-json-only-one-shot-call.md). ``_auth`` re-exports every name.
"""

from __future__ import annotations

import os
import stat
from typing import Final

from glove.control.errors import DaemonUnavailable

SECRET_BYTES: Final = 32
SECRET_HEX_CHARS: Final = 2 * SECRET_BYTES
#: The most a client reads from the secret file (the secret plus a newline, with room).
MAX_SECRET_FILE_BYTES: Final = 256


def read_secret(path: str | os.PathLike[str]) -> str:
    """Read a bootstrap secret file for a client, refusing one another user could read.

    Raises:
        DaemonUnavailable: the file is missing (no daemon started here), unreadable, not a
            regular file of ours with mode 0600, or does not hold a secret.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise DaemonUnavailable(f"no {path}: gloved is not running there; start it") from exc
    except OSError as exc:
        raise DaemonUnavailable(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise DaemonUnavailable(f"{path} is not a regular file owned by uid {os.getuid()}")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise DaemonUnavailable(
                f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; a secret must be 0600"
            )
        raw = os.read(fd, MAX_SECRET_FILE_BYTES)
    finally:
        os.close(fd)
    text = raw.decode("ascii", errors="replace").strip()
    if len(text) != SECRET_HEX_CHARS:
        raise DaemonUnavailable(f"{path} does not hold a bootstrap secret")
    return text
