"""Talking to the service manager: ``sd_notify`` readiness, status, stopping, watchdog.

::

    systemd (Type=notify)                         gloved
      NOTIFY_SOCKET=/run/user/1000/systemd/notify   Notifier.from_environ()  (reads, unsets)
      WATCHDOG_USEC=30000000                        └─ the root tree starts; the socket is bound
                        <─── READY=1, STATUS=0 sessions running
                        <─── WATCHDOG=1 every 15 s  ServiceNotifier, a task on the event loop
                        <─── STOPPING=1             SIGTERM

The client is written here rather than taken from ``sdnotify`` or ``systemd-python``: it is
one datagram per call, and owning it lets the watchdog live on the event loop. That is
the point of the watchdog: a ping sent from a helper thread would keep arriving while the
loop is wedged, and systemd would never restart a daemon that has stopped serving. Here a
blocked loop stops the pings, and ``WatchdogSec=`` later systemd kills and restarts
``gloved``.

Sends never block the loop: the socket is non-blocking, an async send has a deadline, and
a manager whose queue is full costs one dropped datagram (counted), not a stall. A send
that fails outright (the manager went away) raises :class:`NotifyError`; the daemon logs it
and keeps serving, because nothing it could do would make the manager hear it again.

The variables are removed from the environment as they are read, so nothing gloved starts
(sandboxes, MCP upstreams) inherits a way to speak for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, MutableMapping, Sequence
from typing import Final

from glove.actors import Actor
from glove.control._notify_wire import (
    NOTIFY_SOCKET_VAR,
    NOTIFY_VARS,
    USEC_PER_S,
    WATCHDOG_PID_VAR,
    WATCHDOG_USEC_VAR,
    clean_status,
    encode_message,
    parse_notify_socket,
    watchdog_interval_s,
)
from glove.control.errors import NotifyError

_log = logging.getLogger(__name__)

NOTIFY_SEND_DEADLINE_S: Final = 1.0
# How often STATUS= is refreshed when no watchdog sets a faster pace.
STATUS_REFRESH_S: Final = 5.0

Fields = Sequence[tuple[str, str]]


class Notifier:
    """An ``sd_notify`` client bound to one socket, or a disabled one that sends nothing.

    Attributes:
        address: the socket address (a path, or bytes starting with NUL for an abstract
            name), None when no manager listens.
        watchdog_interval_s: the manager's watchdog interval for this process, or None.
        sent, dropped: datagrams sent, and dropped because the manager's queue was full.
    """

    def __init__(
        self, address: str | bytes | None = None, *, watchdog_interval_s: float | None = None
    ) -> None:
        if watchdog_interval_s is not None and address is None:
            raise ValueError("a watchdog needs a notification socket to ping")
        self.address = address
        self.watchdog_interval_s = watchdog_interval_s
        self.sent = 0
        self.dropped = 0
        self._sock: socket.socket | None = None

    @classmethod
    def from_environ(
        cls,
        environ: MutableMapping[str, str] | None = None,
        *,
        pid: int | None = None,
        unset: bool = True,
    ) -> Notifier:
        """Build the notifier the service manager asked for through the environment.

        With ``unset`` (the default) the three variables are removed from ``environ``
        (``os.environ`` by default), as ``sd_notify(3)``'s ``unset_environment`` does.

        Raises:
            NotifyError: a variable is set but malformed (the daemon must refuse to start
                rather than run unwatched under a manager that asked for a watchdog).
        """
        env = os.environ if environ is None else environ
        raw_socket = env.get(NOTIFY_SOCKET_VAR)
        usec, watchdog_pid = env.get(WATCHDOG_USEC_VAR), env.get(WATCHDOG_PID_VAR)
        if unset:
            for var in NOTIFY_VARS:
                env.pop(var, None)
        address = None if raw_socket is None else parse_notify_socket(raw_socket)
        interval = watchdog_interval_s(usec, watchdog_pid, os.getpid() if pid is None else pid)
        if interval is not None and address is None:
            raise NotifyError(f"{WATCHDOG_USEC_VAR} is set but {NOTIFY_SOCKET_VAR} is not")
        return cls(address, watchdog_interval_s=interval)

    @property
    def enabled(self) -> bool:
        """Whether a service manager listens."""
        return self.address is not None

    @property
    def display(self) -> str:
        """The address as ``NOTIFY_SOCKET`` spells it."""
        if isinstance(self.address, bytes):
            return "@" + self.address[1:].decode(errors="replace")
        return self.address or "(none)"

    def _socket(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)
        return self._sock

    def _failed(self, exc: OSError) -> NotifyError:
        return NotifyError(
            f"cannot notify the service manager at {self.display}: {exc.strerror or exc}"
        )

    def send(self, fields: Fields) -> bool:
        """Send one notification now, never blocking. False when disabled or dropped.

        Raises:
            NotifyError: a malformed field, or the manager's socket refused the datagram.
        """
        if self.address is None:
            return False
        data = encode_message(fields)
        try:
            self._socket().sendto(data, self.address)
        except BlockingIOError:
            self.dropped += 1
            return False
        except OSError as exc:
            raise self._failed(exc) from exc
        self.sent += 1
        return True

    async def asend(self, fields: Fields, *, timeout: float = NOTIFY_SEND_DEADLINE_S) -> bool:
        """Send one notification from the event loop, waiting at most ``timeout`` for room.

        Raises:
            NotifyError: a malformed field, or the manager's socket refused the datagram.
        """
        if self.address is None:
            return False
        data = encode_message(fields)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                await loop.sock_sendto(self._socket(), data, self.address)
        except TimeoutError:
            self.dropped += 1
            return False
        except OSError as exc:
            raise self._failed(exc) from exc
        self.sent += 1
        return True

    async def ready(self, status: str | None = None) -> bool:
        """Tell the manager start-up is complete (``READY=1``), with an optional status.

        Raises:
            NotifyError: the manager's socket refused the datagram.
        """
        fields = [("READY", "1")]
        if status is not None:
            fields.append(("STATUS", clean_status(status)))
        return await self.asend(fields)

    async def status(self, text: str) -> bool:
        """Set the one-line status ``systemctl status`` shows.

        Raises:
            NotifyError: the manager's socket refused the datagram.
        """
        return await self.asend([("STATUS", clean_status(text))])

    async def watchdog(self) -> bool:
        """Ping the watchdog (``WATCHDOG=1``).

        Raises:
            NotifyError: the manager's socket refused the datagram.
        """
        return await self.asend([("WATCHDOG", "1")])

    async def extend_timeout(self, seconds: float) -> bool:
        """Ask for ``seconds`` more before the manager gives up on start-up or shutdown.

        Raises:
            NotifyError: the manager's socket refused the datagram.
        """
        return await self.asend([("EXTEND_TIMEOUT_USEC", str(int(seconds * USEC_PER_S)))])

    def stopping(self, status: str | None = None) -> bool:
        """Tell the manager shutdown has begun (``STOPPING=1``); synchronous, for signal
        handlers. Failures are logged, not raised: the daemon is stopping either way."""
        fields = [("STOPPING", "1")]
        if status is not None:
            fields.append(("STATUS", clean_status(status)))
        try:
            return self.send(fields)
        except NotifyError as exc:
            _log.warning("%s", exc)
            return False

    def close(self) -> None:
        """Close the socket (a later send reopens it)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class ServiceNotifier(Actor):
    """Pings the watchdog from the event loop and keeps ``STATUS=`` current.

    Each tick (half the watchdog interval, or :data:`STATUS_REFRESH_S` without a watchdog)
    sends ``WATCHDOG=1`` unless ``healthy`` names a problem, plus ``STATUS=`` when the text
    ``status`` returns has changed. A stalled loop misses ticks, so the pings stop; after a
    stall the schedule restarts from now rather than bursting to catch up.

    ``healthy`` is the hook for liveness beyond the loop itself (the journal writer's
    heartbeat): return None when healthy, or a reason, which withholds the ping so the
    manager restarts the daemon.
    """

    def __init__(
        self,
        notifier: Notifier,
        *,
        status: Callable[[], str] | None = None,
        healthy: Callable[[], str | None] | None = None,
        name: str = "notify",
    ) -> None:
        super().__init__(name, mailbox_size=1)
        if not notifier.enabled:
            raise ValueError("ServiceNotifier needs an enabled Notifier")
        self.notifier = notifier
        self.status_source = status
        self.healthy = healthy
        interval = notifier.watchdog_interval_s
        self.period_s = STATUS_REFRESH_S if interval is None else interval / 2
        self.pings = 0
        self.withheld = 0
        self.send_errors = 0
        self._last_status: str | None = None

    async def on_start(self) -> None:
        """Start the ticking task."""
        self.spawn_task(self._tick_forever(), name="tick")

    def _fields(self) -> list[tuple[str, str]]:
        fields: list[tuple[str, str]] = []
        if self.notifier.watchdog_interval_s is not None:
            problem = self.healthy() if self.healthy is not None else None
            if problem is None:
                fields.append(("WATCHDOG", "1"))
            else:
                self.withheld += 1
                _log.error("watchdog ping withheld: %s", problem)
        if self.status_source is not None:
            text = clean_status(self.status_source())
            if text != self._last_status:
                fields.append(("STATUS", text))
        return fields

    async def _tick_forever(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            fields = self._fields()
            if fields:
                try:
                    sent = await self.notifier.asend(fields)
                except NotifyError as exc:
                    self.send_errors += 1
                    if self.send_errors == 1 or self.send_errors % 100 == 0:
                        _log.warning("%s (%d failed sends)", exc, self.send_errors)
                else:
                    if sent:
                        self.pings += ("WATCHDOG", "1") in fields
                        for name, value in fields:
                            if name == "STATUS":
                                self._last_status = value
            next_at += self.period_s
            now = loop.time()
            if next_at <= now:
                next_at = now + self.period_s
            await asyncio.sleep(next_at - now)
