"""The stdio transport of an upstream: a host subprocess speaking newline-delimited JSON-RPC.

The process is started with a scrubbed environment, in its own process group. Its stdout
is cut into bounded frames (:class:`~glove.mcp._framing.LineSplitter`), each handed to
the actor before the next is read (the actor may make the reader wait for an audit
record); its stderr is drained into a bounded tail so a server that floods it never
stalls. End of file, an oversized frame, or the process exiting is a transport failure
(:class:`~glove.mcp.errors.UpstreamTransportError`), raised out of the reading task so
the owning actor crashes. At end of file the reader first waits (boundedly) for the
process to exit and its stderr to end, so the failure names the exit status and the actor
reports the server's last stderr lines whole.

What a non-JSON line on stdout means is the actor's call (``stdout = "lenient"`` drops
it, ``"strict"`` fails): this module only delivers lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

from glove.mcp._config import UpstreamConfig, child_environment
from glove.mcp._framing import OVERSIZED, LineSplitter
from glove.mcp.errors import UpstreamTransportError

READ_CHUNK_BYTES: Final = 256 * 1024
STDERR_TAIL_BYTES: Final = 8 * 1024
STOP_GRACE_S: Final = 2.0
#: After end of file on stdout: how long to wait for the exit, then for stderr's end.
EXIT_SETTLE_S: Final = 2.0

Spawn = Callable[[Coroutine[Any, Any, None], str], object]
Deliver = Callable[[bytes], Awaitable[None] | None]
Discard = Callable[[bytes, str], Awaitable[None] | None]


class StdioTransport:
    """Owns one upstream server process and its pipes."""

    def __init__(
        self,
        upstream_id: str,
        config: UpstreamConfig,
        max_frame_bytes: int,
        *,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.upstream_id = upstream_id
        self.config = config
        self._max_frame_bytes = max_frame_bytes
        self._prestarted = process
        self._proc: asyncio.subprocess.Process | AdoptedProcess | None = None
        self._stderr_tail: deque[bytes] = deque()
        self._stderr_bytes = 0
        self._stderr_ended = asyncio.Event()
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    async def open(self, deliver: Deliver, spawn: Spawn, discard: Discard) -> None:
        """Start the process and its readers (owned by ``spawn``'s actor); every stdout
        line goes to ``deliver`` (``discard`` is unused: a line's meaning is the actor's).

        Raises:
            UpstreamTransportError: the program cannot be started.
        """
        if self._prestarted is not None:
            # Started before the mediator finished importing (see _prestart): adopt it.
            adopted = AdoptedProcess(self._prestarted)
            self._proc = adopted
            self._prestarted = None
            await adopted.attach()
            spawn(self._read_stdout(deliver), "stdout")
            spawn(self._drain_stderr(), "stderr")
            return
        env = child_environment(self.config, dict(os.environ))
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.config.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=self.config.cwd,
                start_new_session=True,
                limit=READ_CHUNK_BYTES,
            )
        except OSError as exc:
            raise UpstreamTransportError(
                self.upstream_id, f"cannot start {self.config.command[0]!r}: {exc.strerror}"
            ) from exc
        spawn(self._read_stdout(deliver), "stdout")
        spawn(self._drain_stderr(), "stderr")

    def send(self, frame: bytes, *, expects_reply: bool = False) -> None:
        """Write one frame to the server's stdin (buffered by the transport)."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdin.is_closing():
            return
        proc.stdin.write(frame)

    async def close(self) -> None:
        """Close stdin, then SIGTERM and SIGKILL the process group, each after a grace."""
        try:
            await self._end_process()
        finally:
            # The process is gone (or was killed); close the pipes' transports too, even
            # when a reader stopped before end of file (asyncio closes them only on EOF).
            transport = getattr(self._proc, "_transport", None)
            if isinstance(transport, asyncio.SubprocessTransport):
                transport.close()

    async def _end_process(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
            # Always awaited, even when the server already exited: a write that met a closed
            # pipe leaves a BrokenPipeError on the stdin close future, which asyncio would
            # otherwise report on stderr as "Future exception was never retrieved".
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(STOP_GRACE_S):
                    await proc.stdin.wait_closed()
        if proc.returncode is not None:
            return
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_GRACE_S):
                    await proc.wait()
                return

    def force_kill(self) -> None:
        """SIGKILL the server's process group at once."""
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)

    @property
    def pid(self) -> int | None:
        """The server's process id once started."""
        return None if self._proc is None else self._proc.pid

    @property
    def stderr_tail(self) -> bytes:
        """The last bytes the server wrote on stderr (bounded), for diagnostics."""
        return b"".join(self._stderr_tail)

    async def _read_stdout(self, deliver: Deliver) -> None:
        proc = self._proc
        assert proc is not None
        assert proc.stdout is not None
        splitter = LineSplitter(self._max_frame_bytes)
        while True:
            chunk = await proc.stdout.read(READ_CHUNK_BYTES)
            if not chunk:
                status = await self._settle()
                raise UpstreamTransportError(self.upstream_id, f"closed its stdout ({status})")
            for frame in splitter.feed(chunk):
                if frame is OVERSIZED:
                    raise UpstreamTransportError(
                        self.upstream_id, f"wrote a frame over {self._max_frame_bytes} bytes"
                    )
                assert isinstance(frame, bytes)
                pending = deliver(frame)
                if pending is not None:
                    await pending

    async def _settle(self) -> str:
        """After end of file on stdout: wait a moment for the exit and the end of stderr (a
        server that closed stdout but runs on, or a child holding stderr, costs at most
        twice :data:`EXIT_SETTLE_S`); say how the process ended."""
        proc = self._proc
        assert proc is not None
        try:
            async with asyncio.timeout(EXIT_SETTLE_S):
                code = await proc.wait()
        except TimeoutError:
            return "still running"
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EXIT_SETTLE_S):
                await self._stderr_ended.wait()
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"killed by {name}"
        return f"exit status {code}"

    async def _drain_stderr(self) -> None:
        proc = self._proc
        assert proc is not None
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(READ_CHUNK_BYTES):
            # Keep only a bounded tail: a server that floods stderr must not stall on a
            # full pipe nor grow Glove's memory.
            self._stderr_tail.append(chunk[-STDERR_TAIL_BYTES:])
            self._stderr_bytes += len(self._stderr_tail[-1])
            while self._stderr_bytes > STDERR_TAIL_BYTES and len(self._stderr_tail) > 1:
                self._stderr_bytes -= len(self._stderr_tail.popleft())
        self._stderr_ended.set()


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
            reader = asyncio.StreamReader(limit=READ_CHUNK_BYTES)
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
