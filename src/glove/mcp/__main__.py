"""``python -m glove.mcp mcp serve --config FILE``: the mediator without the whole CLI."""

from __future__ import annotations

import sys

from glove.mcp.cli import main as mcp_main


def main() -> None:
    """Run ``glove mcp ...`` on its own (the first argument, ``mcp``, is the group's name)."""
    argv = sys.argv[1:]
    sys.exit(mcp_main(argv[1:] if argv[:1] == ["mcp"] else argv))


if __name__ == "__main__":
    main()
