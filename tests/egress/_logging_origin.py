"""A real HTTP origin on host loopback that logs every byte and reads every request in them.

The smuggling tests' witness. Each connection's bytes are kept whole, and parsed with h11
(an HTTP/1.1 parser independent of the proxy's) as a stream of pipelined requests:
``Connection: close`` is ignored, so a second request hidden in the first one's body is
read and logged like any other. The first complete request gets a response, then the
origin half-closes (the proxy ends the exchange when the response ends) and keeps reading
until the proxy closes: every byte the proxy ever sent on that connection is in the log,
with no clock involved.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import h11

#: Seconds a test waits for the origin to see its connections end.
WAIT_S = 30.0
READ_BYTES = 65536


@dataclass
class Seen:
    """One request the origin parsed: line, fields, de-chunked body and trailers."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes = b""
    trailers: list[tuple[str, str]] = field(default_factory=list)

    def values(self, name: str) -> list[str]:
        """Every value of field ``name`` (case-insensitive), in order."""
        return [v for n, v in self.headers if n == name.lower()]


@dataclass
class Received:
    """One connection: every byte, the complete requests in them, and how parsing ended."""

    raw: bytes = b""
    requests: list[Seen] = field(default_factory=list)
    error: str | None = None
    """Why the rest of the bytes are not a complete request (incomplete, or malformed)."""

    @property
    def marker(self) -> str:
        """The request line's target (attacks name themselves in it)."""
        line = self.raw.split(b"\r\n", 1)[0].split(b" ")
        return line[1].decode("latin-1") if len(line) > 1 else ""


class LoggingOrigin:
    """The server: one thread per connection, a list of :class:`Received` once each ends."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self.ended: list[Received] = []
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="origin", daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._changed:
                self.accepted += 1
            worker = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(worker)
            worker.start()

    def _serve(self, conn: socket.socket) -> None:
        seen = Received()
        with conn:
            try:
                _read_all(conn, seen)
            except OSError as exc:
                seen.error = seen.error or f"socket: {exc}"
        with self._changed:
            self.ended.append(seen)
            self._changed.notify_all()

    def wait_ended(self, count: int) -> list[Received]:
        """Block until ``count`` connections have ended (the proxy closed them); return all.

        Raises:
            AssertionError: they did not end within :data:`WAIT_S`.
        """
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.ended) >= count, WAIT_S):
                raise AssertionError(f"origin: {len(self.ended)} of {count} connections ended")
            return list(self.ended)

    def by_marker(self) -> dict[str, Received]:
        """Every ended connection by the target of its first request line."""
        with self._changed:
            return {seen.marker: seen for seen in self.ended}

    def close(self) -> None:
        """Stop accepting; wait for the connection threads."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (Linux)
        self._listener.close()
        self._acceptor.join(WAIT_S)
        for worker in self._threads:
            worker.join(WAIT_S)


def _read_all(conn: socket.socket, seen: Received) -> None:
    """Read until end of file, parsing requests back to back (h11, one per request)."""
    parser = h11.Connection(h11.SERVER)
    current: Seen | None = None
    responded = False
    while True:
        chunk = conn.recv(READ_BYTES)
        seen.raw += chunk
        if seen.error is not None:
            if not chunk:
                return
            continue  # past a parse error: keep logging bytes until the proxy closes
        parser.receive_data(chunk)
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as exc:
                seen.error = f"h11: {exc}"
                break
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.Request):
                current = Seen(
                    event.method.decode("latin-1"),
                    event.target.decode("latin-1"),
                    [(n.decode("latin-1"), v.decode("latin-1")) for n, v in event.headers],
                )
                if parser.they_are_waiting_for_100_continue:
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            elif isinstance(event, h11.Data) and current is not None:
                current.body += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage) and current is not None:
                current.trailers = [
                    (n.decode("latin-1"), v.decode("latin-1")) for n, v in event.headers
                ]
                seen.requests.append(current)
                if not responded:
                    responded = True
                    _respond(conn, current)
                current = None
                # Whatever follows is read as the next request, Connection: close or not.
                rest, closed = parser.trailing_data
                parser = h11.Connection(h11.SERVER)
                parser.receive_data(rest)
                if closed:
                    parser.receive_data(b"")
            elif isinstance(event, h11.ConnectionClosed):
                return
        if not chunk:
            if seen.error is None and (current is not None or parser.trailing_data[0]):
                seen.error = "the connection ended inside a request"
            return


def _respond(conn: socket.socket, request: Seen) -> None:
    body = f"origin saw {request.method} {request.target} body={len(request.body)}".encode()
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
    )
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)  # the response is over; reading goes on


@contextmanager
def logging_origin() -> Iterator[LoggingOrigin]:
    """A :class:`LoggingOrigin` for the block."""
    origin = LoggingOrigin()
    try:
        yield origin
    finally:
        origin.close()
