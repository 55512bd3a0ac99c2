"""The ``gloved`` console script."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

EXIT_REFUSED = 2


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, verify the runtime directory, run the daemon, exit with its code."""
    parser = argparse.ArgumentParser(
        prog="gloved", description="Glove's per-user control service (owner-only Unix socket)."
    )
    parser.add_argument(
        "--runtime-dir",
        type=Path,
        default=None,
        help="directory for gloved.sock and gloved.lock (default: $XDG_RUNTIME_DIR/glove)",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="gloved: %(levelname)s %(name)s: %(message)s"
    )
    from glove.control import ControlError, prepare_runtime_dir, run_daemon

    try:
        paths = prepare_runtime_dir(args.runtime_dir)
        code = run_daemon(paths)
    except ControlError as exc:
        print(f"gloved: refusing to start: {exc}", file=sys.stderr)
        sys.exit(EXIT_REFUSED)
    sys.exit(code)


if __name__ == "__main__":
    main()
