"""The ``pty-drain`` actor: a PTY session's transcript, input and window size.

The sandbox reads the PTY master on the loop (counting every byte against the output
limit) and hands each chunk to :meth:`PtyDrain.write`, which, in this order:

1. feeds every raw byte to the observers (the seam of the ``evaluator`` actor of a
   refinement session: it sees each byte before the ring can evict it; an observer may
   return an awaitable, and the sandbox then pauses reading until it completes) and to
   the mode tracker and both digests;
2. appends it to the transcript ring (a page-cache write);
3. wakes the viewers, which read it at their own offsets and pace.

Nothing waits for a viewer. The one thing that can pause the agent is the drain itself: at
most a *window* of bytes may be written past the last durable meta record, so when a flush
(``fdatasync``, in the drain's own executor, group-committed every
:data:`FLUSH_INTERVAL_S`) falls behind, :meth:`write` returns an awaitable and the sandbox
stops reading the master until the flush has caught up; the agent then blocks in its own
``write``. A write or flush that fails crashes the drain and with it the session (one
strike): output the receipt cannot account for ends the run.

Input and resizing go through a duplicate of the master the drain holds while the sandbox
runs: input is written without blocking and queued (bounded) while the agent does not
read; a resize is ``TIOCSWINSZ`` (the kernel sends SIGWINCH to the foreground process
group); INT, QUIT and TSTP can be raised in the foreground process group with ``TIOCSIG``,
as the line discipline does for typed keys, even when the agent put its terminal in raw
mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Final

from glove.actors import Actor, ActorDead, Busy
from glove.container.linux import READ_CHUNK_BYTES, set_winsize
from glove.records import TranscriptEntry
from glove.session._drain import StreamDigest
from glove.session._escape import ModeTracker, TerminalModes
from glove.session._messages import Refused
from glove.session._sandbox import RESULT_WAIT_S, AwaitResult, SandboxActor, SendSignal
from glove.session._terminals import (
    RaiseSignal,
    SetSize,
    Subscribe,
    Subscribed,
    Unsubscribe,
    WriteInput,
)
from glove.session._transcript import TranscriptWriter
from glove.session.errors import InputBusy, NoTerminal

#: Terminal requests queued for the drain (input, resize, signal, viewers); an asker waits
#: for room until its deadline.
DRAIN_MAILBOX: Final = 16
#: How long written bytes may wait for their flush (group commit).
FLUSH_INTERVAL_S: Final = 0.02
#: Input queued for an agent that is not reading its terminal; more is refused (busy).
MAX_PENDING_INPUT_BYTES: Final = 256 * 1024
#: ``TIOCSIG`` (``_IOW('T', 0x36, int)``): raise a signal in the slave's foreground group.
TIOCSIG: Final = 0x40045436
#: Signals ``TIOCSIG`` may raise (the kernel refuses the others on a pty).
FOREGROUND_SIGNALS: Final = frozenset({signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP})

Observer = Callable[[bytes], Awaitable[None] | None]


async def _every(waits: list[Awaitable[None]]) -> None:
    """Wait for each of ``waits`` (the flush's room and the observers')."""
    for wait in waits:
        await wait


class PtyDrain(Actor):
    """Owns a PTY session's transcript and its terminal's input side (module docstring)."""

    def __init__(
        self,
        directory: Path,
        *,
        capacity: int,
        size: tuple[int, int],
        observers: Sequence[Observer] = (),
    ) -> None:
        super().__init__("pty-drain", mailbox_size=DRAIN_MAILBOX)
        self.directory = directory
        self.capacity = capacity
        self.size = size
        self.transcript: TranscriptWriter | None = None
        self._observers = list(observers)
        self._tracker = ModeTracker()
        self._plain = hashlib.sha256()
        self._subscribers: set[asyncio.Event] = set()
        self._dirty = asyncio.Event()
        self._pressure = asyncio.Event()
        self._room: asyncio.Future[None] | None = None
        self._pty = -1
        self._input = bytearray()
        self._writing = False
        self._sandbox: SandboxActor | None = None
        #: True once the terminal's input side opened (the sandbox launched with a PTY): a
        #: flag of the drain's own, read by no other actor (they ask the drain).
        self._opened = False

    def add_observer(self, observer: Observer) -> None:
        """Feed ``observer`` every later chunk too (before the ring; see the module doc)."""
        self._observers.append(observer)

    # -- life -------------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Create the session's directory (0700) and the transcript's files.

        Raises:
            OSError: they cannot be created or their space reserved.
        """
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.transcript = await self.run_blocking(
            TranscriptWriter.create, self.directory, self.capacity
        )
        self.spawn_task(self._flusher(), name="flush")

    async def on_stop(self) -> None:
        """Close the input side, make every byte durable with a closing record, wake viewers."""
        self._close_input()
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)
        transcript = self.transcript
        if transcript is not None and not transcript.closed:
            try:
                meta = transcript.snapshot(closed=True)
                await self.run_blocking(transcript.commit, meta)
                transcript.committed(meta)
            finally:
                transcript.closed = True
                transcript.close_files()
        self._notify()

    # -- output: the sandbox's on_output ------------------------------------------------------

    def write(self, stream: str, data: bytes) -> Awaitable[None] | None:
        """Take the next chunk the agent's terminal produced (see the module docstring).

        Returns an awaitable when the flush window is full: the sandbox then pauses reading.
        A failure crashes the drain (and the session).
        """
        del stream  # a PTY session has one stream
        transcript = self.transcript
        if transcript is None or transcript.closed:
            return None
        waits: list[Awaitable[None]] = []
        for observer in self._observers:
            pending = observer(data)
            if pending is not None:
                waits.append(pending)
        self._tracker.feed(data)
        self._plain.update(data)
        try:
            if transcript.pending + len(data) > transcript.window:
                self._commit_now(transcript)  # past the window (the final drain): flush first
            transcript.append(data)
        except OSError as exc:
            self.crash(exc)
            return None
        self._notify()
        self._dirty.set()
        if transcript.pending + READ_CHUNK_BYTES > transcript.window:
            self._pressure.set()
            if self._room is None or self._room.done():
                self._room = asyncio.get_running_loop().create_future()
            waits.append(asyncio.shield(self._room))
        if not waits:
            return None
        if len(waits) == 1:
            return waits[0]
        return _every(waits)

    def _commit_now(self, transcript: TranscriptWriter) -> None:
        meta = transcript.snapshot()
        transcript.commit(meta)
        transcript.committed(meta)

    async def _flusher(self) -> None:
        transcript = self.transcript
        assert transcript is not None
        while True:
            await self._dirty.wait()
            if not self._pressure.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FLUSH_INTERVAL_S):
                        await self._pressure.wait()
            self._dirty.clear()
            self._pressure.clear()
            meta = transcript.snapshot()
            await self.run_blocking(transcript.commit, meta)
            transcript.committed(meta)
            room = self._room
            if room is not None and transcript.pending + READ_CHUNK_BYTES <= transcript.window:
                self._room = None
                if not room.done():
                    room.set_result(None)

    # -- the terminal methods' requests (session/_terminals.py) ----------------------------------

    async def handle(self, msg: object) -> object:  # noqa: PLR0911 - one reply per request
        """One :data:`~glove.session._terminals.DrainRequest`; a refusal (the terminal is not
        open, the agent is not reading) is the :class:`~glove.session._messages.Refused`
        reply, never a crash of the drain.

        Raises:
            TypeError: not a drain request (a bug).
        """
        try:
            if isinstance(msg, WriteInput):
                return self.input(msg.data)
            if isinstance(msg, SetSize):
                self.resize(msg.rows, msg.cols)
                return None
            if isinstance(msg, RaiseSignal):
                return self.send_signal(msg.signum)
        except (NoTerminal, InputBusy) as exc:
            return Refused(exc)
        if isinstance(msg, Subscribe):
            self.subscribe(msg.event)
            rows, cols = self.size
            return Subscribed(rows, cols, self.modes)
        if isinstance(msg, Unsubscribe):
            self.unsubscribe(msg.event)
            return None
        return await super().handle(msg)

    # -- viewers --------------------------------------------------------------------------------

    def subscribe(self, event: asyncio.Event) -> None:
        """Set ``event`` whenever bytes are added, the terminal opens or closes, or the
        transcript ends."""
        self._subscribers.add(event)

    def unsubscribe(self, event: asyncio.Event) -> None:
        """Forget a viewer's event."""
        self._subscribers.discard(event)

    def _notify(self) -> None:
        for event in self._subscribers:
            event.set()

    @property
    def modes(self) -> TerminalModes:
        """The terminal modes the agent has left set."""
        return self._tracker.modes

    def summary(self) -> TranscriptEntry | None:
        """The receipt's ``transcript`` entry (None if the transcript was never created)."""
        return self.transcript.summary() if self.transcript is not None else None

    @property
    def evicted(self) -> int:
        """Bytes the transcript ring has evicted so far."""
        return self.transcript.evicted if self.transcript is not None else 0

    def digests(self) -> dict[str, StreamDigest]:
        """The receipt's ``output`` entry: the terminal stream's bytes and SHA-256."""
        count = self.transcript.end if self.transcript is not None else 0
        return {"pty": StreamDigest(count, "sha256:" + self._plain.hexdigest())}

    # -- the terminal's input side ----------------------------------------------------------------

    def follow(self, sandbox: SandboxActor) -> None:
        """Take the input side of ``sandbox``'s terminal once it launched (a task of ours)."""
        self.spawn_task(self._follow(sandbox), name="follow")

    async def _follow(self, sandbox: SandboxActor) -> None:
        await sandbox.started.wait()
        box = sandbox.box
        master = box.master if box is not None else None
        if master is None:
            return  # the launch failed before the terminal existed
        self._pty = os.dup(master)
        self._sandbox = sandbox
        set_winsize(self._pty, self.size)
        self._opened = True
        self._notify()
        # The command ended (the reply), or the sandbox stopped without a result: either
        # way its terminal is done; our own stop cancels the ask and closes it too.
        with contextlib.suppress(asyncio.CancelledError, ActorDead):
            await sandbox.ask(AwaitResult(), timeout=RESULT_WAIT_S, wait=True)
        self._close_input()

    def _require_open(self) -> int:
        if self._pty < 0:
            state = "closed" if self._opened else "not open yet"
            raise NoTerminal(f"the session's terminal is {state}")
        return self._pty

    def input(self, data: bytes) -> int:
        """Write ``data`` to the agent's terminal; the bytes still queued after it.

        Raises:
            NoTerminal: the terminal is not open (yet, or any more).
            InputBusy: the agent is not reading and the queue is full.
        """
        fd = self._require_open()
        if len(self._input) + len(data) > MAX_PENDING_INPUT_BYTES:
            raise InputBusy(
                f"the agent is not reading its terminal: {len(self._input)} bytes are queued"
            )
        if not self._input:
            try:
                data = data[os.write(fd, data) :]
            except BlockingIOError:
                pass
            except OSError as exc:
                self._close_input()
                raise NoTerminal(f"the session's terminal is closed: {exc.strerror}") from exc
        if data:
            self._input += data
            if not self._writing:
                asyncio.get_running_loop().add_writer(fd, self._flush_input)
                self._writing = True
        return len(self._input)

    def _flush_input(self) -> None:
        try:
            written = os.write(self._pty, self._input)
        except BlockingIOError:
            return
        except OSError:
            self._close_input()
            return
        del self._input[:written]
        if not self._input:
            asyncio.get_running_loop().remove_writer(self._pty)
            self._writing = False

    def resize(self, rows: int, cols: int) -> None:
        """Set the terminal's size (SIGWINCH reaches the agent when it changed).

        Raises:
            NoTerminal: the terminal is not open.
        """
        set_winsize(self._require_open(), (rows, cols))
        self.size = (rows, cols)

    def send_signal(self, signum: int) -> str:
        """Raise ``signum`` for the agent: INT, QUIT and TSTP in the terminal's foreground
        process group (as typing the key would), any other through the sandbox's init to
        the command. Returns where it went.

        Raises:
            NoTerminal: the terminal is not open, or the sandbox cannot take the signal
                (stopping, or its mailbox full): a refusal, never a crash of the drain.
        """
        fd = self._require_open()
        if signum in FOREGROUND_SIGNALS:
            try:
                fcntl.ioctl(fd, TIOCSIG, signum)
            except OSError as exc:
                raise NoTerminal(f"the terminal refused the signal: {exc.strerror}") from exc
            return "foreground"
        sandbox = self._sandbox
        if sandbox is None:
            raise NoTerminal("the session's sandbox is not running")
        try:
            sandbox.tell(SendSignal(signum))
        except (ActorDead, Busy) as exc:  # as the pipes path says it
            raise NoTerminal(f"the sandbox cannot take it: {exc}") from exc
        return "command"

    def _close_input(self) -> None:
        if self._pty < 0:
            return
        if self._writing:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_writer(self._pty)
            self._writing = False
        with contextlib.suppress(OSError):
            os.close(self._pty)
        self._pty = -1
        self._input.clear()
        self._notify()
