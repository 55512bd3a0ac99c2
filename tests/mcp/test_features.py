"""Prompts, resources, logging, completion and server-to-client requests under policy.

The upstream is the conformance reference server over stdio; it records every request it
serves (``GLOVE_TEST_CALL_LOG``), so each denial is proven never to reach it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from glove.actors import running
from glove.mcp import ToolNameError, start_mediation
from glove.mcp._config import load_config
from glove.mcp._http_checks import HttpOptions
from glove.mcp._http_server import HttpFront
from glove.mcp.errors import INVALID_PARAMS, METHOD_NOT_FOUND, POLICY_DENIED
from mcp import Client

from .conformance import FIXTURE, PYTHON
from .conftest import (
    RAW_TIMEOUT_S,
    RawAgent,
    glove_params,
    hostile_server,
    raw_agent,
    read_audit,
    read_calls,
    sdk_server,
    write_config,
)

RESOURCE_NOT_FOUND = -32002
PROMPTS_CHANGED = "notifications/prompts/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"
AGENT_CAPABILITIES = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}

RESTRICTIVE = """
version = 1

[[tools]]
name = "ref__test_simple_text"
[[tools]]
name = "ref__test_sampling"
[[tools]]
name = "ref__test_elicitation"
[[tools]]
name = "ref__test_tool_with_logging"
[[tools]]
name = "ref__test_roots"

[[prompts]]
name = "ref__test_simple_prompt"
[[prompts]]
id = "args"
name = "ref__test_prompt_with_arguments"
[[prompts.args]]
pointer = "/arg1"
op = "in"
values = ["allowed"]

[[resources]]
uri = "ref+test://static-text"
[[resources]]
id = "template-1"
prefix = "ref+test://template/1"
"""


def _config(tmp_path: Path, policy: str, **fields: Any) -> Path:
    upstream = {
        "command": [PYTHON, str(FIXTURE), "stdio"],
        "env": {"GLOVE_TEST_CALL_LOG": str(tmp_path / "calls")},
        "era": "legacy",
        **fields,
    }
    return write_config(tmp_path, {"ref": upstream}, policy)


async def _initialize(agent: RawAgent) -> dict[str, Any]:
    reply = await agent.request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": AGENT_CAPABILITIES,
            "clientInfo": {"name": "raw", "version": "0"},
        },
    )
    await agent.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    result: dict[str, Any] = reply["result"]
    return result


async def _exchange(
    agent: RawAgent, method: str, params: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Send a request; return its answer and every other message that came before it."""
    agent._next_id += 1
    request_id = agent._next_id
    await agent.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    others: list[dict[str, Any]] = []
    while True:
        message = await agent.recv()
        if message.get("id") == request_id and "method" not in message:
            return message, others
        others.append(message)


