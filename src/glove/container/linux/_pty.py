"""PTY mode: a fresh pseudo-terminal per sandbox and the host terminal in raw mode.

The sandbox gets the slave as its controlling terminal (``setsid`` + ``TIOCSCTTY`` in the
command, see ``_launch``); the launcher keeps the master and pumps bytes both ways. The host
terminal (when stdin is one) goes raw for the session and is restored on every exit path;
SIGWINCH copies the host window size to the sandbox's terminal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import termios
import threading
import tty
from collections.abc import Iterator
from typing import Final

#: Window size used when the host side is not a terminal (rows, columns).
DEFAULT_WINSIZE: Final = (24, 80)

_WINSIZE_FORMAT: Final = "HHHH"


def get_winsize(fd: int) -> tuple[int, int] | None:
    """Return (rows, columns) of the terminal ``fd``, or None when it is not one."""
    try:
        packed = fcntl.ioctl(fd, termios.TIOCGWINSZ, struct.pack(_WINSIZE_FORMAT, 0, 0, 0, 0))
    except OSError:
        return None
    rows, cols, _, _ = struct.unpack(_WINSIZE_FORMAT, packed)
    return rows, cols


def set_winsize(fd: int, size: tuple[int, int]) -> None:
    """Set the window size of the terminal ``fd`` (errors ignored: the peer may be gone)."""
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack(_WINSIZE_FORMAT, *size, 0, 0))


def open_sandbox_pty(host_fd: int) -> tuple[int, int]:
    """Open a fresh pty sized like ``host_fd``; return (master, slave), both close-on-exec.

    Raises:
        OSError: no pty could be allocated.
    """
    master, slave = os.openpty()
    set_winsize(slave, get_winsize(host_fd) or DEFAULT_WINSIZE)
    os.set_blocking(master, False)
    return master, slave


@contextlib.contextmanager
def host_terminal(stdin_fd: int, master_fd: int) -> Iterator[None]:
    """Put the host terminal in raw mode and propagate SIGWINCH for the block's duration.

    The previous terminal mode and SIGWINCH handler are restored however the block exits.
    """
    saved: list[int | list[bytes | int]] | None = None
    if os.isatty(stdin_fd):
        with contextlib.suppress(termios.error):
            saved = termios.tcgetattr(stdin_fd)
            tty.setraw(stdin_fd, termios.TCSANOW)
    previous: object = None
    installed = threading.current_thread() is threading.main_thread()
    if installed:

        def on_winch(_signum: int, _frame: object) -> None:
            size = get_winsize(stdin_fd)
            if size is not None:
                set_winsize(master_fd, size)

        previous = signal.signal(signal.SIGWINCH, on_winch)
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGWINCH, previous)  # type: ignore[arg-type]
        if saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(stdin_fd, termios.TCSAFLUSH, saved)
