"""The ``launcher`` actor: gloved's watch on its launcher process.

gloved forks the launcher (:func:`glove.container.linux.fork_launcher`) in ``main`` before
any thread exists; this actor, the root tree's first child, takes the handle, waits for the
launcher's hello, installs the client so every session's sandbox is cloned there, and then
watches it. When the launcher ends or its channel breaks, the actor crashes with
:class:`~glove.container.linux.LauncherGone`: one strike at the root, gloved exits nonzero
(fail closed) and the service manager restarts both. Stopping it (gloved's stop) closes the
channel; the launcher exits and is reaped here.
"""

from __future__ import annotations

import logging

from glove.actors import Actor
from glove.container.linux import (
    LauncherClient,
    LauncherHandle,
    install_launcher,
)

_log = logging.getLogger(__name__)


class LauncherActor(Actor):
    """Owns gloved's side of the launcher process (see the module docstring)."""

    def __init__(self, handle: LauncherHandle, name: str = "launcher") -> None:
        """Take ownership of ``handle``."""
        super().__init__(name, mailbox_size=1)
        self._handle = handle
        self._client: LauncherClient | None = None

    @property
    def os_pid(self) -> int:
        """The launcher's process id (``glove diag tree`` shows it)."""
        return self._handle.pid

    async def on_start(self) -> None:
        """Wait for the launcher's hello, install it, and start watching it.

        Raises:
            LauncherGone: the launcher did not start.
        """
        client = LauncherClient(self._handle)
        self._client = client
        await client.start()
        install_launcher(client)
        _log.info("launcher pid %d: every sandbox is cloned there", client.pid)
        self.spawn_task(self._watch(client), name="watch")

    async def _watch(self, client: LauncherClient) -> None:
        await client.ended  # raises LauncherGone: this actor crashes, gloved fails closed

    async def on_stop(self) -> None:
        """Close the channel and reap the launcher (its sandboxes end with it)."""
        install_launcher(None)
        client = self._client
        if client is not None:
            client.close()
            code = await self.run_blocking(client.reap)
            _log.info("launcher pid %d exited (%s)", client.pid, code)