async def test_a_restrictive_policy_fails_each_denied_feature_closed(tmp_path: Path) -> None:
    """Every denied prompt, resource, subscription, log, completion and server request is
    refused (hidden ones like unknown ones), audited, and never reaches the upstream."""
    async with raw_agent(_config(tmp_path, RESTRICTIVE)) as agent:
        init = await _initialize(agent)
        assert init["capabilities"] == {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
        }
        prompts = (await agent.request("prompts/list"))["result"]["prompts"]
        assert [p["name"] for p in prompts] == [
            "ref__test_simple_prompt",
            "ref__test_prompt_with_arguments",
        ]
        resources = (await agent.request("resources/list"))["result"]["resources"]
        assert [r["uri"] for r in resources] == ["ref+test://static-text"]
        assert (await agent.request("resources/templates/list"))["result"][
            "resourceTemplates"
        ] == []

        hidden = await agent.request("prompts/get", {"name": "ref__test_prompt_with_image"})
        unknown = await agent.request("prompts/get", {"name": "ref__no_such_prompt"})
        assert hidden["error"]["code"] == unknown["error"]["code"] == INVALID_PARAMS
        assert hidden["error"]["message"].startswith("Unknown prompt")
        bad_args = await agent.request(
            "prompts/get",
            {"name": "ref__test_prompt_with_arguments", "arguments": {"arg1": "no", "arg2": "x"}},
        )
        assert bad_args["error"]["code"] == POLICY_DENIED
        assert bad_args["error"]["data"]["rule"] == "args"
        good = await agent.request(
            "prompts/get",
            {
                "name": "ref__test_prompt_with_arguments",
                "arguments": {"arg1": "allowed", "arg2": "x"},
            },
        )
        assert "allowed" in good["result"]["messages"][0]["content"]["text"]

        for uri in (
            "ref+test://static-binary",
            "ref+test://template/999/data",
            "test://static-text",
        ):
            refused = await agent.request("resources/read", {"uri": uri})
            assert refused["error"]["code"] == RESOURCE_NOT_FOUND, uri
        read = await agent.request("resources/read", {"uri": "ref+test://template/123/data"})
        assert read["result"]["contents"][0]["uri"] == "ref+test://template/123/data"
        watched = await agent.request("resources/subscribe", {"uri": "ref+test://watched-resource"})
        assert watched["error"]["code"] == RESOURCE_NOT_FOUND
        subscribed, updates = await _exchange(
            agent, "resources/subscribe", {"uri": "ref+test://static-text"}
        )
        assert subscribed["result"] == {}
        updated = await agent.recv() if not updates else updates[0]
        assert updated == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "ref+test://static-text"},
        }

        assert (await agent.request("logging/setLevel", {"level": "debug"}))["error"][
            "code"
        ] == METHOD_NOT_FOUND
        completion = {
            "ref": {"type": "ref/prompt", "name": "ref__test_simple_prompt"},
            "argument": {"name": "a", "value": "p"},
        }
        assert (await agent.request("completion/complete", completion))["error"][
            "code"
        ] == METHOD_NOT_FOUND
        assert (await agent.request("tasks/list"))["error"]["code"] == METHOD_NOT_FOUND
        augmented = {"name": "ref__test_simple_text", "arguments": {}, "task": {"ttl": 1000}}
        assert (await agent.request("tools/call", augmented))["error"]["code"] == INVALID_PARAMS

        logged, seen = await _exchange(
            agent, "tools/call", {"name": "ref__test_tool_with_logging", "arguments": {}}
        )
        assert not logged["result"].get("isError")
        assert [m for m in seen if m.get("method") == "notifications/message"] == []
        for tool, argument in (
            ("ref__test_sampling", "prompt"),
            ("ref__test_elicitation", "message"),
            ("ref__test_roots", "unused"),
        ):
            answer, asked = await _exchange(
                agent, "tools/call", {"name": tool, "arguments": {argument: "x"}}
            )
            assert [m for m in asked if "method" in m and "id" in m] == []  # nothing relayed
            assert "error" in answer or answer["result"].get("isError")

    calls = read_calls(tmp_path / "calls")
    for never in (
        "prompt:test_prompt_with_image",
        "read:test://static-binary",
        "read:test://template/999/data",
        "subscribe:test://watched-resource",
        "complete",
        "setLevel:debug",
        "answered:sampling",
        "answered:elicitation",
        "answered:roots",
    ):
        assert never not in calls, never
    assert [c for c in calls if c.startswith("prompt:test_prompt_with_arguments")] == [
        "prompt:test_prompt_with_arguments"
    ]
    records = read_audit(tmp_path / "audit.log")
    decisions = {(r["kind"], r["decision"]) for r in records}
    assert {
        ("mcp.prompt", "deny"),
        ("mcp.prompt", "unknown_prompt"),
        ("mcp.prompt", "allow"),
        ("mcp.resource", "deny"),
        ("mcp.resource", "unknown_resource"),
        ("mcp.resource", "allow"),
        ("mcp.server_request", "deny"),
    } <= decisions
    denied_requests = {r["method"] for r in records if r["kind"] == "mcp.server_request"}
    assert denied_requests == {"sampling/createMessage", "elicitation/create", "roots/list"}


