"""One line to stdout or stderr, as ``typer.echo`` writes it, without importing typer.

The commands :mod:`glove.cli._fast` runs before typer is imported (``--version``,
``--help``, ``capabilities``, ``session status``) print through :func:`echo`, and so do the
same commands under typer, so both paths write the same bytes: the message and a newline,
flushed, with ANSI escape sequences stripped when the stream is not a terminal (click's rule).
"""

from __future__ import annotations

import sys
from typing import Final

#: click's pattern for the escape sequences it strips from output that is not a terminal.
_ANSI_PATTERN: Final = r"\033\[[;?0-9]*[a-zA-Z]"


def echo(message: str, *, err: bool = False) -> None:
    """Write ``message`` and a newline to stdout (stderr with ``err``) and flush."""
    stream = sys.stderr if err else sys.stdout
    out = message + "\n"
    if "\033" in out and not _isatty(stream):
        import re

        out = re.sub(_ANSI_PATTERN, "", out)
    stream.write(out)
    stream.flush()


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - click's isatty: a stream that cannot tell is not a terminal
        return False
