"""The ``gloved`` console script: arguments, the runtime directory, the composition, the exit.

This is gloved's composition root: the only place that knows both the control service
(:mod:`glove.control`) and what it serves (the session service, :mod:`glove.session`), and
puts them together in the root tree (:func:`glove.daemon.build_root`).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from glove.exits import EXIT_GLOVED_REFUSED, EXIT_INTERNAL

if TYPE_CHECKING:
    from glove.container.linux import LauncherHandle
    from glove.control import Composition


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, verify the runtime directory, run the daemon, exit with its code."""
    from glove.usage import UsageParser

    parser = UsageParser(
        prog="gloved", description="Glove's per-user control service (owner-only Unix socket)."
    )
    parser.add_argument(
        "--runtime-dir",
        type=Path,
        default=None,
        help="directory for gloved.sock and gloved.lock (default: the one `glove doctor` names)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="gloved.toml (default: $XDG_CONFIG_HOME/glove/gloved.toml, made by `glove setup`)",
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
    from glove.control import ControlError, acquire_lock, prepare_runtime_dir
    from glove.daemon._root import run_daemon
    from glove.errors import GloveError

    try:
        paths = prepare_runtime_dir(args.runtime_dir)
        # The lock first: a second gloved must refuse before it claims cgroups or reads
        # the keys, and exit at once (nothing it started can keep it alive).
        lock_fd = acquire_lock(paths)
        # The launcher next, while this process has one thread: every sandbox is cloned
        # there (clone3, single-threaded); it keeps none of the descriptors opened so far.
        launcher = _fork_launcher()
        composition = _compose(args.config, paths.directory, launcher)
        code = run_daemon(paths, composition, lock_fd=lock_fd, launcher=launcher)
    except (ControlError, GloveError) as exc:
        print(f"gloved: refusing to start: {exc}", file=sys.stderr)
        sys.exit(EXIT_GLOVED_REFUSED)
    except OSError as exc:
        print(f"gloved: refusing to start: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(EXIT_GLOVED_REFUSED)
    except KeyboardInterrupt:
        sys.exit(0)
    except Exception as exc:
        if os.environ.get("GLOVE_DEBUG") == "1":
            raise
        print(f"gloved: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
    sys.exit(code)


def _fork_launcher() -> LauncherHandle | None:
    """Fork the launcher process (Linux; None elsewhere: the sandbox backend launches).

    Raises:
        SandboxSetupError: it could not be forked.
    """
    if not sys.platform.startswith("linux"):
        return None
    from glove.container.linux import forbid_in_process_launch, fork_launcher
    from glove.session import load_projections

    handle = fork_launcher(load_projections)
    forbid_in_process_launch()  # from here every sandbox of gloved is cloned there
    return handle


def _claim_cgroups(launcher: LauncherHandle | None) -> None:
    """Claim this daemon's cgroup v2 site now (move it and its launcher into its leaf,
    enable controllers) so launches only make groups; a site that cannot be claimed is
    logged, never fatal (the limits then use the next mechanism down, as each launch's plan
    says)."""
    from glove.container.errors import SandboxError
    from glove.container.linux import claim_cgroup_v2

    log = logging.getLogger("gloved")
    try:
        log.info("%s", claim_cgroup_v2(also=(launcher.pid,) if launcher is not None else ()))
    except (SandboxError, OSError) as exc:
        log.warning("cgroup v2: not claimed: %s", exc)


def _compose(
    config: Path | None, runtime_dir: Path, launcher: LauncherHandle | None = None
) -> Composition:
    """The session service this daemon runs (not operational without ``glove setup``).

    Raises:
        GloveError: gloved.toml or the keys exist but are invalid or unsafe.
    """
    import dataclasses

    from glove.config import glove_paths
    from glove.session import load_service

    paths = dataclasses.replace(glove_paths(), runtime_dir=runtime_dir)
    service = load_service(paths, config)
    if service.operational:
        _claim_cgroups(launcher)
    if service.reason is not None:
        restart = ", then restart gloved" if "glove setup" in service.reason else ""
        logging.getLogger("gloved").warning("sessions are off: %s%s", service.reason, restart)
    return service.composition()
