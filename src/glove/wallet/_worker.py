"""The status worker: one actor that exclusively owns the host end of the socketpair.

The shape of one session (construction-only: nothing maps the guest end into a child)::

    SyntheticOwner ── owns ──> Endpoints(host, guest)      guest: taken at most once
         │                         │
         └── runs ──> WalletStatusWorker (actor "wallet") ── serve task ── host end
                                   │  one request at a time:
                                   │  first byte → deadline = now + REQUEST_DEADLINE_S
                                   │  read the frame, process it, write the response,
                                   │  all before that one absolute deadline
                                   └─ any failure → close every endpoint still owned

Frames are length-prefixed (``glove.protocol``'s 4-byte big-endian header) with a 64-KiB
cap checked on the header, before a byte of the payload is read. The worker reads exactly
what the current frame still needs, so it never buffers the next request. It never
resynchronizes: EOF, a partial or oversized frame, a malformed request, an authority
failure, a deadline, a write stalled by backpressure, session expiry, a close request,
cancellation or destruction each end the session with a :class:`CloseReason`, and
``on_stop`` closes the host end and the guest end if it was never transferred.

Authority callbacks run inside the serve task. They may ask for the session to close
(:class:`SessionCloser`); they cannot destroy the owner from there (the owner checks
:data:`IN_WORKER`), because the owner's lifetime is not the worker's to end.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import socket
from typing import Final

from glove.actors import Actor
from glove.protocol import HEADER_BYTES, FrameDecoder, FrameTooLarge, encode_frame
from glove.wallet._processor import StatusOutcome, StatusProcessor
from glove.wallet._structure import MAX_FRAME_BYTES
from glove.wallet.errors import (
    AuthorityError,
    GuestEndpointTaken,
    RequestExpired,
    WalletError,
    WalletFrameError,
)

REQUEST_DEADLINE_S: Final = 2.0
"""One request's absolute budget, in seconds from its first byte: framing, authority
processing and the response write together."""
WORKER_MAILBOX_SIZE: Final = 4

IN_WORKER: contextvars.ContextVar[WalletStatusWorker | None] = contextvars.ContextVar(
    "glove_wallet_in_worker", default=None
)
"""The worker whose serve task (or a task it started) is running, if any."""


class CloseReason(enum.StrEnum):
    """Why a session's endpoints were closed."""

    EOF = "eof"
    PEER_RESET = "peer_reset"
    PARTIAL_FRAME = "partial_frame"
    OVERSIZED = "oversized"
    MALFORMED = "malformed"
    AUTHORITY_FAILURE = "authority_failure"
    PROCESSING_FAILURE = "processing_failure"
    DEADLINE = "deadline"
    BACKPRESSURE_TIMEOUT = "backpressure_timeout"
    SESSION_EXPIRED = "session_expired"
    CLOSE_REQUESTED = "close_requested"
    CANCELLED = "cancelled"
    DESTROYED = "destroyed"


class Endpoints:
    """The two ends of the session's socketpair and who still owns them."""

    def __init__(self, host: socket.socket, guest: socket.socket) -> None:
        self.host: socket.socket | None = host
        self.guest: socket.socket | None = guest
        self.guest_taken = False

    def take_guest(self) -> socket.socket:
        """Hand the guest end over, once; the caller owns it from then on.

        Raises:
            GuestEndpointTaken: it was already transferred, or the session is closed.
        """
        if self.guest_taken:
            raise GuestEndpointTaken("the guest endpoint was already transferred (exactly once)")
        if self.guest is None:
            raise GuestEndpointTaken("the session is closed: its guest endpoint is gone")
        guest, self.guest, self.guest_taken = self.guest, None, True
        return guest

    def close_all(self) -> None:
        """Close every endpoint still owned (the host end; the guest end unless transferred)."""
        for sock in (self.host, self.guest):
            if sock is not None:
                sock.close()
        self.host = None
        self.guest = None

    @property
    def open(self) -> bool:
        """True while the host end is open."""
        return self.host is not None


class SessionCloser:
    """The handle authority callbacks get: they may request the session's close, nothing more."""

    def __init__(self) -> None:
        self.requested = False
        self._worker: WalletStatusWorker | None = None

    def request_close(self) -> None:
        """Ask for the session to close. Inside a request: no response is written."""
        self.requested = True
        if self._worker is not None:
            self._worker.close_requested()