async def test_allowed_server_requests_reach_the_agent_and_back(tmp_path: Path) -> None:
    """With the policy's consent, a sampling request is relayed to the agent, audited, and
    the agent's answer goes back to the upstream; log messages arrive tagged."""
    async with raw_agent(_config(tmp_path, "allow-all")) as agent:
        await _initialize(agent)
        await agent.send(
            {
                "jsonrpc": "2.0",
                "id": "s",
                "method": "tools/call",
                "params": {"name": "ref__test_sampling", "arguments": {"prompt": "hello"}},
            }
        )
        relayed = await agent.recv()
        assert relayed["method"] == "sampling/createMessage"
        assert relayed["params"]["messages"][0]["content"]["text"] == "hello"
        assert str(relayed["id"]).startswith("glove-")
        answer = {"role": "assistant", "content": {"type": "text", "text": "hi back"}, "model": "m"}
        await agent.send({"jsonrpc": "2.0", "id": relayed["id"], "result": answer})
        result = await agent.recv()
        assert result["id"] == "s"
        assert result["result"]["content"][0]["text"] == "LLM response: hi back"
        await agent.send(
            {
                "jsonrpc": "2.0",
                "id": "r",
                "method": "tools/call",
                "params": {"name": "ref__test_roots", "arguments": {}},
            }
        )
        asked = await agent.recv()
        assert asked["method"] == "roots/list"
        roots = {"roots": [{"uri": "file:///srv/work", "name": "work"}]}
        await agent.send({"jsonrpc": "2.0", "id": asked["id"], "result": roots})
        answered = await agent.recv()
        assert answered["result"]["content"][0]["text"] == '["file:///srv/work"]'
        call = {"name": "ref__test_tool_with_logging", "arguments": {}}
        logged, seen = await _exchange(agent, "tools/call", call)
        assert "result" in logged
        logs = [m["params"] for m in seen if m.get("method") == "notifications/message"]
        assert [entry["logger"] for entry in logs] == ["ref/conformance"] * 3  # tagged
    assert "answered:sampling" in read_calls(tmp_path / "calls")
    relays = [r for r in read_audit(tmp_path / "audit.log") if r["kind"] == "mcp.server_request"]
    assert [(r["method"], r["decision"], r["upstream"]) for r in relays] == [
        ("sampling/createMessage", "allow", "ref"),
        ("roots/list", "allow", "ref"),
    ]


async def test_bare_names_are_transparent_and_collisions_fail_startup(tmp_path: Path) -> None:
    """A bare upstream keeps its own names; two bare upstreams with one tool name do not start."""
    config = _config(tmp_path, "allow-all", expose="bare")
    async with raw_agent(config) as agent:
        await _initialize(agent)
        tools = [t["name"] for t in (await agent.request("tools/list"))["result"]["tools"]]
        assert "test_simple_text" in tools
        read = await agent.request("resources/read", {"uri": "test://template/7/data"})
        assert read["result"]["contents"][0]["uri"] == "test://template/7/data"
    both = {"expose": "bare", "command": sdk_server("echo")}
    folder = tmp_path / "clash"
    folder.mkdir()
    clash = write_config(folder, {"one": both, "two": both}, "version = 1\n")
    with pytest.raises(ToolNameError) as failure:
        await start_mediation(load_config(clash))
    assert "'one'" in str(failure.value)
    assert "'two'" in str(failure.value)


FEATURE_SPLIT = """
version = 1

[[tools]]
name = "*__test_tool_with_logging"

[[prompts]]
name = "ref__test_simple_prompt"
[[prompts]]
name = "ok__test_simple_prompt"

[[features]]
id = "ok-may"
upstream = "ok"
allow = ["logging", "completion"]
"""


