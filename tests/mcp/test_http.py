"""``glove mcp serve --http``: checks before anything, sessions, streams, replay, clients.

The HTTP client here is the standard library's ``http.client`` (a peer independent of
Glove's own HTTP code), run in a thread; the upstreams are real server processes.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from glove.actors import running
from glove.mcp._config import load_config
from glove.mcp._http_checks import HttpOptions
from glove.mcp._http_server import HttpFront
from mcp import Client

from .conformance import FIXTURE, PYTHON, conformance_bin
from .conftest import read_audit, sdk_server, write_config

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
JSON_AND_SSE = "application/json, text/event-stream"
TOKEN = "s3cret-token-for-tests"


@asynccontextmanager
async def _front(tmp_path: Path, **options: Any) -> AsyncIterator[HttpFront]:
    upstream = {
        "command": sdk_server("echo"),
        "env": {"GLOVE_TEST_CALL_LOG": str(tmp_path / "calls")},
    }
    config = load_config(write_config(tmp_path, {"echo": upstream}, "allow-all"))
    async with running(HttpFront(config, HttpOptions(**options))) as front:
        yield front


def _request(
    port: int,
    method: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    sent = {"Content-Type": "application/json", "Accept": JSON_AND_SSE, **(headers or {})}
    connection.request(method, "/mcp", json.dumps(body).encode() if body else None, sent)
    response = connection.getresponse()
    data = response.read()
    found = {k.lower(): v for k, v in response.getheaders()}
    connection.close()
    return response.status, found, data


async def _call(
    port: int, method: str, body: dict[str, Any] | None = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(
        _request, port, method, body, {k.replace("_", "-"): v for k, v in headers.items()}
    )


def _events(data: bytes) -> list[dict[str, Any]]:
    messages = []
    for block in data.decode().split("\n\n"):
        lines = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
        if lines and lines[0]:
            messages.append(json.loads("\n".join(lines)))
    return messages


async def test_host_origin_and_path_are_checked_first(tmp_path: Path) -> None:
    """A foreign Host or Origin gets 403, another path 404, another method 405."""
    async with _front(tmp_path) as front:
        assert front.port is not None
        status, _, _ = await _call(front.port, "POST", INIT, Host="evil.example.com")
        assert status == 403
        status, _, _ = await _call(front.port, "POST", INIT, Origin="http://evil.example.com")
        assert status == 403
        status, _, _ = await _call(front.port, "POST", INIT, Origin="null")
        assert status == 403
        status, _, _ = await _call(front.port, "PUT", INIT)
        assert status == 405
        status, headers, _ = await _call(
            front.port, "POST", INIT, Origin=f"http://localhost:{front.port}"
        )
        assert status == 200
        assert headers["mcp-session-id"]
    assert read_audit(tmp_path / "audit.log") == []  # nothing refused reached a mediation


async def test_bearer_token_is_required_when_configured(tmp_path: Path) -> None:
    """Without the token: 401 and a WWW-Authenticate header; with it: a session."""
    async with _front(tmp_path, token=TOKEN) as front:
        assert front.port is not None
        status, headers, _ = await _call(front.port, "POST", INIT)
        assert status == 401
        assert headers["www-authenticate"] == "Bearer"
        status, _, _ = await _call(front.port, "POST", INIT, Authorization="Bearer wrong")
        assert status == 401
        status, _, _ = await _call(front.port, "POST", INIT, Authorization=f"Bearer {TOKEN}")
        assert status == 200


async def test_sessions_each_get_a_mediation_and_end_on_delete(tmp_path: Path) -> None:
    """Two sessions have two upstream processes and two run ids; DELETE ends one (then 404)."""
    async with _front(tmp_path, max_sessions=2) as front:
        port = front.port
        assert port is not None
        ids = []
        for _ in range(2):
            status, headers, body = await _call(port, "POST", INIT)
            assert status == 200
            assert json.loads(body)["result"]["serverInfo"]["name"] == "glove"
            ids.append(headers["mcp-session-id"])
        assert len(set(ids)) == 2
        status, _, _ = await _call(port, "POST", INIT)
        assert status == 503  # max_sessions
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo__pid", "arguments": {}},
        }
        pids = set()
        for session in ids:
            status, headers, body = await _call(port, "POST", call, Mcp_Session_Id=session)
            assert status == 200
            assert headers["content-type"] == "text/event-stream"
            events = _events(body)
            pids.add(events[-1]["result"]["structuredContent"]["result"])
        assert len(pids) == 2
        status, _, _ = await _call(port, "POST", call, Mcp_Session_Id="no-such-session")
        assert status == 404
        status, _, _ = await _call(port, "POST", call)
        assert status == 400
        status, _, _ = await _call(
            port, "POST", call, Mcp_Session_Id=ids[0], Mcp_Protocol_Version="1999-01-01"
        )
        assert status == 400
        status, _, _ = await _call(port, "DELETE", None, Mcp_Session_Id=ids[0])
        assert status == 200
        status, _, _ = await _call(port, "POST", call, Mcp_Session_Id=ids[0])
        assert status == 404
        assert len(front.run_ids) == 2
    runs = {record["run"] for record in read_audit(tmp_path / "audit.log")}
    assert runs == set(front.run_ids)


async def test_a_stream_is_primed_and_replayed_after_its_last_event_id(tmp_path: Path) -> None:
    """An answer stream opens with an id and a retry hint; a GET with that id replays the rest."""
    async with _front(tmp_path) as front:
        port = front.port
        assert port is not None
        _, headers, _ = await _call(port, "POST", INIT)
        session = headers["mcp-session-id"]
        call = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "echo__echo", "arguments": {"text": "again"}},
        }
        _, _, body = await _call(port, "POST", call, Mcp_Session_Id=session)
        first = body.decode().split("\n\n")[0]
        assert first.startswith("id: ")
        assert "retry: " in first
        primed = first.splitlines()[0][4:]
        status, _, replay = await _call(
            port, "GET", None, Mcp_Session_Id=session, Last_Event_ID=primed
        )
        assert status == 200
        assert _events(replay)[-1]["result"]["content"][0]["text"] == "again"
        status, _, _ = await _call(
            port, "GET", None, Mcp_Session_Id=session, Last_Event_ID="nope-1"
        )
        assert status == 404


async def test_idle_and_failed_sessions_end(tmp_path: Path) -> None:
    """A session idle past its bound ends (its upstream stopped); so does one whose upstream
    died (one strike); both answer 404 afterwards, and the front keeps serving."""
    async with _front(tmp_path, session_idle_s=0.4) as front:
        port = front.port
        assert port is not None
        _, headers, _ = await _call(port, "POST", INIT)
        idle = headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        await asyncio.sleep(1.2)
        status, _, _ = await _call(port, "POST", ping, Mcp_Session_Id=idle)
        assert status == 404
        _, headers, _ = await _call(port, "POST", INIT)
        doomed = headers["mcp-session-id"]
        crash = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "echo__crash", "arguments": {}},
        }
        status, _, body = await _call(port, "POST", crash, Mcp_Session_Id=doomed)
        assert status == 200
        assert _events(body)[-1]["error"]["code"] == -33002
        status, _, _ = await _call(port, "POST", ping, Mcp_Session_Id=doomed)
        assert status == 404
        status, _, _ = await _call(port, "POST", INIT)
        assert status == 200
        assert not {idle, doomed} & set(front.sessions)


async def test_list_changed_reaches_an_http_session_on_its_get_stream(tmp_path: Path) -> None:
    """An upstream's tools/list_changed reaches the HTTP agent on its GET stream."""
    upstream = {"command": sdk_server("list_changed"), "era": "legacy"}
    config = load_config(write_config(tmp_path, {"dyn": upstream}, "allow-all"))
    async with running(HttpFront(config, HttpOptions())) as front:
        port = front.port
        assert port is not None
        _, headers, _ = await _call(port, "POST", INIT)
        session = headers["mcp-session-id"]
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "dyn__first", "arguments": {}},
        }
        await _call(port, "POST", call, Mcp_Session_Id=session)

        def first_event() -> bytes:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request(
                "GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": session}
            )
            response = connection.getresponse()
            data = b""
            while b"list_changed" not in data:
                data += response.read1(4096)
            connection.close()
            return data

        data = await asyncio.wait_for(asyncio.to_thread(first_event), 15)
        assert {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"} in _events(data)


async def test_a_cancelled_request_ends_its_stream(tmp_path: Path) -> None:
    """notifications/cancelled for a call in flight ends that call's stream, unanswered."""
    async with _front(tmp_path) as front:
        port = front.port
        assert port is not None
        _, headers, _ = await _call(port, "POST", INIT)
        session = headers["mcp-session-id"]
        slow = {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "tools/call",
            "params": {"name": "echo__slow", "arguments": {"seconds": 20}},
        }
        pending = asyncio.ensure_future(_call(port, "POST", slow, Mcp_Session_Id=session))
        await asyncio.sleep(1.0)
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 77},
        }
        status, _, _ = await _call(port, "POST", cancel, Mcp_Session_Id=session)
        assert status == 202
        status, _, body = await asyncio.wait_for(pending, 5)
        assert status == 200
        assert _events(body) == []  # the priming event only: no answer for a cancelled call


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_lists_everything_over_http(tmp_path: Path, mode: str) -> None:
    """The mcp SDK client, in both of its modes, lists tools, prompts and resources and reads."""
    upstream = {"command": [PYTHON, str(FIXTURE), "stdio"], "era": "legacy"}
    config = load_config(write_config(tmp_path, {"ref": upstream}, "allow-all"))
    async with running(HttpFront(config, HttpOptions())) as front:
        url = f"http://127.0.0.1:{front.port}/mcp"
        async with Client(url, mode=mode) as client:  # type: ignore[arg-type]
            assert "ref__test_simple_text" in {t.name for t in (await client.list_tools()).tools}
            assert "ref__test_simple_prompt" in {
                p.name for p in (await client.list_prompts()).prompts
            }
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "ref+test://static-text" in uris
            read = await client.read_resource("ref+test://static-text")
            assert read.contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]


