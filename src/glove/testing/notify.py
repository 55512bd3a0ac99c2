"""A real ``sd_notify`` listener: what systemd hears from a ``Type=notify`` service.

An unconnected ``AF_UNIX`` datagram socket with ``SO_PASSCRED`` set is all systemd itself
uses to receive notifications, so a test can watch a real daemon's ``READY=1`` and
``WATCHDOG=1`` with no service manager and no privileges. The sender's pid comes from the
kernel (``SCM_CREDENTIALS``), as it does for systemd's ``NotifyAccess=main`` check, not from
the datagram.

    with NotifyListener.abstract() as listener:
        env = {**os.environ, **listener.environ(watchdog_usec=400_000)}
        proc = subprocess.Popen(["gloved", ...], env=env)
        ready = listener.wait_for(lambda n: n.fields.get("READY") == "1", timeout=10)
"""

from __future__ import annotations

import secrets
import select
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final

from glove.control import decode_notify_message

RECV_BYTES: Final = 4096
POLL_S: Final = 0.05
_UCRED: Final = struct.Struct("3i")


@dataclass(frozen=True, slots=True)
class Notification:
    """One datagram: when it arrived (``time.monotonic()``), who sent it, its fields."""

    at: float
    pid: int | None
    fields: dict[str, str]


class NotifyListener:
    """Receives notification datagrams on a background thread and keeps them in order."""

    def __init__(self, address: str | bytes, *, cleanup: Path | None = None) -> None:
        self.address = address
        self._cleanup = cleanup
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._sock.bind(address)
        if isinstance(address, str):
            Path(address).chmod(0o666)  # as systemd's: a daemon of another uid may send
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._received: list[Notification] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="notify-listener", daemon=True)
        self._thread.start()

    @classmethod
    def abstract(cls) -> NotifyListener:
        """A listener on a fresh abstract name (``NOTIFY_SOCKET=@...``)."""
        return cls(b"\0glove-test-notify-" + secrets.token_hex(8).encode())

    @classmethod
    def at_path(cls, directory: Path | None = None) -> NotifyListener:
        """A listener on a fresh socket file (``NOTIFY_SOCKET=/...``), in a new temp dir."""
        base = Path(tempfile.mkdtemp(prefix="glove-notify-", dir=directory))
        base.chmod(0o755)
        return cls(str(base / "notify"), cleanup=base)

    @property
    def notify_socket(self) -> str:
        """The value of ``NOTIFY_SOCKET`` that reaches this listener."""
        if isinstance(self.address, bytes):
            return "@" + self.address[1:].decode()
        return self.address

    def environ(
        self, *, watchdog_usec: int | None = None, watchdog_pid: int | None = None
    ) -> dict[str, str]:
        """The variables a service manager would set for a service it watches."""
        env = {"NOTIFY_SOCKET": self.notify_socket}
        if watchdog_usec is not None:
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        if watchdog_pid is not None:
            env["WATCHDOG_PID"] = str(watchdog_pid)
        return env

    def _run(self) -> None:
        space = socket.CMSG_SPACE(_UCRED.size)
        while not self._stop.is_set():
            ready, _, _ = select.select([self._sock], [], [], POLL_S)
            if not ready:
                continue
            try:
                data, ancillary, _flags, _addr = self._sock.recvmsg(RECV_BYTES, space)
            except OSError:
                return
            pid = None
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = _UCRED.unpack(payload[: _UCRED.size])[0]
            note = Notification(time.monotonic(), pid, decode_notify_message(data))
            with self._cond:
                self._received.append(note)
                self._cond.notify_all()

    @property
    def received(self) -> list[Notification]:
        """Every notification so far, oldest first (a copy)."""
        with self._lock:
            return list(self._received)

    def wait_for(self, predicate: Callable[[Notification], bool], timeout: float) -> Notification:
        """Return the first notification matching ``predicate``, waiting up to ``timeout``.

        Raises:
            TimeoutError: none arrived in time.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for note in self._received:
                    if predicate(note):
                        return note
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no matching notification in {timeout}s")
                self._cond.wait(left)

    def close(self) -> None:
        """Stop the thread, close the socket, remove its file."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()
        if self._cleanup is not None:
            for child in self._cleanup.iterdir():
                child.unlink()
            self._cleanup.rmdir()

    def __enter__(self) -> NotifyListener:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def pings(notes: list[Notification], pid: int | None = None) -> list[float]:
    """Arrival times of the ``WATCHDOG=1`` pings in ``notes`` (from ``pid``, if given)."""
    return [
        n.at for n in notes if n.fields.get("WATCHDOG") == "1" and (pid is None or n.pid == pid)
    ]
