"""Prompts, resources, logging, completion and server-to-client requests under policy.

The upstream is the conformance reference server over stdio; it records every request it
serves (``GLOVE_TEST_CALL_LOG``), so each denial is proven never to reach it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from glove.mcp import ToolNameError, start_mediation
from glove.mcp._config import load_config
from glove.mcp.errors import INVALID_PARAMS, METHOD_NOT_FOUND, POLICY_DENIED

from .conformance import FIXTURE, PYTHON
from .conftest import RawAgent, raw_agent, read_audit, read_calls, sdk_server, write_config

RESOURCE_NOT_FOUND = -32002
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
