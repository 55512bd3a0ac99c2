"""Start stdio upstreams before the mediator has finished importing itself.

An MCP client launches ``glove mcp serve`` and waits for its first answer; the upstream's
own start-up (an interpreter, its SDK) is usually the long part. ``glove mcp serve`` on
stdio therefore spawns each stdio upstream as soon as it has read its configuration, with
the same environment, directory and process group the upstream actor would give it, and
the actor later **adopts** the running process (:class:`AdoptedProcess`) instead of
spawning one: Glove's own imports and set-up overlap the upstream's start-up.

Ownership: :func:`prestart` returns the processes; whoever holds the dict owns them until an
actor adopts one (it pops it). :func:`kill_all` ends what was never adopted. A program
that cannot be started is simply not prestarted: the actor then tries, and reports the
error, as without this step. Needs ``os.pidfd_open`` (Linux 5.3+) to watch an adopted
process's exit from the event loop; without it nothing is prestarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from typing import Final

from glove.mcp._config import McpConfig, UpstreamConfig, child_environment

READ_LIMIT_BYTES: Final = 256 * 1024


def prestart(config: McpConfig) -> dict[str, subprocess.Popen[bytes]]:
    """Spawn every stdio upstream of ``config`` now; return them by upstream id."""
    if not hasattr(os, "pidfd_open"):
        return {}
    started: dict[str, subprocess.Popen[bytes]] = {}
    parent = dict(os.environ)
    for upstream_id, upstream in config.upstreams.items():
        if upstream.url is not None or not upstream.command:
            continue
        try:
            started[upstream_id] = spawn(upstream, parent)
        except OSError:
            continue  # the actor will try again and say why
    return started


def spawn(upstream: UpstreamConfig, parent: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start one upstream as the actor would: scrubbed environment, own process group.

    Raises:
        OSError: the program cannot be started.
    """
    return subprocess.Popen(
        upstream.command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(upstream, parent),
        cwd=upstream.cwd,
        start_new_session=True,
    )


def kill_all(started: dict[str, subprocess.Popen[bytes]]) -> None:
    """Kill and reap every process nobody adopted."""
    for proc in started.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
    started.clear()


class AdoptedProcess:
    """An already running :class:`subprocess.Popen` seen through asyncio streams.

    Offers what the stdio transport uses of :class:`asyncio.subprocess.Process`: ``stdin``
    (a writer), ``stdout`` and ``stderr`` (readers), ``pid``, ``returncode`` and ``wait()``.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self.pid = proc.pid
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._exited: asyncio.Future[int] | None = None
        self._pidfd = -1

    async def attach(self) -> None:
        """Connect the pipes and the exit watch to the running loop.

        Raises:
            OSError: the process's descriptors cannot be watched.
        """
        loop = asyncio.get_running_loop()
        proc = self._proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        self._exited = loop.create_future()
        self._pidfd = os.pidfd_open(proc.pid)
        loop.add_reader(self._pidfd, self._on_exit)
        readers = []
        for pipe in (proc.stdout, proc.stderr):
            reader = asyncio.StreamReader(limit=READ_LIMIT_BYTES)
            await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r), pipe)  # type: ignore[misc]
            readers.append(reader)
        self.stdout, self.stderr = readers
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), proc.stdin
        )
        self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)

    def _on_exit(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        code = self._proc.wait()
        if self._exited is not None and not self._exited.done():
            self._exited.set_result(code)

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has exited (and was reaped)."""
        return self._proc.returncode

    async def wait(self) -> int:
        """Wait for the process to exit; return its status."""
        assert self._exited is not None
        return await asyncio.shield(self._exited)
