"""Real origin servers on host loopback: HTTP(S) with a git smart-HTTP backend and a PyPI index,
and an sshd. The end-to-end tests reach them only through the egress proxy.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WHEEL = "demo_pkg-1.0-py3-none-any.whl"
BULK_CHUNK = b"\xa5" * 65536
SSHD = "/usr/sbin/sshd"


def build_wheel() -> bytes:
    """A minimal valid wheel (demo-pkg 1.0) for the index."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("demo_pkg/__init__.py", "VALUE = 1\n")
        archive.writestr(
            "demo_pkg-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        )
        archive.writestr(
            "demo_pkg-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: glove-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n",
        )
        archive.writestr("demo_pkg-1.0.dist-info/RECORD", "")
    return buffer.getvalue()


def build_repo(root: Path) -> Path:
    """A bare git repository with one commit (file README: "hello through the proxy")."""
    work = root / "work"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True, env=env)
    (work / "README").write_text("hello through the proxy\n")
    subprocess.run(["git", "-C", str(work), "add", "README"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "one"], check=True, env=env)
    bare = root / "repo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, env=env)
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
    return bare


class _Handler(BaseHTTPRequestHandler):
    server: _Origin
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass

    def _send(self, status: int, body: bytes, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        path, _, query = self.path.partition("?")
        if path == "/hello":
            self._send(200, b"hello from the origin\n")
        elif path.startswith("/bulk/"):
            total = int(path.rsplit("/", 1)[1])
            self.send_response(200)
            self.send_header("Content-Length", str(total))
            self.end_headers()
            while total > 0:
                chunk = BULK_CHUNK[: min(total, len(BULK_CHUNK))]
                self.wfile.write(chunk)
                total -= len(chunk)
        elif path == "/simple/demo-pkg/":
            digest = hashlib.sha256(self.server.wheel).hexdigest()
            link = f'<a href="/files/{WHEEL}#sha256={digest}">{WHEEL}</a>'
            self._send(
                200, f"<!DOCTYPE html><html><body>{link}</body></html>".encode(), "text/html"
            )
        elif path == f"/files/{WHEEL}":
            self._send(200, self.server.wheel, "application/octet-stream")
        elif path.startswith("/git/"):
            self._git(path, query)
        else:
            self._send(404, b"not found\n")

    def do_POST(self) -> None:
        self.server.requests.append(self.path)
        path, _, query = self.path.partition("?")
        if path.startswith("/git/"):
            self._git(path, query)
        else:
            length = int(self.headers.get("Content-Length", "0"))
            self._send(200, b"posted " + self.rfile.read(length))

    def _git(self, path: str, query: str) -> None:
        length = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.git_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path[len("/git") :],
            "REQUEST_METHOD": self.command,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        result = subprocess.run(
            ["git", "http-backend"], input=body, capture_output=True, env=env, check=False
        )
        head, _, payload = result.stdout.partition(b"\r\n\r\n")
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.split(b"\r\n"):
            name, _, value = line.decode().partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Origin(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None, git_root: Path, wheel: bytes) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[str] = []
        self.git_root = git_root
        self.wheel = wheel
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)


@dataclass
class Origin:
    """A running origin: its port and the paths it was asked for."""

    port: int
    requests: list[str]


@contextmanager
def origin(git_root: Path, *, tls: ssl.SSLContext | None = None) -> Iterator[Origin]:
    """Serve /hello, /bulk/N, a git smart-HTTP backend under /git and a PEP 503 index."""
    server = _Origin(tls, git_root, build_wheel())
    thread = threading.Thread(target=server.serve_forever, name="origin", daemon=True)
    thread.start()
    try:
        yield Origin(server.server_address[1], server.requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def free_port() -> int:
    """A port free on 127.0.0.1 now (for servers that cannot report the one they bound)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Sshd:
    """A running sshd: its port, the client key, and a known_hosts line for ssh.test."""

    port: int
    client_key: Path
    known_hosts: Path


@contextmanager
def sshd(root: Path) -> Iterator[Sshd]:
    """An sshd on 127.0.0.1 accepting one generated key for root."""
    root.mkdir(mode=0o700)
    host_key, client_key = root / "host_key", root / "client_key"
    for key in (host_key, client_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    authorized = root / "authorized_keys"
    shutil.copy(client_key.with_suffix(".pub"), authorized)
    port = free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"AuthorizedKeysFile {authorized}\nPidFile {root / 'pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        "StrictModes no\nPermitRootLogin prohibit-password\nLogLevel ERROR\n"
    )
    known = root / "known_hosts"
    public = host_key.with_suffix(".pub").read_text().split()
    known.write_text(f"[ssh.test]:{port} {public[0]} {public[1]}\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield Sshd(port, client_key, known)
    finally:
        process.terminate()
        process.wait(10)
