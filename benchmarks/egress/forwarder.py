"""The benchmark's floor: the least any relaying proxy costs on this machine (stdlib only).

A blocking CONNECT-only forwarder on 127.0.0.1: no rules, no audit, no namespace hop, two
threads per connection moving bytes with ``splice(2)``. Whatever a real proxy adds beyond
this is its own cost; what this adds over ``direct`` is the second TCP connection every
relay needs. Prints the port, then serves until killed.
"""

from __future__ import annotations

import os
import socket
import threading

SPLICE_BYTES = 1 << 20


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    read_end, write_end = os.pipe()
    try:
        while True:
            moved = os.splice(source.fileno(), write_end, SPLICE_BYTES)
            if moved == 0:
                sink.shutdown(socket.SHUT_WR)
                return
            while moved:
                moved -= os.splice(read_end, sink.fileno(), moved)
    except OSError:
        return
    finally:
        os.close(read_end)
        os.close(write_end)


def _serve(client: socket.socket) -> None:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(4096)
        if not chunk:
            client.close()
            return
        head += chunk
    host, _, port = head.split(b" ", 2)[1].decode().rpartition(":")
    upstream = socket.create_connection((host, int(port)))
    for sock in (client, upstream):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    up = threading.Thread(target=_pipe, args=(client, upstream), daemon=True)
    up.start()
    _pipe(upstream, client)
    up.join()
    client.close()
    upstream.close()


def main() -> None:
    """Listen, print the port, serve forever."""
    server = socket.create_server(("127.0.0.1", 0), backlog=256)
    print(server.getsockname()[1], flush=True)
    while True:
        client, _ = server.accept()
        threading.Thread(target=_serve, args=(client,), daemon=True).start()


if __name__ == "__main__":
    main()
