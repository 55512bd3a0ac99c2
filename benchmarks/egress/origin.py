"""The benchmark's origin: a threaded raw-socket HTTP/1.1 server on 127.0.0.1 (stdlib only).

``GET /small`` answers 13 bytes; ``GET /bulk/N`` answers N bytes. Every response closes
the connection. Prints the port, then serves until killed.
"""

from __future__ import annotations

import socket
import sys
import threading

CHUNK = b"\xa5" * (1 << 20)
SMALL = b"hello, world\n"


def _serve(conn: socket.socket) -> None:
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(65536)
            if not data:
                return
            head += data
        path = head.split(b" ", 2)[1]
        if path.startswith(b"/bulk/"):
            total = int(path[6:])
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % total
            )
            while total > 0:
                piece = CHUNK[: min(total, len(CHUNK))]
                conn.sendall(piece)
                total -= len(piece)
        else:
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(SMALL)
                + SMALL
            )


def main() -> None:
    """Listen, print the port, serve forever."""
    server = socket.create_server(("127.0.0.1", 0), backlog=256)
    print(server.getsockname()[1], flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
    sys.exit(0)
