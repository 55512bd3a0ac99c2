"""gloved sessions with tools: a harness names an MCP configuration; the agent in the
sandbox reaches the upstream only through Glove, and the receipt commits to the audit."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.conftest import sdk_server

from ._gloved import HARNESSES, Gloved, plan_text

#: A stdlib MCP client run inside the sandbox: list, one allowed call, one hidden tool.
AGENT = r"""
import json, os, subprocess, sys, time
proc = subprocess.Popen([os.environ["GLOVE_MCP_COMMAND"]], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE)
ids = iter(range(1, 100))
def ask(method, params=None):
    rid = next(ids)
    message = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    proc.stdin.write(json.dumps(message).encode() + b"\n"); proc.stdin.flush()
    while True:
        reply = json.loads(proc.stdout.readline())
        if reply.get("id") == rid:
            return reply
ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}})
proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
proc.stdin.flush()
tools = [t["name"] for t in ask("tools/list")["result"]["tools"]]
echo = ask("tools/call", {"name": "echo__echo", "arguments": {"text": "from the sandbox"}})
hidden = ask("tools/call", {"name": "echo__write_file",
                            "arguments": {"path": "/tmp/x", "content": "x"}})
print(json.dumps({"tools": tools, "echo": echo["result"]["content"][0]["text"],
                  "hidden": hidden.get("error", {}).get("code")}), flush=True)
if sys.argv[1:] == ["wait"]:
    time.sleep(600)  # still running when gloved is killed
proc.stdin.close(); proc.wait()
"""
POLICY = 'version = 1\n\n[[tools]]\nname = "echo__echo"\n'


@pytest.fixture
def tooled(tmp_path: Path) -> Iterator[tuple[Gloved, Path]]:
    """A home whose harness ``tools`` runs the stdlib agent with an echo upstream."""
    home = Gloved(Path(os.path.realpath(tmp_path)) / "home")
    home.base.mkdir()
    work = Path(os.path.realpath(tmp_path)) / "work"
    work.mkdir()
    (work / "agent.py").write_text(AGENT)
    harness = (
        '\n[harnesses.tools]\nargv = ["/usr/bin/python3", "/workspace/work/agent.py"]\n'
        'mcp = "agent.toml"\n'
        "\n[harnesses.tools_wait]\n"
        'argv = ["/usr/bin/python3", "/workspace/work/agent.py", "wait"]\n'
        'mcp = "agent.toml"\n'
    )
    home.setup(HARNESSES + harness)
    command = json.dumps(sdk_server("echo"))
    (home.config / "agent.toml").write_text(
        f'policy = "policy.toml"\naudit = "unused.log"\n\n[upstreams.echo]\ncommand = {command}\n'
        'inherit_env = ["PATH", "HOME"]\n'
    )
    (home.config / "policy.toml").write_text(POLICY)
    home.start()
    home.call("exposure.create", {"alias": "work", "path": str(work)})
    try:
        yield home, work
    finally:
        home.stop()


def test_a_session_uses_mediated_tools_and_its_receipt_covers_the_audit(
    tooled: tuple[Gloved, Path],
) -> None:
    """The agent sees only the allowed tool, its call works, the hidden one answers as
    unknown; the receipt's audit digest is the session's own audit log, byte for byte."""
    home, _work = tooled
    view = home.call("session.create", {"plan": plan_text("tools", exposures=["work"])})
    final = home.wait_terminal(view["session_id"])
    data = home.state / "sessions-data" / view["session_id"]
    assert final["outcome"]["exit_code"] == 0, (data / "stderr").read_text()
    report = json.loads((data / "stdout").read_text())
    assert report["tools"] == ["echo__echo"]
    assert report["echo"] == "from the sandbox"
    assert report["hidden"] is not None
    (receipt,) = [
        r["receipt"] for r in home.all_receipts() if r["session_id"] == view["session_id"]
    ]
    log = (data / "audit.log").read_bytes()
    records = [json.loads(line) for line in log.splitlines()]
    assert {r.get("run") for r in records} == {view["session_id"]}
    assert [r["decision"] for r in records if r.get("tool")] == ["allow", "deny"]
    assert receipt["audit"] == {
        "records": len(records),
        "bytes": len(log),
        "sha256": "sha256:" + hashlib.sha256(log).hexdigest(),
        "files": 1,
    }
    assert receipt["counts"]["tool_calls_denied"] == 1
    assert not (home.config / "unused.log").exists()  # the session's own log, never that one
    # A third party holding only the public key verifies the same receipt, audit included.
    key = home.glove("receipts", "public-key")
    assert key.returncode == 0, key.stderr
    (home.base / "log.pub").write_text(key.stdout)
    bundle = home.base / "bundle.json"
    exported = home.glove("receipts", "export", view["session_id"], "-o", str(bundle))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    verified = home.glove(
        "receipts", "verify", str(bundle), "--public-key", str(home.base / "log.pub"), "--json"
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["receipt"]["audit"] == receipt["audit"]


def test_after_a_crash_the_receipt_still_covers_the_audit(tooled: tuple[Gloved, Path]) -> None:
    """kill -9 of gloved while a tools session runs: after the restart its ``daemon_lost``
    receipt commits to the audit records that were durable (every decision made)."""
    home, _work = tooled
    view = home.call("session.create", {"plan": plan_text("tools_wait", exposures=["work"])})
    data = home.state / "sessions-data" / view["session_id"]
    deadline = time.monotonic() + 60
    while not (data / "stdout").exists() or not (data / "stdout").read_bytes().endswith(b"\n"):
        assert time.monotonic() < deadline, "the agent never reported"
        time.sleep(0.05)
    home.kill9()
    home.start()
    final = home.wait_terminal(view["session_id"])
    assert final["outcome"]["kind"] == "daemon_lost"
    (receipt,) = [
        r["receipt"] for r in home.all_receipts() if r["session_id"] == view["session_id"]
    ]
    log = (data / "audit.log").read_bytes()
    assert [json.loads(line)["decision"] for line in log.splitlines()] == ["allow", "deny"]
    assert receipt["audit"] == {
        "records": 2,
        "bytes": len(log),
        "sha256": "sha256:" + hashlib.sha256(log).hexdigest(),
        "files": 1,
    }


FETCH = r"""
import json, sys, urllib.request, urllib.error
out = {}
for name, url in (("allowed", sys.argv[1]), ("narrowed", sys.argv[2])):
    try:
        with urllib.request.urlopen(url, timeout=20) as reply:
            out[name] = reply.read().decode()
    except urllib.error.HTTPError as exc:
        out[name] = exc.code
    except OSError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
