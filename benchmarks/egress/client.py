"""The benchmark's client (stdlib only): the same code direct and through each proxy.

    client.py latency MODE PROXY ORIGIN COUNT     one new connection per GET /small
    client.py bulk MODE PROXY ORIGIN BYTES        one GET /bulk/BYTES, timed to the last byte

MODE is ``direct`` (connect to ORIGIN), ``forward`` (an absolute-form GET to the HTTP proxy
PROXY) or ``connect`` (CONNECT through PROXY, then the GET in the tunnel). Prints JSON:
per-request microseconds, or bytes and seconds.
"""

from __future__ import annotations

import json
import socket
import sys
import time

BUFFER = bytearray(1 << 20)


def _address(text: str) -> tuple[str, int]:
    if text == "-":  # no proxy (direct)
        return "", 0
    host, _, port = text.rpartition(":")
    return host, int(port)


def _open(mode: str, proxy: tuple[str, int], origin: tuple[str, int], path: str) -> socket.socket:
    target = origin if mode == "direct" else proxy
    sock = socket.create_connection(target)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    authority = f"{origin[0]}:{origin[1]}"
    if mode == "connect":
        sock.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"proxy closed: {reply!r}")
            reply += chunk
        if not reply.startswith(b"HTTP/1.1 200"):
            raise ConnectionError(f"CONNECT refused: {reply[:200]!r}")
    target_path = f"http://{authority}{path}" if mode == "forward" else path
    sock.sendall(
        f"GET {target_path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n".encode()
    )
    return sock


def _drain(sock: socket.socket) -> int:
    total = 0
    view = memoryview(BUFFER)
    while True:
        count = sock.recv_into(view)
        if count == 0:
            return total
        total += count


def main() -> None:
    """Run one measurement and print it as JSON."""
    kind, mode, proxy, origin, amount = sys.argv[1:6]
    proxy_address, origin_address = _address(proxy), _address(origin)
    if kind == "latency":
        samples = []
        for _ in range(int(amount)):
            start = time.perf_counter_ns()
            with _open(mode, proxy_address, origin_address, "/small") as sock:
                got = _drain(sock)
            samples.append((time.perf_counter_ns() - start) / 1000)
            if got < 13:
                raise ConnectionError("short response")
        print(json.dumps({"us": samples}))
    else:
        start = time.perf_counter()
        with _open(mode, proxy_address, origin_address, f"/bulk/{amount}") as sock:
            got = _drain(sock)
        elapsed = time.perf_counter() - start
        if got < int(amount):
            raise ConnectionError(f"short body: {got}")
        print(json.dumps({"bytes": got, "seconds": elapsed}))


if __name__ == "__main__":
    main()
