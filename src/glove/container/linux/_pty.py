"""PTY mode: a fresh pseudo-terminal per sandbox and the host terminal in raw mode.

The terminal comes from the sandbox's **own** devpts instance: the init opens
``/dev/pts/ptmx`` once the root is built (:func:`open_own_terminal`), keeps the slave for the
command and sends the master to the launcher over a socket (``_launch``). A slave from the
host's devpts would not exist in the sandbox's ``/dev/pts`` (a new, empty instance), so
``ttyname(0)`` would fail with ENODEV and ``tty`` would say "not a tty"; this one is
``/dev/pts/0`` inside. The command gets it as its controlling terminal (``setsid`` +
``TIOCSCTTY``), so ``/dev/tty`` opens it too; the launcher keeps the master and pumps bytes
both ways. The host terminal (when stdin is one) goes raw for the session and is restored
on every exit path; SIGWINCH copies the host window size to the sandbox's terminal.
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
#: The sandbox's own pty multiplexer (its devpts instance is mounted with ``newinstance``).
SANDBOX_PTMX: Final = "/dev/pts/ptmx"
#: ioctls: unlock the slave, and open it from the master without a path lookup.
TIOCSPTLCK: Final = 0x40045431
TIOCGPTPEER: Final = 0x5441


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


def open_own_terminal(size: tuple[int, int]) -> tuple[int, int]:
    """Open a pty from this mount namespace's ``/dev/pts`` (the sandbox's init calls it).

    Returns (master, slave), both close-on-exec and not controlling terminals of the caller;
    the slave is ``rows x columns`` of ``size``.

    Raises:
        OSError: no pty could be allocated (no devpts instance, no TIOCGPTPEER).
    """
    master = os.open(SANDBOX_PTMX, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        fcntl.ioctl(master, TIOCSPTLCK, struct.pack("i", 0))
        slave = fcntl.ioctl(master, TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except BaseException:
        os.close(master)
        raise
    set_winsize(slave, size)
    return master, slave


class RawTerminal:
    """The host terminal ``fd`` (when it is one) in raw mode, and back in its own mode.

    As a context manager: raw for the block. :meth:`enter` saves the mode once and makes
    it raw; :meth:`leave` puts the saved mode back (also while the launcher is stopped by
    job control, so the operator's shell gets its terminal as it left it); :meth:`enter`
    again after a resume.
    """

    def __init__(self, fd: int | None) -> None:
        """Prepare (nothing changes until :meth:`enter`); ``fd`` None is no terminal."""
        self.fd = fd
        self._saved: list[int | list[bytes | int]] | None = None

    def enter(self) -> None:
        """Make the terminal raw (a no-op when it is not a terminal)."""
        fd = self.fd
        if fd is None or not os.isatty(fd):
            return
        with contextlib.suppress(termios.error):
            if self._saved is None:
                self._saved = termios.tcgetattr(fd)
            tty.setraw(fd, termios.TCSANOW)

    def leave(self, when: int = termios.TCSADRAIN) -> None:
        """Put the saved mode back (``when``: TCSAFLUSH at the end drops unread input)."""
        if self._saved is not None and self.fd is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fd, when, self._saved)

    def __enter__(self) -> RawTerminal:
        """Raw for the block; its own mode back (unread input dropped) however it exits."""
        self.enter()
        return self

    def __exit__(self, *_exc: object) -> None:
        """Put the saved mode back."""
        self.leave(termios.TCSAFLUSH)


@contextlib.contextmanager
def host_terminal(stdin_fd: int, master_fd: int) -> Iterator[RawTerminal]:
    """Put the host terminal in raw mode and propagate SIGWINCH for the block's duration.

    The previous terminal mode and SIGWINCH handler are restored however the block exits.
    """
    terminal = RawTerminal(stdin_fd)
    terminal.enter()
    previous: object = None
    installed = threading.current_thread() is threading.main_thread()
    if installed:

        def on_winch(_signum: int, _frame: object) -> None:
            size = get_winsize(stdin_fd)
            if size is not None:
                set_winsize(master_fd, size)

        previous = signal.signal(signal.SIGWINCH, on_winch)
    try:
        yield terminal
    finally:
        if installed:
            signal.signal(signal.SIGWINCH, previous)  # type: ignore[arg-type]
        terminal.leave(termios.TCSAFLUSH)
