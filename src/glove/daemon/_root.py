"""``gloved``: the root supervision tree and the process lifecycle around it.

::

    gloved (rest_for_one, intensity 0; the service manager restarts the process)
    ├─ launcher   LauncherActor (gloved's launcher process: every sandbox is cloned there)
    ├─ loop-lag   LoopLagMonitor
    ├─ ...        the composition's children (the session service: journals, sessions,
    │             registry; without one, an empty ``sessions`` supervisor)
    └─ control    ControlServer (owner-only Unix socket)

The composition (:class:`Composition`) is what the daemon runs: its children start before
the control socket is bound, so ``READY=1`` (sent once every root child has started) comes
after journal recovery, and no request is accepted before the state it reads exists.

The process holds an exclusive lock in its runtime directory for its whole life, so a
second instance refuses to start (``gloved`` takes it before it composes anything: a refused
start claims no cgroup, opens no journal and starts no thread, and exits at once). SIGTERM
and SIGINT stop the tree in reverse start order and the process exits 0; a child failure
(one strike at the root) exits 1.

Under a notifying service manager (systemd ``Type=notify``; ``glove.control.Notifier``) the
tree gets one more child, ``notify``, which pings the watchdog from this event loop and
keeps ``STATUS=`` current; ``READY=1`` is sent once every root child has started (the
control socket is bound), and ``STOPPING=1`` when a stop signal arrives.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import resource
import signal
from typing import TYPE_CHECKING, Final

from glove._version import __version__
from glove.actors import (
    ChildFailed,
    ChildSpec,
    LoopLagMonitor,
    Supervisor,
    race,
    snapshot,
    start_node,
)
from glove.control import (
    BuiltinMethods,
    CapabilitiesProvider,
    Composition,
    ControlServer,
    MethodRegistry,
    Notifier,
    NotifyError,
    RuntimePaths,
    ServiceNotifier,
    acquire_lock,
)
from glove.daemon._launcher import LauncherActor
from glove.exits import EXIT_GLOVED_FAILED, EXIT_OK

if TYPE_CHECKING:
    from glove.container.linux import LauncherHandle

_log = logging.getLogger(__name__)

#: gloved's soft limit on open files, raised at start (never above the hard limit):
#: connections, lingering refusals and every session's descriptors must fit, and a
#: service manager's default soft limit is 1024.
FD_SOFT_LIMIT: Final = 8192


def build_root(
    paths: RuntimePaths,
    notifier: Notifier | None = None,
    *,
    registry: MethodRegistry | None = None,
    capabilities: CapabilitiesProvider | None = None,
    composition: Composition | None = None,
    launcher: LauncherHandle | None = None,
) -> Supervisor:
    """Build (not start) the daemon's root supervision tree.

    ``launcher`` is the launcher process ``gloved`` forked at start: its actor is the first
    child, and sandboxes are cloned there (without one they are cloned in this process).

    ``registry`` carries the composition's methods (sessions, plans, receipts) and its
    lifecycle predicate; the built-in ``health``, ``diag.tree`` and ``capabilities`` are
    added to it here, ``capabilities`` answering from ``capabilities`` (or the
    composition's). ``composition`` adds its children and methods.

    Raises:
        RegistryError: ``registry`` already has one of the built-in methods.
    """
    root: Supervisor
    registry = registry if registry is not None else MethodRegistry()
    if composition is not None:
        composition.register(registry)
        registry.set_lifecycle_predicate(composition.operational)
        capabilities = capabilities or composition.capabilities
    BuiltinMethods(lambda: snapshot(root), capabilities=capabilities).register(registry)
    middle = list(composition.children) if composition is not None else []
    if not middle:
        middle = [
            ChildSpec(
                "sessions", lambda: Supervisor("sessions", strategy="one_for_one", intensity=0)
            )
        ]
    children = [
        *([ChildSpec("launcher", lambda: LauncherActor(launcher))] if launcher is not None else []),
        ChildSpec("loop-lag", LoopLagMonitor),
        *middle,
        ChildSpec("control", lambda: ControlServer(paths, registry)),
    ]
    # -- service manager hook: last, so its first ping follows everything else starting.
    if notifier is not None and notifier.enabled:
        children.append(
            ChildSpec("notify", lambda: ServiceNotifier(notifier, status=lambda: _status(root)))
        )
    root = Supervisor("gloved", children, strategy="rest_for_one", intensity=0)
    return root


# -- service manager hook (glove.control.Notifier) ----------------------------------------------


def _status(root: Supervisor) -> str:
    """The ``STATUS=`` line: how many sessions run."""
    nodes = {name: node for name, node, _alive in root.children()}
    sessions = nodes.get("sessions")
    running = len(sessions.children()) if isinstance(sessions, Supervisor) else 0
    return f"{running} session{'' if running == 1 else 's'} running"


async def _all_started(root: Supervisor) -> None:
    """Wait until every child of the root has finished starting (``on_start`` returned)."""
    await root.started.wait()
    for _name, node, _alive in root.children():
        await node.started.wait()


async def _announce_ready(notifier: Notifier, root: Supervisor) -> None:
    """``READY=1`` with the first status line (every root child, recovery included, is up)."""
    try:
        await notifier.ready(status=_status(root))
    except NotifyError as exc:
        _log.error("%s: the service manager will not see gloved as started", exc)


def _failure_text(exc: BaseException | None, *, started: bool) -> str:
    """One line for the operator: which child failed, and the innermost cause's words."""
    path, cause = "gloved", exc
    while isinstance(cause, ChildFailed):
        path, cause = cause.path, cause.cause
    what = f"{type(cause).__name__}: {cause}" if cause is not None else "it exited"
    if not started:
        return f"gloved: refusing to start: {path} could not start: {what}"
    return f"gloved: {path} failed, stopping: {what}"


def _stop_signalled(root: Supervisor, notifier: Notifier) -> None:
    notifier.stopping(status="stopping")
    root.stop()


# -------------------------------------------------------------------------------------------------


async def serve(
    paths: RuntimePaths,
    notifier: Notifier | None = None,
    composition: Composition | None = None,
    *,
    lock_fd: int | None = None,
    launcher: LauncherHandle | None = None,
) -> int:
    """Run the daemon until SIGTERM/SIGINT (exit 0) or a root failure (exit 1).

    ``notifier`` defaults to the one the service manager's environment describes.
    ``lock_fd`` is the single-instance lock when the caller already took it (``gloved``
    does, before it composes anything); it is taken here otherwise. Either way it is
    released when this returns.

    Raises:
        DaemonAlreadyRunning: another instance holds the lock.
        NotifyError: the service manager's NOTIFY_SOCKET or WATCHDOG_* are malformed.
    """
    if lock_fd is None:
        lock_fd = acquire_lock(paths)
    try:
        notifier = Notifier.from_environ() if notifier is None else notifier
    except BaseException:
        os.close(lock_fd)
        raise
    try:
        root = build_root(paths, notifier, composition=composition, launcher=launcher)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, _stop_signalled, root, notifier)
        task = start_node(root, name="gloved")
        _, started = await race(task, _all_started(root))
        came_up = started.done() and not started.cancelled()
        if came_up:
            _log.info("gloved %s listening on %s", __version__, paths.socket)
            await _announce_ready(notifier, root)
        await asyncio.wait({task})
        if task.cancelled():
            _log.info("gloved stopped")
            return EXIT_OK
        _log.error("%s", _failure_text(task.exception(), started=came_up))
        return EXIT_GLOVED_FAILED
    finally:
        notifier.close()
        os.close(lock_fd)


def run_daemon(
    paths: RuntimePaths,
    composition: Composition | None = None,
    *,
    lock_fd: int | None = None,
    launcher: LauncherHandle | None = None,
) -> int:
    """Run :func:`serve` in a fresh event loop with the faulthandler backstop armed.

    SIGUSR1 dumps every thread's stack; so does the SIGABRT a service manager's watchdog
    sends, so the journal shows where a wedged loop was stuck.

    Raises:
        DaemonAlreadyRunning: another instance holds the lock (``lock_fd`` not given).
        NotifyError: the service manager's environment is malformed.
    """
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    raise_fd_limit()
    return asyncio.run(serve(paths, composition=composition, lock_fd=lock_fd, launcher=launcher))


def raise_fd_limit(target: int = FD_SOFT_LIMIT) -> int:
    """Raise the soft RLIMIT_NOFILE to ``target`` (capped by the hard limit); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = target if hard == resource.RLIM_INFINITY else min(target, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return want
    return soft
