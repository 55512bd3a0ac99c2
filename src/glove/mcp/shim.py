#!/usr/bin/python3
"""glove-mcp: the stdio MCP server an agent finds inside ``glove run``.

This module is copied, as a script, into the sandbox at ``/opt/glove/glove-mcp``.

Self-contained (standard library only) because the sandbox sees the system Python, not
Glove's virtual environment. It connects to the abstract Unix name in GLOVE_MCP_SOCKET
(``@glove-mcp``; ``@`` stands for the leading NUL of the abstract namespace), where
``glove-relay`` accepts the connection and hands it over the inherited channel to the
mediator on the host. The shim then relays bytes both ways: stdin to the socket, the
socket to stdout. Policy, audit and framing all happen on the host.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

CHUNK_BYTES = 256 * 1024
EXIT_NO_MEDIATOR = 69  # glove.exits.EXIT_UNAVAILABLE (this script cannot import it)
DEFAULT_NAME = "@glove-mcp"


def _pump_stdin(sock: socket.socket) -> None:
    try:
        while True:
            data = os.read(0, CHUNK_BYTES)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def address(name: str) -> str:
    """The socket address for ``name``: ``@x`` is the abstract name ``x``, else a path."""
    return "\0" + name[1:] if name.startswith("@") else name


def main() -> int:
    """Relay stdio to the mediator's socket until either side closes; return the status."""
    name = os.environ.get("GLOVE_MCP_SOCKET", DEFAULT_NAME)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address(name))
    except OSError as exc:
        sys.stderr.write(f"glove-mcp: cannot reach the mediator at {name}: {exc.strerror}\n")
        return EXIT_NO_MEDIATOR
    threading.Thread(target=_pump_stdin, args=(sock,), daemon=True).start()
    try:
        while True:
            data = sock.recv(CHUNK_BYTES)
            if not data:
                return 0
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]
    except OSError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