def _two_references(tmp_path: Path) -> Path:
    """Two conformance servers: ``ref`` (no features allowed) and ``ok`` (logging, completion)."""
    upstreams = {
        uid: {
            "command": [PYTHON, str(FIXTURE), "stdio"],
            "env": {"GLOVE_TEST_CALL_LOG": str(tmp_path / f"calls-{uid}")},
            "era": "legacy",
        }
        for uid in ("ref", "ok")
    }
    return write_config(tmp_path, upstreams, FEATURE_SPLIT)


def _completion(prompt: str) -> dict[str, Any]:
    return {"ref": {"type": "ref/prompt", "name": prompt}, "argument": {"name": "a", "value": "p"}}


async def test_logging_and_completion_are_decided_per_upstream_and_audited(
    tmp_path: Path,
) -> None:
    """With logging and completion allowed for one upstream only, the other never receives
    a setLevel or a completion: the denial (and the unknown reference) is audited with its
    reason, and the allowed upstream's calls are audited as allowed."""
    async with raw_agent(_two_references(tmp_path)) as agent:
        init = await _initialize(agent)
        assert {"logging", "completions"} <= set(init["capabilities"])
        assert (await agent.request("logging/setLevel", {"level": "debug"}))["result"] == {}
        denied = await agent.request("completion/complete", _completion("ref__test_simple_prompt"))
        assert denied["error"]["code"] == POLICY_DENIED
        hidden = await agent.request(
            "completion/complete", _completion("ref__test_prompt_with_image")
        )
        assert hidden["error"]["code"] == INVALID_PARAMS
        assert hidden["error"]["message"].startswith("Unknown prompt")
        template = {
            "ref": {"type": "ref/resource", "uri": "ref+test://template/{id}/data"},
            "argument": {"name": "id", "value": "1"},
        }
        unseen = await agent.request("completion/complete", template)
        assert unseen["error"]["code"] == RESOURCE_NOT_FOUND
        allowed = await agent.request("completion/complete", _completion("ok__test_simple_prompt"))
        assert allowed["result"]["completion"]["values"] == ["paris", "park", "party"]
        logged, seen = await _exchange(
            agent, "tools/call", {"name": "ref__test_tool_with_logging", "arguments": {}}
        )
        assert "result" in logged
        assert [m for m in seen if m.get("method") == "notifications/message"] == []
        logged, seen = await _exchange(
            agent, "tools/call", {"name": "ok__test_tool_with_logging", "arguments": {}}
        )
        assert "result" in logged
        logs = [m["params"] for m in seen if m.get("method") == "notifications/message"]
        assert [entry["logger"] for entry in logs] == ["ok/conformance"] * 3
    denied_calls = read_calls(tmp_path / "calls-ref")
    assert [c for c in denied_calls if c == "complete" or c.startswith("setLevel")] == []
    allowed_calls = read_calls(tmp_path / "calls-ok")
    assert [c for c in allowed_calls if c == "complete" or c.startswith("setLevel")] == [
        "setLevel:debug",
        "complete",
    ]
    records = read_audit(tmp_path / "audit.log")
    logging_records = [r for r in records if r["kind"] == "mcp.logging"]
    assert [(r["decision"], r["level"], r["upstreams"]) for r in logging_records] == [
        ("allow", "debug", ["ok"])
    ]
    completes = [
        (r["decision"], r.get("upstream"), r["target"], r.get("rule"), r["reason"])
        for r in records
        if r["kind"] == "mcp.complete"
    ]
    assert completes == [
        (
            "deny",
            "ref",
            "ref__test_simple_prompt",
            None,
            "no rule allows 'completion' for upstream 'ref' (deny by default)",
        ),
        (
            "unknown_ref",
            None,
            "ref__test_prompt_with_image",
            None,
            "no visible prompt or template",
        ),
        (
            "unknown_ref",
            None,
            "ref+test://template/{id}/data",
            None,
            "no visible prompt or template",
        ),
        (
            "allow",
            "ok",
            "ok__test_simple_prompt",
            "ok-may",
            "completion for upstream 'ok' is allowed by ok-may",
        ),
    ]


