"""Usage errors, one vocabulary: one line naming the command and the problem (with a "did you
mean" when a name was mistyped), exit :data:`glove.exits.EXIT_USAGE`.

:class:`UsageParser` is the argparse parser of Glove's own-parsing commands (``glove exec``,
``glove run``, ``gloved``); :func:`one_line_click_errors` makes the typer commands' usage errors
the same one line.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

from glove.exits import EXIT_USAGE

_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest of ``choices`` to ``word``, or ``""``."""
    import difflib  # only on an error: not on the launch path of exec/run/mcp serve

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class UsageParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line naming the command, exit 64."""

    def error(self, message: str) -> NoReturn:
        """Print one line naming the problem (and the option meant), exit :data:`EXIT_USAGE`."""
        found = _UNRECOGNIZED.fullmatch(message)
        if found is not None:
            first = found.group(1).split()[0]
            options = [o for action in self._actions for o in action.option_strings]
            message += did_you_mean(first.split("=", 1)[0], options)
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _show_one_line(self: Any, file: Any = None) -> None:
    ctx = getattr(self, "ctx", None)
    names = []
    at = ctx
    while at is not None and at.parent is not None:  # the root is "glove" however invoked
        names.append(at.info_name)
        at = at.parent
    prog = " ".join(["glove", *reversed(names)])
    message = " ".join(self.format_message().split())
    help_hint = f" (see {prog} --help)" if ctx is not None else ""
    (file or sys.stderr).write(f"{prog}: {message}{help_hint}\n")


def one_line_click_errors(code: int = EXIT_USAGE) -> None:
    """Make click's usage errors one line and exit ``code`` (64), like argparse's.

    Typer ships its own copy of click (``typer._click``); both are set.
    """
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        module.UsageError.exit_code = code
        module.UsageError.show = _show_one_line