"""


@pytest.fixture
def origin() -> Iterator[int]:
    """An HTTP server on 127.0.0.2 and 127.0.0.3 (host loopback), one port for both."""
    import http.server
    import threading

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"hello from {self.server.server_address[0]}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return

    first = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Hello)
    port = first.server_address[1]
    second = http.server.ThreadingHTTPServer(("127.0.0.3", port), Hello)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (first, second)]
    for thread in threads:
        thread.start()
    try:
        yield port
    finally:
        for server in (first, second):
            server.shutdown()
            server.server_close()


def test_a_proxy_plan_narrows_the_owners_rules_and_is_audited(tmp_path: Path, origin: int) -> None:
    """gloved.toml allows two loopback origins; the plan asks for one: that one answers
    through the proxy, the other is refused (403), both are in the session's audit log,
    and a plan asking for more than the owner allows is invalid."""
    home = Gloved(Path(os.path.realpath(tmp_path)) / "home")
    home.base.mkdir()
    work = Path(os.path.realpath(tmp_path)) / "work"
    work.mkdir()
    (work / "fetch.py").write_text(FETCH)
    allowed, narrowed = f"127.0.0.2:{origin}", f"127.0.0.3:{origin}"
    extra = (
        f'\n[network]\nallow = ["{allowed}", "{narrowed}"]\n'
        '\n[harnesses.fetch]\nargv = ["/usr/bin/python3", "/workspace/work/fetch.py", '
        f'"http://{allowed}/a", "http://{narrowed}/b"]\n'
    )
    home.setup(HARNESSES + extra)
    home.start()
    try:
        home.call("exposure.create", {"alias": "work", "path": str(work)})
        caps = home.call("capabilities")
        assert caps["networks"] == ["none", "proxy"]
        wider = {"mode": "proxy", "allow": ["example.org"]}
        verdict = home.call("plan.validate", {"plan": plan_text("fetch", network=wider)})
        assert verdict["valid"] is False
        assert verdict["errors"][0]["path"] == "$.network.allow[0]"
        network = {"mode": "proxy", "allow": [allowed]}
        text = plan_text("fetch", exposures=["work"], network=network)
        view = home.call("session.create", {"plan": text})
        final = home.wait_terminal(view["session_id"])
        data = home.state / "sessions-data" / view["session_id"]
        assert final["outcome"]["exit_code"] == 0, (data / "stderr").read_text()
        report = json.loads((data / "stdout").read_text())
        assert report == {"allowed": "hello from 127.0.0.2", "narrowed": 403}
        records = [json.loads(line) for line in (data / "audit.log").read_bytes().splitlines()]
        decisions = {(r.get("host"), r.get("decision")) for r in records}
        assert ("127.0.0.2", "allow") in decisions
        assert ("127.0.0.3", "deny") in decisions
        (receipt,) = [
            r["receipt"] for r in home.all_receipts() if r["session_id"] == view["session_id"]
        ]
        assert receipt["audit"]["records"] == len(records)
        assert receipt["counts"]["egress_denied"] >= 1
    finally:
        home.stop()
