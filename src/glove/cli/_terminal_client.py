"""The client side of a session's terminal: ``glove attach``'s loop, on one connection.

::

    stdin (raw) ──keys──► detach key? ──no──► session.input (one in flight, coalesced)
    SIGWINCH ──────────────────────────────► session.resize
    session.attach events ──► offsets checked ──► stdout (and the mode tracker)

The local terminal is put in raw mode, so Ctrl-C, Ctrl-Z and every other key are bytes for
the agent; only the detach key (``Ctrl-]`` by default) is ours. What the terminal looks
like is restored in two steps: at attach the modes the agent last set (alternate screen,
cursor visibility, application keys, mouse reporting, bracketed paste) are applied before
the replay; at detach, whatever the agent's output left set is undone (and attributes
reset, the cursor shown) and the saved terminal settings are put back. A client that falls
behind is told so by the events' offsets and ``gap`` events; every byte it writes is at
the offset after the previous one, or it stops with :class:`AttachBroken`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import termios
import tty
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from glove.actors import TaskOwner, race
from glove.container.linux import get_winsize
from glove.control import (
    AsyncClient,
    AsyncStream,
    Attached,
    AttachEvent,
    AttachModes,
    Ended,
    Gap,
    Output,
    RemoteError,
    Role,
)
from glove.errors import GloveError
from glove.session import ModeTracker, TerminalModes

#: The default detach key: Ctrl-] (telnet's, docker's is a sequence).
DEFAULT_DETACH_KEY: Final = b"\x1d"
#: How long a detach waits for the daemon to end the stream before cancelling it.
DETACH_GRACE_S: Final = 2.0
#: Wait after a ``busy`` input before trying again (the agent is not reading).
INPUT_RETRY_S: Final = 0.05
STDIN_READ_BYTES: Final = 4096
ATTACH_TIMEOUT_S: Final = 24 * 3600.0
CALL_TIMEOUT_S: Final = 10.0


class AttachBroken(GloveError):
    """The attach stream said something impossible (an offset out of order)."""


def parse_detach_key(text: str) -> bytes | None:
    """``^]`` (caret notation), one character, or ``none``; the key's byte.

    Raises:
        ValueError: anything else.
    """
    if text.lower() == "none":
        return None
    if len(text) == 2 and text[0] == "^" and 0x3F <= ord(text[1].upper()) <= 0x5F:
        return bytes([ord(text[1].upper()) ^ 0x40])
    if len(text) == 1 and ord(text) < 0x80:
        return text.encode()
    raise ValueError(f"a detach key is ^X, one ASCII character or none, not {text!r}")


@dataclass
class AttachEnd:
    """How an attach ended."""

    reason: str
    offset: int
    session_ended: bool


class TerminalClient:
    """One viewer of one session: the events to ``out``, keys from ``stdin`` (or none)."""

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        *,
        stdin: int | None,
        out: int,
        read_only: bool = False,
        offset: int | None = None,
        tail: int | None = None,
        detach_key: bytes | None = DEFAULT_DETACH_KEY,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.stdin = stdin
        self.out = out
        self.read_only = read_only
        #: Where the replay starts: ``from`` this offset, the last ``tail`` bytes, or all.
        self.start = (offset, tail)
        self.detach_key = detach_key
        self.notice = notice or (lambda _text: None)
        self.viewer: int | None = None
        self.writer = False
        self.offset = 0
        self.tracker = ModeTracker()
        self._keys = bytearray()
        self._keys_ready = asyncio.Event()
        self._detach = asyncio.Event()
        self._saved: list[int | list[bytes | int]] | None = None  # termios.tcgetattr's
        self._tasks = TaskOwner("attach")  # a fresh one per run; SIGWINCH's resizes too

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> AttachEnd:
        """Attach, mirror the terminal until detach or the session's end, restore.

        Raises:
            RemoteError: the daemon refused the attach (no such session, no terminal...).
            ControlError: the connection failed.
            AttachBroken: the stream broke its ordering promise.
        """
        stream = self.client.session_attach(
            self.session_id,
            mode="read" if self.read_only else "write",
            offset=self.start[0],
            tail=self.start[1],
            timeout=ATTACH_TIMEOUT_S,
        )
        async with stream:
            first = self._attached(await anext(stream))
            loop = asyncio.get_running_loop()
            tasks = self._tasks = TaskOwner("attach")
            try:
                self._enter_raw()
                self.tracker = ModeTracker(terminal_modes(first.modes))
                self._write(self.tracker.modes.restore())
                if self.writer:
                    await self._send_size()
                    with contextlib.suppress(ValueError, RuntimeError):
                        loop.add_signal_handler(signal.SIGWINCH, self._on_winch)
                if self.stdin is not None:
                    with contextlib.suppress(OSError, ValueError, PermissionError):
                        loop.add_reader(self.stdin, self._on_stdin)
                    tasks.start(self._send_keys(), name="keys", report=False)
                events = tasks.start(self._events(stream), name="events", report=False)
                await race(events, self._detach.wait())
                if events.done():
                    return events.result()
                return await self._detach_now(events)
            finally:
                await tasks.close()
                if self.stdin is not None:
                    with contextlib.suppress(OSError, ValueError):
                        loop.remove_reader(self.stdin)
                with contextlib.suppress(ValueError, RuntimeError):
                    loop.remove_signal_handler(signal.SIGWINCH)
                self._restore()

    def _attached(self, event: AttachEvent) -> Attached:
        if not isinstance(event, Attached):
            kind = type(event).__struct_config__.tag
            raise AttachBroken(f"the stream began with {kind!r}, not attached")
        self.viewer = event.viewer
        self.writer = event.writer
        self.offset = event.offset
        if not self.writer and not self.read_only:
            self.notice("the session is not running: replaying its transcript")
        return event

    async def _events(self, stream: AsyncStream[AttachEvent]) -> AttachEnd:
        async for event in stream:
            if isinstance(event, Output):
                if event.offset != self.offset:
                    raise AttachBroken(f"data at {event.offset}, expected {self.offset}")
                self.tracker.feed(event.data)
                self._write(event.data)
                self.offset += len(event.data)
            elif isinstance(event, Gap):
                if event.offset != self.offset:
                    raise AttachBroken(f"gap at {event.offset}, expected {self.offset}")
                self.notice(
                    f"{event.until - self.offset} bytes were evicted before they "
                    f"could be shown (offsets {self.offset}..{event.until})"
                )
                self.offset = event.until
            elif isinstance(event, Role):
                self.writer = event.writer
                if not self.writer:
                    self.notice(f"viewer {event.by} took the terminal: now read-only")
            elif isinstance(event, Ended):
                self.offset = event.offset
                reason = event.reason
                with contextlib.suppress(TimeoutError, GloveError):
                    async with asyncio.timeout(DETACH_GRACE_S):
                        async for _ in stream:  # the stream's final frame: a clean end
                            pass
                return AttachEnd(reason, self.offset, reason == "closed")
        return AttachEnd("closed", self.offset, True)

    async def _detach_now(self, events: asyncio.Task[AttachEnd]) -> AttachEnd:
        if self.viewer is not None:
            with contextlib.suppress(GloveError):
                await self.client.session_detach(
                    self.session_id, self.viewer, timeout=CALL_TIMEOUT_S
                )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DETACH_GRACE_S):
                return await asyncio.shield(events)
        return AttachEnd("detached", self.offset, False)

    # -- keys ---------------------------------------------------------------------------------

    def _on_stdin(self) -> None:
        assert self.stdin is not None
        try:
            data = os.read(self.stdin, STDIN_READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # stdin ended: keep showing output, send nothing more
            asyncio.get_running_loop().remove_reader(self.stdin)
            return
        if self.detach_key is not None and self.detach_key in data:
            data = data[: data.index(self.detach_key)]
            self._detach.set()
        if data and self.writer:
            self._keys += data
            self._keys_ready.set()

    async def _send_keys(self) -> None:
        while True:
            await self._keys_ready.wait()
            self._keys_ready.clear()
            while self._keys and self.writer:
                chunk = bytes(self._keys)
                try:
                    await self.client.session_input(
                        self.session_id, raw=chunk, viewer=self.viewer, timeout=CALL_TIMEOUT_S
                    )
                except RemoteError as exc:
                    if exc.code == "busy":
                        await asyncio.sleep(INPUT_RETRY_S)
                        continue
                    if exc.code == "not_writer":
                        self.writer = False
                    self._keys.clear()
                    break
                del self._keys[: len(chunk)]

    def _on_winch(self) -> None:
        if not self._tasks.closed:
            self._tasks.start(self._send_size(), name="size", report=False)

    async def _send_size(self) -> None:
        size = get_winsize(self.stdin) if self.stdin is not None else None
        if size is None or not self.writer or min(size) < 1:
            return
        with contextlib.suppress(GloveError):
            await self.client.session_resize(
                self.session_id, size[0], size[1], viewer=self.viewer, timeout=CALL_TIMEOUT_S
            )

    # -- the local terminal ---------------------------------------------------------------------

    def _enter_raw(self) -> None:
        if self.stdin is None or not os.isatty(self.stdin):
            return
        with contextlib.suppress(termios.error):
            self._saved = termios.tcgetattr(self.stdin)
            tty.setraw(self.stdin, termios.TCSANOW)

    def _restore(self) -> None:
        with contextlib.suppress(OSError):
            self._write(self.tracker.modes.reset())
        if self._saved is not None and self.stdin is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.stdin, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.out, view) :]
            except BlockingIOError:
                select.select([], [self.out], [])  # a non-blocking terminal: wait for room


def terminal_modes(modes: AttachModes) -> TerminalModes:
    """The ``modes`` of an ``attached`` event as the :class:`TerminalModes` that apply them."""
    return TerminalModes(on=modes.on, off=modes.off, keypad=modes.keypad)
