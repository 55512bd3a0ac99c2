"""``gloved``: the root supervision tree and the process lifecycle around it.

::

    gloved (rest_for_one, intensity 0; the service manager restarts the process)
    ├─ loop-lag   LoopLagMonitor
    ├─ sessions   Supervisor (one_for_one; sessions are temporary, never restarted)
    └─ control    ControlServer (owner-only Unix socket)

The process holds an exclusive lock in its runtime directory for its whole life, so a
second instance refuses to start. SIGTERM and SIGINT stop the tree in reverse start order
and the process exits 0; a child failure (one strike at the root) exits 1.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import signal
import time
from typing import Any, Final

from glove._version import __version__
from glove.actors import ChildSpec, LoopLagMonitor, Supervisor, snapshot
from glove.control._paths import RuntimePaths, acquire_lock
from glove.control._server import ControlServer, Method
from glove.protocol import Health

_log = logging.getLogger(__name__)

EXIT_OK: Final = 0
EXIT_CHILD_FAILED: Final = 1


def build_root(paths: RuntimePaths) -> Supervisor:
    """Build (not start) the daemon's root supervision tree."""
    started = time.monotonic()
    root: Supervisor

    async def health(_params: dict[str, Any]) -> Health:
        return Health(
            status="ok",
            version=__version__,
            pid=os.getpid(),
            uptime_s=round(time.monotonic() - started, 3),
        )

    async def diag_tree(_params: dict[str, Any]) -> object:
        return snapshot(root)

    methods: dict[str, Method] = {"health": health, "diag.tree": diag_tree}
    root = Supervisor(
        "gloved",
        [
            ChildSpec("loop-lag", LoopLagMonitor),
            ChildSpec(
                "sessions", lambda: Supervisor("sessions", strategy="one_for_one", intensity=0)
            ),
            ChildSpec("control", lambda: ControlServer(paths, methods)),
        ],
        strategy="rest_for_one",
        intensity=0,
    )
    return root


async def serve(paths: RuntimePaths) -> int:
    """Run the daemon until SIGTERM/SIGINT (exit 0) or a root failure (exit 1).

    Raises:
        DaemonAlreadyRunning: another instance holds the lock.
    """
    lock_fd = acquire_lock(paths)
    try:
        root = build_root(paths)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, root.stop)
        task = loop.create_task(root.run(), name="gloved")
        await root.started.wait()
        _log.info("gloved %s listening on %s", __version__, paths.socket)
        await asyncio.wait({task})
        if task.cancelled():
            _log.info("gloved stopped")
            return EXIT_OK
        _log.error("gloved: root failed: %r", task.exception())
        return EXIT_CHILD_FAILED
    finally:
        os.close(lock_fd)


def run_daemon(paths: RuntimePaths) -> int:
    """Run :func:`serve` in a fresh event loop with the faulthandler backstop armed."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return asyncio.run(serve(paths))
