"""The attacker's side of the smuggling tests: raw bytes to the HTTP proxy, the reply back.

Standard library only: the wired tests run it inside a Glove sandbox with the system
``python3`` as ``python3 _attack_client.py ATTACKS.json`` (the proxy at 127.0.0.1:3128),
printing one JSON line per attack; the in-process tests call :func:`attack` on a socket.

Each attack is ``{"name", "parts": [base64...], "expect_continue": bool}``: the first part
is sent; with ``expect_continue`` the client waits for the interim ``100 Continue`` (or a
final refusal) before the others, as a client honouring ``Expect`` does; then the reply is
read until the proxy closes.
"""

from __future__ import annotations

import base64
import json
import socket
import sys

PROXY = ("127.0.0.1", 3128)
#: Seconds a step (a send, a read) may take before the attack counts as hung.
STEP_S = 30.0


def attack(sock: socket.socket, parts: list[bytes], *, expect_continue: bool) -> bytes:
    """Send ``parts`` as described above; return every byte the proxy answered."""
    sock.settimeout(STEP_S)
    reply = b""
    try:
        sock.sendall(parts[0])
        if expect_continue:
            while b"\r\n\r\n" not in reply:
                chunk = sock.recv(65536)
                if not chunk:
                    return reply
                reply += chunk
            if not reply.startswith(b"HTTP/1.1 100"):
                return reply + _rest(sock)
        for part in parts[1:]:
            sock.sendall(part)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused early: what the proxy said is still to be read
    return reply + _rest(sock)


def _rest(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def main() -> None:
    """Run every attack of the JSON file ``argv[1]`` in order; one JSON line each."""
    with open(sys.argv[1], encoding="utf-8") as handle:
        attacks = json.load(handle)
    for item in attacks:
        parts = [base64.b64decode(p) for p in item["parts"]]
        with socket.create_connection(PROXY, timeout=STEP_S) as sock:
            reply = attack(sock, parts, expect_continue=item["expect_continue"])
        line = {"name": item["name"], "reply": base64.b64encode(reply).decode()}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