async def test_prompt_and_resource_list_changes_reach_the_sdk_agent(tmp_path: Path) -> None:
    """An upstream's prompts/list_changed and resources/list_changed reach the agent's SDK
    client, and the re-listed prompt and resource are served."""
    upstream = {"command": sdk_server("lists_changed"), "era": "legacy"}
    config = write_config(tmp_path, {"dyn": upstream}, "allow-all")
    received: list[str] = []
    both = asyncio.Event()

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str):
            received.append(method)
        if {PROMPTS_CHANGED, RESOURCES_CHANGED} <= set(received):
            both.set()

    params = glove_params(config)
    async with Client(params, mode="legacy", cache=None, message_handler=on_message) as client:
        assert [p.name for p in (await client.list_prompts()).prompts] == ["dyn__first"]
        await client.call_tool("dyn__grow", {})
        async with asyncio.timeout(RAW_TIMEOUT_S):
            await both.wait()
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert prompts == ["dyn__first", "dyn__second"]
        resources = [r.uri for r in (await client.list_resources()).resources]
        assert resources == ["dyn+dyn://first", "dyn+dyn://second"]


CAPABILITY_POLICY = """
version = 1

[[features]]
upstream = "asks"
allow = ["sampling"]
[[features]]
upstream = "all"
allow = ["sampling", "elicitation", "roots"]
"""


def _recorders(tmp_path: Path) -> Path:
    """Two raw upstreams that record the ``initialize`` params they receive."""
    upstreams = {
        uid: {
            "command": hostile_server("hang"),
            "env": {"GLOVE_TEST_INIT_LOG": str(tmp_path / f"init-{uid}")},
            "era": "legacy",
        }
        for uid in ("asks", "all")
    }
    return write_config(tmp_path, upstreams, CAPABILITY_POLICY)


def _declared(log: Path) -> list[dict[str, Any]]:
    """The client capabilities each ``initialize`` a recorder received declared."""
    return [json.loads(line)["capabilities"] for line in log.read_text().splitlines()]


async def test_each_upstream_is_told_only_the_client_features_its_policy_allows(
    tmp_path: Path,
) -> None:
    """An upstream allowed only sampling is declared only ``sampling``; over HTTP, where the
    agent is known first, each declaration is narrowed to (and copies) the agent's own."""
    async with raw_agent(_recorders(tmp_path)) as agent:
        await agent.initialize()
    assert _declared(tmp_path / "init-asks") == [{"sampling": {}}]
    assert _declared(tmp_path / "init-all") == [
        {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
    ]
    for log in ("init-asks", "init-all"):
        (tmp_path / log).unlink()

    config = load_config(_recorders(tmp_path))
    async with running(HttpFront(config, HttpOptions())) as front:
        assert front.port is not None
        for capabilities in (
            {"sampling": {"context": {}}, "elicitation": {"form": {}}, "roots": {}},
            {"elicitation": {}, "roots": {"listChanged": True}},
        ):
            status = await asyncio.to_thread(_http_initialize, front.port, capabilities)
            assert status == 200
    assert _declared(tmp_path / "init-asks") == [{"sampling": {"context": {}}}, {}]
    assert _declared(tmp_path / "init-all") == [
        {"sampling": {"context": {}}, "elicitation": {"form": {}}, "roots": {}},
        {"elicitation": {}, "roots": {"listChanged": True}},
    ]


def _http_initialize(port: int, capabilities: dict[str, Any]) -> int:
    """POST one ``initialize`` declaring ``capabilities``; return the HTTP status."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=RAW_TIMEOUT_S)
    try:
        connection.request("POST", "/mcp", json.dumps(body).encode(), headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()
