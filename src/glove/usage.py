"""The argparse parser of Glove's own-parsing commands: a usage error names the command and
exits :data:`glove.exits.EXIT_USAGE` (``glove exec``, ``glove run``, ``gloved``)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from glove.exits import EXIT_USAGE


class UsageParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors name the command and exit :data:`EXIT_USAGE`."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and one line naming the problem, then exit :data:`EXIT_USAGE`."""
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")
