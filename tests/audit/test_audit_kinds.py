"""``glove audit show`` has columns for every record kind the logs hold (issue 23, item 12):
an egress log written by a real ``glove exec --network proxy`` shows host and port in its
decision and connection-end rows; a table covers every mediator kind, and a guard finds
any kind a writer produces that the table does not cover."""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glove.mcp._upstream_audit import (
    FAILURE_KIND,
    DropCounter,
    failure_record,
    final_record,
    line_record,
    message_record,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "glove"


def _glove(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "glove", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


@pytest.fixture
def origin() -> Iterator[int]:
    """A loopback HTTP origin; its port."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


AGENT = """
import socket
def through_proxy(url, host):
    with socket.create_connection(("127.0.0.1", 3128)) as sock:
        head = f"GET {url} HTTP/1.1\\r\\nHost: {host}\\r\\nConnection: close\\r\\n\\r\\n"
        sock.sendall(head.encode())
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply.split(b"\\r\\n", 1)[0].decode()
print(through_proxy("http://127.0.0.1:%d/", "127.0.0.1"))
print("refused", through_proxy("http://denied.example/", "denied.example"))
try:
    socket.getaddrinfo("dns-denied.example", 80)
except OSError as exc:
    print("no name", exc)
"""


def test_an_egress_logs_rows_show_host_and_port(origin: int, tmp_path: Path) -> None:
    """A real proxied session: the allow, the deny, the DNS refusal and the connection's end
    each show their destination; the end row says its outcome and bytes."""
    log = tmp_path / "egress.log"
    done = _glove("exec", "-q", "--network", "proxy", "--allow", f"127.0.0.1:{origin}",
                  "--audit", str(log), "--", "python3", "-c", AGENT % origin)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "refused" in done.stdout
    records = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = {(r["kind"], r.get("proto"), r.get("decision")) for r in records}
    assert ("egress.end", "http", None) in kinds, kinds
    table = _glove("audit", "show", str(log))
    assert table.returncode == 0, table.stderr
    rows = table.stdout.splitlines()[1:]
    assert len(rows) == len(records)
    by_seq = {str(r["seq"]): r for r in records}
    for row in rows:
        record = by_seq[row.split()[0]]
        cells = row.split()
        assert cells[2] == record["session"][:12]
        where = f"{record['host']}:{record['port']}" if record.get("port") else record["host"]
        assert where in row, (row, record)
        if record["kind"] == "egress.end":
            assert cells[3] == "end"
            assert f"up {record['bytes_up']} B" in row
        else:
            assert cells[3] == record["decision"]
    ended = _glove("audit", "show", "--json", "--run", records[0]["session"], str(log))
    assert len(ended.stdout.splitlines()) == len(records)  # --run matches an egress session


_COUNTER = DropCounter()
#: One record of each mediator kind as its writer builds it, and what its row must show.
MEDIATOR_KINDS: dict[str, tuple[dict[str, Any], str]] = {
    "mcp.call": ({"kind": "mcp.call", "tool": "fs__read", "decision": "allow",
                  "reason": "allowed by read"}, "fs__read"),
    "mcp.prompt": ({"kind": "mcp.prompt", "prompt": "fs__greet", "decision": "deny",
                    "reason": "r"}, "prompt fs__greet"),
    "mcp.resource": ({"kind": "mcp.resource", "op": "read", "uri": "file:///x",
                      "decision": "allow", "reason": "r"}, "read file:///x"),
    "mcp.complete": ({"kind": "mcp.complete", "ref": "prompt", "target": "fs__greet",
                      "decision": "allow", "reason": "r"}, "complete prompt fs__greet"),
    "mcp.logging": ({"kind": "mcp.logging", "level": "info", "upstreams": [],
                     "decision": "deny", "reason": "r"}, "logging info"),
    "mcp.request": ({"kind": "mcp.request", "decision": "malformed", "request_id": 7,
                     "code": -32602, "reason": "bad"}, "request 7 (error -32602)"),
    "mcp.server_request": ({"kind": "mcp.server_request", "method": "roots/list",
                            "upstream": "fs", "decision": "deny", "reason": "r"},
                           "fs: roots/list"),
    "mcp.upstream_output": (line_record("fs", "garbage", 1, "not JSON"), "upstream fs"),
    "mcp.upstream_message": (message_record("fs", "bogus/x", 1, "unknown"), "fs: bogus/x"),
    FAILURE_KIND: (failure_record("fs", "closed its stdout", ("boom: no such file",)),
                   "upstream fs"),
}  # fmt: skip
MEDIATOR_KINDS["final"] = (final_record("mcp.upstream_output", "fs", _COUNTER, 3), "upstream fs")


def test_every_mediator_kind_has_its_columns(tmp_path: Path) -> None:
    """Each mediator record kind: DECISION is its decision, TOOL says what it is about."""
    log = tmp_path / "audit.log"
    records = [{"seq": i + 1, "ts": "2026-12-01T10:00:00.000001Z", "run": "r1", **record}
               for i, (record, _) in enumerate(MEDIATOR_KINDS.values())]  # fmt: skip
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    table = _glove("audit", "show", str(log))
    assert table.returncode == 0, table.stderr
    rows = table.stdout.splitlines()[1:]
    for row, record, (_, shown) in zip(rows, records, MEDIATOR_KINDS.values(), strict=True):
        assert row.split()[3] == record["decision"], row
        assert shown in row, (row, record)
    failure = rows[list(MEDIATOR_KINDS).index(FAILURE_KIND)]
    assert "stderr: boom: no such file" in failure  # the upstream's own last words


def _kinds_written() -> set[str]:
    """Every record kind a writer in src/glove spells out (a literal or a *_KIND constant)."""
    found: set[str] = set()
    for path in [*SRC.glob("mcp/*.py"), *SRC.glob("egress/*.py")]:
        text = path.read_text()
        found |= set(re.findall(r'"kind": "([a-z_.]+)"', text))
        found |= set(re.findall(r'_KIND: Final = "([a-z_.]+)"', text))
        found |= set(re.findall(r'self\._fields\(ex, "([a-z_.]+)"\)', text))
    return found


def test_no_record_kind_is_left_without_columns() -> None:
    """The guard: every kind the mediator and egress writers produce is in the tables above."""
    covered = set(MEDIATOR_KINDS) | {"egress", "egress.end"}
    written = _kinds_written()
    assert {"mcp.call", "egress", "egress.end", FAILURE_KIND} <= written
    assert written <= covered, written - covered