class WalletStatusWorker(Actor):
    """The one sequential worker of a session (actor name ``wallet``)."""

    def __init__(
        self,
        processor: StatusProcessor,
        endpoints: Endpoints,
        closer: SessionCloser,
        *,
        request_deadline_s: float = REQUEST_DEADLINE_S,
    ) -> None:
        super().__init__("wallet", mailbox_size=WORKER_MAILBOX_SIZE)
        if request_deadline_s <= 0:
            raise ValueError("request_deadline_s must be positive")
        self._processor = processor
        self._endpoints = endpoints
        self._closer = closer
        closer._worker = self  # the handle and the worker are one mechanism
        self._request_deadline_s = request_deadline_s
        self.close_reason: CloseReason | None = None
        self.closed = asyncio.Event()
        self.served = 0
        self.last_outcome: str | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Start the serve task (the worker owns it; its failure crashes the worker)."""
        self.spawn_task(self._serve(), name="serve")

    async def on_stop(self) -> None:
        """Close every endpoint the session still owns; record why."""
        if self.close_reason is None:
            crashed = self.state == "crashed"
            self.close_reason = CloseReason.PROCESSING_FAILURE if crashed else CloseReason.CANCELLED
        self._endpoints.close_all()
        self.closed.set()

    def mark_destroyed(self) -> None:
        """Record that the owner is being destroyed (the close reason, unless one is set)."""
        self._set_reason(CloseReason.DESTROYED)

    def close_requested(self) -> None:
        """A :class:`SessionCloser` asked: stop at the next suspension point.

        From inside processing (an authority callback) the serve loop also sees the flag
        before it writes, so the request being processed gets no response.
        """
        if self.state != "running":
            return  # not started yet: the serve loop checks the flag first thing
        self._set_reason(CloseReason.CLOSE_REQUESTED)
        self.stop()

    def _set_reason(self, reason: CloseReason) -> None:
        if self.close_reason is None:
            self.close_reason = reason

    # -- serving -------------------------------------------------------------------------------

    async def _serve(self) -> None:
        IN_WORKER.set(self)
        loop = asyncio.get_running_loop()
        while True:
            if self._closer.requested:
                reason: CloseReason | None = CloseReason.CLOSE_REQUESTED
            elif self._endpoints.host is None:
                reason = CloseReason.DESTROYED
            else:
                reason = await self._one_request(loop, self._endpoints.host)
            if reason is not None:
                self._set_reason(reason)
                self.stop()
                return

    async def _one_request(
        self, loop: asyncio.AbstractEventLoop, host: socket.socket
    ) -> CloseReason | None:
        """Serve one request; return why the session must close, or None to go on."""
        received = await self._receive(loop, host)
        if isinstance(received, CloseReason):
            return received
        frame, deadline, loop_deadline = received
        outcome = self._process(frame, deadline)
        if isinstance(outcome, CloseReason):
            return outcome
        if self._closer.requested:
            return CloseReason.CLOSE_REQUESTED  # requested while processing: no response
        data = encode_frame(outcome.response, max_frame_bytes=MAX_FRAME_BYTES)
        try:
            async with asyncio.timeout_at(loop_deadline):
                await loop.sock_sendall(host, data)
        except TimeoutError:
            return CloseReason.BACKPRESSURE_TIMEOUT
        except OSError:
            return CloseReason.PEER_RESET
        return None

    async def _receive(  # noqa: PLR0911 - one return per way a frame fails to arrive
        self, loop: asyncio.AbstractEventLoop, host: socket.socket
    ) -> tuple[bytes, float, float] | CloseReason:
        """Wait (until the session expires) for a request; read it before its deadline.

        Returns the frame, its absolute deadline on the processor clock and the same
        deadline on the loop clock, or why the session must close.
        """
        clock = self._processor.clock
        expires_at = self._processor.binding.expires_at
        idle_s = expires_at - clock.monotonic()
        if idle_s <= 0:
            return CloseReason.SESSION_EXPIRED
        try:
            async with asyncio.timeout(idle_s):
                first = await loop.sock_recv(host, HEADER_BYTES)
        except TimeoutError:
            return CloseReason.SESSION_EXPIRED
        except OSError:
            return CloseReason.PEER_RESET
        if not first:
            return CloseReason.EOF
        # Receive-inclusive: the request's one absolute deadline starts with its first byte.
        now = clock.monotonic()
        deadline = min(now + self._request_deadline_s, expires_at)
        loop_deadline = loop.time() + (deadline - now)
        decoder = FrameDecoder(max_frame_bytes=MAX_FRAME_BYTES)
        decoder.feed(first)
        try:
            async with asyncio.timeout_at(loop_deadline):
                while (frame := decoder.next_frame()) is None:
                    chunk = await loop.sock_recv(host, decoder.wanted)
                    if not chunk:
                        return CloseReason.PARTIAL_FRAME
                    decoder.feed(chunk)
        except FrameTooLarge:
            return CloseReason.OVERSIZED  # refused on the header: the payload is never read
        except TimeoutError:
            return CloseReason.DEADLINE
        except OSError:
            return CloseReason.PEER_RESET
        return frame, deadline, loop_deadline

    def _process(self, frame: bytes, deadline: float) -> StatusOutcome | CloseReason:
        """Run the processor; map each of its typed failures to a close reason."""
        try:
            outcome = self._processor.process(frame, deadline)
        except WalletFrameError:
            return CloseReason.MALFORMED
        except AuthorityError:
            return CloseReason.AUTHORITY_FAILURE  # one strike: no retry, no resync
        except RequestExpired:
            expired = self._processor.clock.monotonic() >= self._processor.binding.expires_at
            return CloseReason.SESSION_EXPIRED if expired else CloseReason.DEADLINE
        except WalletError:
            return CloseReason.PROCESSING_FAILURE
        self.served += 1
        self.last_outcome = outcome.reason
        return outcome
