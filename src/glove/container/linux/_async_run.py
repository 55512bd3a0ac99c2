"""``run_async``: a sandbox whose output goes to host descriptors, from the event loop.

The library's asyncio entry point (``glove run`` uses it): an :class:`AsyncSandbox` whose
``on_output`` writes to host fds without blocking the loop (:class:`FdWriter`), the host
terminal in raw mode with its window size followed, in PTY mode. No thread is held while
the sandbox runs: the clone runs in an executor, everything after on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import termios
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor

from glove.container._filter import OutputFilter
from glove.container._monitor import FLUSH_TIMEOUT_S, MAX_PENDING_OUTPUT_BYTES, SINK_WRITE_BYTES
from glove.container._result import SandboxResult
from glove.container._spec import SandboxSpec
from glove.container.linux._async import AsyncSandbox
from glove.container.linux._events import Stream, write_pending
from glove.container.linux._pty import RawTerminal, get_winsize, set_winsize

__all__ = [  # the constants live in the monitor core; these names stay importable here
    "MAX_PENDING_OUTPUT_BYTES",
    "SINK_WRITE_BYTES",
    "FdWriter",
    "raw_terminal",
    "run_async",
]


class FdWriter:
    """Writes sandbox output to host fds from the loop, never blocking it.

    A pollable fd (pipe, socket, terminal) is written when the loop says it is writable;
    past :data:`MAX_PENDING_OUTPUT_BYTES` queued, :meth:`write` returns an awaitable and the
    sandbox stops reading that stream until it is drained. A regular file or a device the
    loop cannot poll is written directly. A reader that went away gets nothing more (the
    output is still counted). Output bound for an fd in ``filters`` passes through its
    filter first (a terminal's: :class:`glove.session.TerminalFilter`).
    """

    def __init__(
        self, sinks: dict[Stream, int], filters: Mapping[int, OutputFilter] | None = None
    ) -> None:
        """``sinks`` maps each stream to the host fd it goes to; ``filters`` an fd to the
        filter its output passes."""
        self._loop = asyncio.get_running_loop()
        self._sinks = sinks
        self._filters = dict(filters or {})
        self._pending: dict[int, bytearray] = {}
        self._watching: set[int] = set()
        self._direct: set[int] = set()
        self._dead: set[int] = set()
        self._drained: dict[int, asyncio.Future[None]] = {}
        self._idle: asyncio.Future[None] | None = None

    def write(self, stream: Stream, data: bytes) -> asyncio.Future[None] | None:
        """Queue ``data`` for the stream's fd; an awaitable when the queue is full."""
        fd = self._sinks[stream]
        flt = self._filters.get(fd)
        if flt is not None:
            data = flt.feed(data)
        return self._enqueue(fd, data)

    def _enqueue(self, fd: int, data: bytes) -> asyncio.Future[None] | None:
        if fd in self._dead or not data:
            return None
        if fd in self._direct:
            self._write_all(fd, data)
            return None
        pending = self._pending.setdefault(fd, bytearray())
        pending += data
        if fd not in self._watching:
            try:
                self._loop.add_writer(fd, self._on_writable, fd)
            except (ValueError, OSError, PermissionError):
                self._direct.add(fd)  # epoll refuses regular files: their writes do not stall
                self._write_all(fd, bytes(pending))
                pending.clear()
                return None
            self._watching.add(fd)
        if len(pending) >= MAX_PENDING_OUTPUT_BYTES:
            future = self._drained.get(fd)
            if future is None or future.done():
                future = self._loop.create_future()
                self._drained[fd] = future
            return future
        return None

    def _write_all(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue  # a non-pollable fd in non-blocking mode: retry
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.EBADF, errno.EIO):
                    self._dead.add(fd)
                    return
                raise

    def _on_writable(self, fd: int) -> None:
        pending = self._pending.get(fd, bytearray())
        alive = write_pending(fd, pending)
        if alive is None:
            return
        if not alive:
            self._dead.add(fd)
        if not pending:
            self._loop.remove_writer(fd)
            self._watching.discard(fd)
            if not self._watching and self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
        if len(pending) < MAX_PENDING_OUTPUT_BYTES:
            future = self._drained.pop(fd, None)
            if future is not None and not future.done():
                future.set_result(None)

    async def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Write what the filters still hold, then wait (bounded) until everything queued
        is written; drop the rest after."""
        for fd, flt in self._filters.items():
            self._enqueue(fd, flt.close())
        if self._watching:
            self._idle = self._loop.create_future()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._idle
        for fd in list(self._watching):
            self._loop.remove_writer(fd)
        self._watching.clear()
        for future in self._drained.values():
            if not future.done():
                future.set_result(None)


@contextlib.contextmanager
def raw_terminal(fd: int | None) -> Iterator[RawTerminal]:
    """The host terminal in raw mode for the block (restored on every exit)."""
    terminal = RawTerminal(fd)
    terminal.enter()
    try:
        yield terminal
    finally:
        terminal.leave(termios.TCSAFLUSH)


async def run_async(
    spec: SandboxSpec,
    *,
    stdin: int | None = 0,
    stdout: int = 1,
    stderr: int = 2,
    executor: Executor | None = None,
) -> SandboxResult:
    """Run ``spec`` from asyncio, its output to ``stdout``/``stderr``; return its result.

    No thread is held while it runs. Cancelling the awaiting task kills the whole sandbox,
    waits for it to end (bounded), then re-raises the cancellation. ``stdin=None`` gives
    the command an empty stdin.

    Raises:
        LimitRefused: a requested limit cannot be enforced as asked.
        SpecError: the spec is invalid on this host.
        UnsupportedPlatform: the machine lacks seccomp or namespaces.
    """
    loop = asyncio.get_running_loop()
    writer = FdWriter({"stdout": stdout, "stderr": stderr, "pty": stdout})
    box = AsyncSandbox(spec, on_output=writer.write, stdin=stdin, winsize_from=stdin)
    winch = False
    try:
        with raw_terminal(stdin if spec.pty else None):
            await box.start(executor)
            master = box.master
            if master is not None and stdin is not None and os.isatty(stdin):

                def follow_size() -> None:
                    size = get_winsize(stdin)
                    if size is not None and box.master is not None:
                        set_winsize(box.master, size)

                with contextlib.suppress(ValueError, RuntimeError):
                    loop.add_signal_handler(signal.SIGWINCH, follow_size)
                    winch = True
            try:
                return await box.wait()
            except asyncio.CancelledError:
                await box.stop()
                raise
    finally:
        if winch:
            loop.remove_signal_handler(signal.SIGWINCH)
        box.close()
        await writer.flush()
