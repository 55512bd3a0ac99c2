"""``glove-remote-executor``: the program an SSH ``ForceCommand`` runs on the remote host.

Its whole life, in order:

1. umask ``077``, before anything can create a file.
2. The arguments must be exactly ``--stdio``; anything else (none, more, ``--stdio=x``) is
   refused with exit 64 before the identity is even read. Interpreter settings taken from
   ``PYTHON*`` environment variables are refused the same way: they could put other code on
   the import path.
3. The identity (:mod:`glove.remote._identity`): the administrator's file is checked and
   parsed, the running executable is measured, and any fault ends the process with exit 78
   before one byte of stdin is read.
4. The channel: length-prefixed frames on stdin, responses on stdout, one at a time. Before
   each frame it waits up to :data:`EXECUTOR_IDLE_DEADLINE_S` for the first byte (then ends
   quietly); once a byte is there it captures the monotonic receive start and the channel
   deadline (receive start + :data:`FRAME_RECEIVE_DEADLINE_S`), by which the whole frame
   must have arrived. The request's TTL is converted with every second of that receipt
   subtracted; a frame that consumed its TTL is rejected unrun, and a response is written
   under the request deadline only.

Exit status: 0 the peer closed the channel between frames (or stayed idle); 64 bad
arguments or environment; 74 the channel failed (EPIPE...); 75 a deadline passed (frame
receipt, TTL, response write); 76 a protocol fault (oversized, truncated or malformed frame);
78 an identity fault. No frame is ever written except a response to a well-formed request
within its TTL: after any fault the channel closes and the reason goes to stderr (which SSH
carries back to the client). Protocol faults are never answered with a frame because no
request deadline exists to bound the write.

The identity path is the constant :data:`~glove.remote._identity.IDENTITY_PATH`. Tests pass
another path to :func:`run_executor` as a Python keyword argument; the console script
(:func:`main`) has no option, environment variable or file that changes it, so nothing a
remote caller sends can (see docs/decisions/0012).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Callable, Sequence
from typing import Final, TextIO

from glove.exits import EXIT_IO, EXIT_OK, EXIT_PROTOCOL
from glove.protocol import FrameDecoder
from glove.protocol.errors import ProtocolError
from glove.remote._identity import IDENTITY_PATH, verify_identity
from glove.remote._wire import (
    EXECUTOR_MAX_FRAME_BYTES,
    decode_executor_request,
    encode_response,
    request_deadline,
    respond,
)
from glove.remote.errors import (
    ExecutorError,
    ExecutorUsageError,
    FrameDeadlineExceeded,
    ResponseDeadlineExceeded,
)

#: The only accepted argument vector.
ACCEPTED_ARGV: Final = ("--stdio",)
#: The umask set first.
EXECUTOR_UMASK: Final = 0o077
#: How long the channel may sit idle between frames before the executor ends quietly.
EXECUTOR_IDLE_DEADLINE_S: Final = 300.0
#: How long a frame may take to arrive once its first byte is there (the channel deadline).
FRAME_RECEIVE_DEADLINE_S: Final = 10.0
#: Interpreter variables that would change what code runs; refused unless ignored (-E/-I).
_INTERPRETER_VARIABLES: Final = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONUSERBASE",
    "PYTHONPLATLIBDIR",
    "PYTHONWARNINGS",
    "PYTHONEXECUTABLE",
)

Clock = Callable[[], float]


def _wait(fd: int, events: int, deadline: float, clock: Clock) -> bool:
    """Wait until ``fd`` is ready for ``events`` or ``deadline`` passes (False)."""
    poller = select.poll()
    poller.register(fd, events)
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            return False
        # Round up, so a wait never ends a hair before the deadline and spins.
        if poller.poll(int(remaining * 1000) + 1):
            return True


def _read_frame(
    in_fd: int, decoder: FrameDecoder, receive_start: float, channel_deadline: float, clock: Clock
) -> bytes | None:
    """Read one frame whose first byte is available; None on a clean end of stream.

    Raises:
        FrameDeadlineExceeded: the frame was not complete by the channel deadline.
        FrameTooLarge, TruncatedFrame: from the decoder.
    """
    while True:
        try:
            # Never read past the frame: the next one's receipt has not started yet.
            chunk = os.read(in_fd, min(max(decoder.wanted, 1), EXECUTOR_MAX_FRAME_BYTES))
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            decoder.close()
            return None
        if chunk:
            decoder.feed(chunk)
            payload = decoder.next_frame()
            if payload is not None:
                return payload
        if not _wait(in_fd, select.POLLIN, channel_deadline, clock):
            raise FrameDeadlineExceeded(
                f"a frame started arriving but was not complete within "
                f"{channel_deadline - receive_start:g}s (the channel deadline)"
            )


def _write_all(out_fd: int, data: bytes, deadline: float, clock: Clock) -> None:
    """Write ``data`` completely before ``deadline``.

    Raises:
        ResponseDeadlineExceeded: the peer did not take it in time.
    """
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(out_fd, view) :]
            continue
        except BlockingIOError:
            pass
        if not _wait(out_fd, select.POLLOUT, deadline, clock):
            raise ResponseDeadlineExceeded(
                "the response could not be written before the request's deadline"
            )


def serve_channel(
    in_fd: int,
    out_fd: int,
    *,
    idle_deadline_s: float = EXECUTOR_IDLE_DEADLINE_S,
    frame_deadline_s: float = FRAME_RECEIVE_DEADLINE_S,
    clock: Clock = time.monotonic,
) -> None:
    """Serve requests from ``in_fd`` until the peer closes it or stays idle.

    Raises:
        DeadlineError: a frame, TTL or response deadline passed.
        ProtocolError: a frame was oversized, truncated or malformed.
        OSError: the channel itself failed.
    """
    decoder = FrameDecoder(max_frame_bytes=EXECUTOR_MAX_FRAME_BYTES)
    for fd in (in_fd, out_fd):
        os.set_blocking(fd, False)
    while True:
        if not _wait(in_fd, select.POLLIN, clock() + idle_deadline_s, clock):
            return
        # The frame read starts now: capture its receive start and the channel deadline.
        receive_start = clock()
        channel_deadline = receive_start + frame_deadline_s
        payload = _read_frame(in_fd, decoder, receive_start, channel_deadline, clock)
        if payload is None:
            return
        received = clock()
        request = decode_executor_request(payload)
        deadline = request_deadline(request, receive_start, received)
        _write_all(out_fd, encode_response(respond(request)), deadline, clock)


def check_invocation(argv: Sequence[str], environ: dict[str, str] | os._Environ[str]) -> None:
    """Accept exactly ``--stdio`` and an environment that cannot redirect the interpreter.

    Raises:
        ExecutorUsageError: anything else.
    """
    if tuple(argv) != ACCEPTED_ARGV:
        raise ExecutorUsageError(
            f"usage: glove-remote-executor --stdio (got {list(argv)!r}); nothing else is accepted"
        )
    if not sys.flags.ignore_environment:
        present = [name for name in _INTERPRETER_VARIABLES if environ.get(name)]
        if present:
            raise ExecutorUsageError(
                f"refusing interpreter settings from the environment: {', '.join(present)}"
            )


def run_executor(
    argv: Sequence[str],
    *,
    identity_path: str = IDENTITY_PATH,
    in_fd: int = 0,
    out_fd: int = 1,
    stderr: TextIO | None = None,
    idle_deadline_s: float = EXECUTOR_IDLE_DEADLINE_S,
    frame_deadline_s: float = FRAME_RECEIVE_DEADLINE_S,
) -> int:
    """Run the executor and return its exit status (it never raises).

    ``identity_path`` and the deadlines are keyword arguments for tests in the same process
    (or a test launcher); :func:`main` never passes them.
    """
    os.umask(EXECUTOR_UMASK)
    err = stderr or sys.stderr
    try:
        check_invocation(argv, os.environ)
        verify_identity(identity_path)
        serve_channel(
            in_fd, out_fd, idle_deadline_s=idle_deadline_s, frame_deadline_s=frame_deadline_s
        )
    except ExecutorError as exc:
        print(f"glove-remote-executor: {exc}", file=err)
        return exc.exit_code
    except ProtocolError as exc:
        print(f"glove-remote-executor: protocol error: {exc}", file=err)
        return EXIT_PROTOCOL
    except OSError as exc:
        print(f"glove-remote-executor: channel failed: {exc}", file=err)
        return EXIT_IO
    return EXIT_OK


def main() -> None:
    """Entry point of the ``glove-remote-executor`` console script.

    It leaves through ``os._exit``: no interpreter shutdown hook, ``atexit`` handler or
    inspect mode (``PYTHONINSPECT``) gets to run after the verdict.
    """
    code = run_executor(sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