def _inspector(*argv: str) -> dict[str, Any]:
    folder = conformance_bin()
    # inspector-cli 1.0.3 finds its own package.json relative to the working directory.
    done = subprocess.run(
        [str(folder / "mcp-inspector-cli"), "--cli", *argv],
        cwd=folder.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": f"{folder}:/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    start = done.stdout.index("{")
    result: dict[str, Any] = json.loads(done.stdout[start:])
    return result


async def test_the_inspector_cli_lists_through_glove(tmp_path: Path) -> None:
    """npm's Inspector CLI lists tools, resources and prompts through Glove, stdio and HTTP."""
    upstream = {"command": [PYTHON, str(FIXTURE), "stdio"], "era": "legacy"}
    path = write_config(tmp_path, {"ref": upstream}, "allow-all")
    glove = [PYTHON, "-m", "glove", "mcp", "serve", "--config", str(path)]
    listed = await asyncio.to_thread(_inspector, "--method", "tools/list", "--", *glove)
    assert "ref__test_simple_text" in {t["name"] for t in listed["tools"]}
    listed = await asyncio.to_thread(_inspector, "--method", "resources/list", "--", *glove)
    assert "ref+test://static-text" in {r["uri"] for r in listed["resources"]}
    async with running(HttpFront(load_config(path), HttpOptions())) as front:
        url = f"http://127.0.0.1:{front.port}/mcp"
        listed = await asyncio.to_thread(_inspector, url, "--method", "prompts/list")
        assert "ref__test_prompt_with_arguments" in {p["name"] for p in listed["prompts"]}
        listed = await asyncio.to_thread(_inspector, url, "--method", "resources/templates/list")
        assert [t["uriTemplate"] for t in listed["resourceTemplates"]] == [
            "ref+test://template/{id}/data"
        ]


def test_a_public_address_needs_a_token(tmp_path: Path) -> None:
    """--http on a non-loopback address without --token-file is a usage error (64)."""
    config = write_config(tmp_path, {"echo": {"command": sdk_server("echo")}}, "allow-all")
    argv = [PYTHON, "-m", "glove", "mcp", "serve", "--config", str(config)]
    done = subprocess.run(
        [*argv, "--http", "0.0.0.0:0"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 64
    assert "--token-file" in done.stderr
    done = subprocess.run(
        [*argv, "--http", "nonsense"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 64
    assert "Traceback" not in done.stderr
