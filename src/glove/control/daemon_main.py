"""The ``gloved`` console script."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

EXIT_REFUSED = 2
EXIT_INTERNAL = 70


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, verify the runtime directory, run the daemon, exit with its code."""
    from glove.run._options import UsageParser

    parser = UsageParser(
        prog="gloved", description="Glove's per-user control service (owner-only Unix socket)."
    )
    parser.add_argument(
        "--runtime-dir",
        type=Path,
        default=None,
        help="directory for gloved.sock and gloved.lock (default: $XDG_RUNTIME_DIR/glove)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        type=str.lower,
        choices=("debug", "info", "warning", "error"),
        help="logging level (default info)",
    )
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
    except OSError as exc:
        print(f"gloved: refusing to start: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(EXIT_REFUSED)
    except KeyboardInterrupt:
        sys.exit(0)
    except Exception as exc:
        if os.environ.get("GLOVE_DEBUG") == "1":
            raise
        print(f"gloved: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
    sys.exit(code)


if __name__ == "__main__":
    main()
