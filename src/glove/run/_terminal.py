"""What ``glove exec`` and ``glove run`` put between the command's output and a terminal.

Output bound for a terminal passes :class:`glove.session.TerminalFilter` (docs/sandbox.md,
"The operator's terminal"): without ``--pty`` in ``text`` mode, the ``glove session log``
filter (only drawing sequences pass, every other control is shown inert); under ``--pty``
in ``pty`` mode, where the agent's TUI keeps its sequences and only the dangerous subset
(clipboard, titles and fonts asked for, anything that makes the terminal answer) is
dropped. ``--raw`` turns it off. Output to a pipe or a file is never filtered: it is
byte for byte what the command wrote. ``--json-status`` counts what the filters withheld
(:data:`DROPPED_KEY`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from glove.session import FilterMode, TerminalFilter

#: The ``--json-status`` member that counts the sequences the terminal filters withheld.
DROPPED_KEY: Final = "terminal_sequences_dropped"
#: The host descriptors a sandbox's output goes to.
OUTPUT_FDS: Final = (1, 2)


def terminal_filters(*, pty: bool, raw: bool) -> dict[int, TerminalFilter]:
    """A filter for each of stdout and stderr that is a terminal (none with ``raw``)."""
    terminals = [] if raw else [fd for fd in OUTPUT_FDS if _is_terminal(fd)]
    if not terminals:
        return {}
    # Imported only for a terminal: the session package costs glove exec's launch ~30 ms.
    from glove.session import TerminalFilter

    mode: FilterMode = "pty" if pty else "text"
    return {fd: TerminalFilter(mode) for fd in terminals}


def withheld(filters: Mapping[int, TerminalFilter]) -> int:
    """What ``filters`` kept from the terminal (0 without any)."""
    return sum(flt.dropped for flt in filters.values())


def dropped(filters: Mapping[int, TerminalFilter]) -> dict[str, object]:
    """The ``--json-status`` member: what ``filters`` withheld (0 without any)."""
    return {DROPPED_KEY: withheld(filters)}


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
