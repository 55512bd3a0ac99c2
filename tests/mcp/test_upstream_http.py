"""Streamable HTTP upstreams: TLS verified, headers from Glove's environment and files only.

The upstream is a small MCP server written on the standard library's ``http.server`` (an
HTTP peer independent of Glove's own HTTP code) behind TLS with a certificate made for the
test; it records every request head it receives.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from glove.actors import running
from glove.mcp import CallTool, UpstreamActor, UpstreamConfig, UpstreamTransportError
from glove.mcp._config import HeaderSource

SESSION = "upstream-session-1"


def _certificate(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "glove-test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """Quiet."""

    def _send(
        self, status: int, body: bytes = b"", content_type: str = "application/json", **extra: str
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        """No standalone stream."""
        self.seen.append({"method": "GET", **{k.lower(): v for k, v in self.headers.items()}})
        self._send(405)

    def do_DELETE(self) -> None:
        """End the session."""
        self.seen.append({"method": "DELETE", **{k.lower(): v for k, v in self.headers.items()}})
        self._send(200)

    def do_POST(self) -> None:
        """initialize, tools/list, tools/call (answered on an SSE stream), notifications."""
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(
            {
                "method": body.get("method") or "response",
                **{k.lower(): v for k, v in self.headers.items()},
            }
        )
        if "id" not in body:
            self._send(202)
            return
        method = body["method"]
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "tls-fixture", "version": "0"},
            }
            self._send(200, _reply(body["id"], result), Mcp_Session_Id=SESSION)
        elif method == "tools/list":
            tool = {"name": "whoami", "inputSchema": {"type": "object"}}
            self._send(200, _reply(body["id"], {"tools": [tool]}))
        elif method == "tools/call":
            answer = {"content": [{"type": "text", "text": "over tls"}]}
            event = b"id: e1\ndata: " + _reply(body["id"], answer) + b"\n\n"
            self._send(200, b"id: e0\nretry: 100\ndata: \n\n" + event, "text/event-stream")
        else:
            self._send(
                200,
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": body["id"],
                        "error": {"code": -32601, "message": method},
                    }
                ).encode(),
            )


def _reply(request_id: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


@contextmanager
def _tls_server(folder: Path) -> Iterator[tuple[int, list[dict[str, str]], Path]]:
    cert, key = _certificate(folder)
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_Handler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen, cert
    finally:
        server.shutdown()
        server.server_close()


def _config(port: int, secret_file: Path) -> UpstreamConfig:
    return UpstreamConfig(
        url=f"https://127.0.0.1:{port}/mcp",
        era="legacy",
        headers={
            "Authorization": HeaderSource(env="GLOVE_TEST_UPSTREAM_TOKEN", prefix="Bearer "),
            "X-Api-Key": HeaderSource(file=str(secret_file)),
        },
        startup_timeout_s=10,
    )


async def test_an_untrusted_certificate_fails_startup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose certificate the system does not trust is never spoken to."""
    monkeypatch.setenv("GLOVE_TEST_UPSTREAM_TOKEN", "t0ken")
    (tmp_path / "key.txt").write_text("file-secret\n")
    with _tls_server(tmp_path) as (port, seen, _):
        actor = UpstreamActor("tls", _config(port, tmp_path / "key.txt"))
        async with running(actor):
            pass
    assert isinstance(actor.exit_reason, UpstreamTransportError)
    assert "certificate" in str(actor.exit_reason).lower()
    assert seen == []


async def test_a_trusted_server_gets_the_configured_headers_and_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the certificate trusted: headers from the environment and a file, the session id
    and the protocol version on every later request; the SSE answer arrives; DELETE at the end."""
    monkeypatch.setenv("GLOVE_TEST_UPSTREAM_TOKEN", "t0ken")
    (tmp_path / "key.txt").write_text("file-secret\n")
    with _tls_server(tmp_path) as (port, seen, cert):
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        async with running(UpstreamActor("tls", _config(port, tmp_path / "key.txt"))) as actor:
            assert actor.state == "running", actor.exit_reason
            assert [tool.name for tool in actor.tools] == ["whoami"]
            raw = await actor.ask(CallTool("whoami", {}), timeout=10)
            assert msgspec.json.decode(raw)["content"][0]["text"] == "over tls"
    posts = [head for head in seen if head["method"] != "GET"]
    assert [head["method"] for head in posts] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "DELETE",
    ]
    for head in posts:
        assert head["authorization"] == "Bearer t0ken"
        assert head["x-api-key"] == "file-secret"
    assert "mcp-session-id" not in posts[0]
    for head in posts[1:]:
        assert head["mcp-session-id"] == SESSION
        assert head["mcp-protocol-version"] == "2025-11-25"


async def test_a_missing_header_source_fails_startup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unset environment variable named by a header is a startup failure, not an empty header."""
    monkeypatch.delenv("GLOVE_TEST_UPSTREAM_TOKEN", raising=False)
    actor = UpstreamActor("tls", _config(1, tmp_path / "absent.txt"))
    async with running(actor):
        pass
    assert isinstance(actor.exit_reason, UpstreamTransportError)
    assert "GLOVE_TEST_UPSTREAM_TOKEN" in str(actor.exit_reason)
