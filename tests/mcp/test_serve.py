"""``glove mcp serve`` end to end: the SDK client as the agent, real upstream servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from glove.mcp._contracts import arguments_digest
from glove.mcp.errors import INVALID_PARAMS, POLICY_DENIED

from .conftest import (
    ALLOW_ALL,
    direct_params,
    glove_params,
    npm_server,
    read_audit,
    read_calls,
    sdk_client,
    sdk_server,
    write_config,
)


def _outcome(result: CallToolResult) -> tuple[Any, Any, bool]:
    """What parity compares: content, structured content and the error flag."""
    content = [item.model_dump(exclude_none=True) for item in result.content]
    return content, result.structured_content, bool(result.is_error)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stock_client_connects_in_both_modes(tmp_path: Path, mode: str) -> None:
    """The SDK client connects whether it probes server/discover first or not."""
    config = write_config(tmp_path, {"echo": {"command": sdk_server("echo")}}, ALLOW_ALL)
    async with sdk_client(glove_params(config), mode) as client:
        assert client.protocol_version == "2025-11-25"
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "echo__echo" in names
        result = await client.call_tool("echo__echo", {"text": "hello"})
        assert _outcome(result)[0] == [{"type": "text", "text": "hello"}]


ECHO_CALLS = [
    ("echo", {"text": "parity"}),
    ("add", {"a": 2, "b": 40}),
    ("huge", {"size": 300_000}),
    ("add", {"a": "not a number", "b": 1}),
]


async def test_parity_with_the_sdk_echo_server(tmp_path: Path) -> None:
    """Each call gives the same result direct and through Glove (names aside)."""
    config = write_config(tmp_path, {"echo": {"command": sdk_server("echo")}}, ALLOW_ALL)
    async with sdk_client(direct_params(sdk_server("echo"))) as direct:
        expected_tools = {tool.name: tool for tool in (await direct.list_tools()).tools}
        expected = [_outcome(await direct.call_tool(name, args)) for name, args in ECHO_CALLS]
    async with sdk_client(glove_params(config)) as glove:
        tools = {tool.name: tool for tool in (await glove.list_tools()).tools}
        got = [_outcome(await glove.call_tool(f"echo__{n}", a)) for n, a in ECHO_CALLS]
    assert got == expected
    assert expected[3][2] is True  # the SDK's own validation error passes through as isError
    assert sorted(tools) == sorted(f"echo__{name}" for name in expected_tools)
    for name, tool in expected_tools.items():
        mediated = tools[f"echo__{name}"]
        assert mediated.description == tool.description
        assert mediated.input_schema == tool.input_schema


async def test_pagination_is_flattened(tmp_path: Path) -> None:
    """Tools on every upstream page are listed and callable through Glove."""
    config = write_config(tmp_path, {"paged": {"command": sdk_server("paginated")}}, ALLOW_ALL)
    async with sdk_client(glove_params(config)) as client:
        listed = await client.list_tools()
        names = [tool.name for tool in listed.tools]
        assert names == [f"paged__tool{index}" for index in range(8)]
        assert listed.next_cursor is None
        result = await client.call_tool("paged__tool7", {"x": 1})
        assert _outcome(result)[0] == [{"type": "text", "text": "called tool7"}]


EVERYTHING_CALLS = [
    ("echo", {"message": "hi from the agent"}),
    ("get-sum", {"a": 3, "b": 4}),
    ("get-structured-content", {"location": "New York"}),
    ("get-tiny-image", {}),
    ("get-annotated-message", {"messageType": "error", "includeImage": False}),
]


async def test_parity_with_server_everything(tmp_path: Path) -> None:
    """The npm reference server answers the same through Glove, progress included."""
    command = npm_server("mcp-server-everything")
    config = write_config(tmp_path, {"everything": {"command": command}}, ALLOW_ALL)

    async def run(client: Any, prefix: str) -> tuple[list[Any], list[float]]:
        outcomes = [_outcome(await client.call_tool(prefix + n, a)) for n, a in EVERYTHING_CALLS]
        steps: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append(progress)

        await client.call_tool(
            prefix + "trigger-long-running-operation",
            {"duration": 0.3, "steps": 3},
            progress_callback=on_progress,
        )
        return outcomes, steps

    async with sdk_client(direct_params(command)) as direct:
        expected, expected_steps = await run(direct, "")
    async with sdk_client(glove_params(config)) as glove:
        got, steps = await run(glove, "everything__")
    assert got == expected
    assert steps == expected_steps == [1, 2, 3]


async def test_upstream_environment_is_scrubbed(tmp_path: Path) -> None:
    """server-everything's get-env shows none of the agent-side environment."""
    command = npm_server("mcp-server-everything")
    config = write_config(
        tmp_path, {"everything": {"command": command, "env": {"ALLOWED_VAR": "yes"}}}, ALLOW_ALL
    )
    params = glove_params(config)
    params.env = {**(params.env or {}), "GLOVE_TEST_SECRET": "s3cret-value"}
    async with sdk_client(params) as client:
        result = await client.call_tool("everything__get-env", {})
    text = _outcome(result)[0][0]["text"]
    assert "ALLOWED_VAR" in text
    assert "GLOVE_TEST_SECRET" not in text
    assert "s3cret-value" not in text


FS_POLICY = """version = 1

[[tools]]
name = "fs__list_allowed_directories"

[[tools]]
name = "fs__read_text_file"
[[tools.args]]
pointer = "/path"
op = "path"
roots = ["{root}"]
"""


async def test_filesystem_path_rules(tmp_path: Path) -> None:
    """server-filesystem reads inside the root; traversal and hidden tools are refused."""
    root = tmp_path / "allowed"
    root.mkdir()
    (root / "a.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    command = [*npm_server("mcp-server-filesystem"), str(tmp_path)]
    config = write_config(tmp_path, {"fs": {"command": command}}, FS_POLICY.format(root=root))
    async with sdk_client(direct_params(command)) as direct:
        expected = _outcome(await direct.call_tool("read_text_file", {"path": str(root / "a.txt")}))
    async with sdk_client(glove_params(config)) as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        assert names == ["fs__list_allowed_directories", "fs__read_text_file"]
        inside = await client.call_tool("fs__read_text_file", {"path": str(root / "a.txt")})
        assert _outcome(inside) == expected
        assert _outcome(inside)[0][0]["text"] == "inside"
        for path in (f"{root}/../secret.txt", str(tmp_path / "secret.txt"), "~/x"):
            with pytest.raises(MCPError) as denied:
                await client.call_tool("fs__read_text_file", {"path": path})
            assert denied.value.code == POLICY_DENIED
        with pytest.raises(MCPError) as hidden:
            await client.call_tool("fs__write_file", {"path": str(root / "w"), "content": "x"})
        assert hidden.value.code == INVALID_PARAMS
    assert not (root / "w").exists()
    decisions = [record["decision"] for record in read_audit(tmp_path / "audit.log")]
    assert decisions == ["allow", "deny", "deny", "deny", "deny"]


ECHO_POLICY = """version = 1

[[tools]]
name = "echo__echo"

[[tools]]
name = "echo__add"
[[tools.args]]
pointer = "/a"
op = "range"
min = 0
max = 100

[[tools]]
name = "echo__login"
[[tools.args]]
pointer = "/user"
op = "in"
values = ["alice", "bob"]

[[tools]]
name = "echo__write_*"
effect = "deny"

[[tools]]
name = "echo__env"
description_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
"""


async def test_every_denial_never_reaches_the_upstream(tmp_path: Path) -> None:
    """Hidden, denied-by-argument, unknown and pin-broken calls never reach the server."""
    log = tmp_path / "calls"
    env = {"GLOVE_TEST_CALL_LOG": str(log)}
    config = write_config(
        tmp_path, {"echo": {"command": sdk_server("echo"), "env": env}}, ECHO_POLICY
    )
    attempts: list[tuple[str, dict[str, Any], int]] = [
        ("echo__add", {"a": 1000, "b": 1}, POLICY_DENIED),
        ("echo__add", {"b": 1}, POLICY_DENIED),
        ("echo__login", {"user": "mallory", "token": "s3cret-token"}, POLICY_DENIED),
        ("echo__write_file", {"path": str(tmp_path / "w"), "content": "x"}, INVALID_PARAMS),
        ("echo__slow", {"seconds": 0}, INVALID_PARAMS),
        ("echo__env", {}, INVALID_PARAMS),
        ("nothere__echo", {"text": "x"}, INVALID_PARAMS),
    ]
    async with sdk_client(glove_params(config)) as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        assert names == ["echo__add", "echo__echo", "echo__login"]
        for name, arguments, code in attempts:
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, arguments)
            assert refused.value.code == code, name
        allowed = await client.call_tool("echo__login", {"user": "alice", "token": "s3cret-token"})
        assert _outcome(allowed)[0][0]["text"] == "hello alice"
    assert read_calls(log) == ["login"]
    assert not (tmp_path / "w").exists()
    audit_text = (tmp_path / "audit.log").read_text()
    assert "s3cret-token" not in audit_text
    records = read_audit(tmp_path / "audit.log")
    assert [r["decision"] for r in records] == [
        "deny",
        "deny",
        "deny",
        "deny",
        "deny",
        "deny",
        "unknown_tool",
        "allow",
    ]
    assert records[0]["inspected"] == {"/a": 1000}
    assert records[0]["rule"] == "tools[1]"
    assert records[2]["inspected"] == {"/user": "mallory"}
    # Each digest is of the canonical JSON of what the agent sent (keys sorted).
    sent = [
        *(arguments for _, arguments, _ in attempts),
        {"user": "alice", "token": "s3cret-token"},
    ]
    tool_records = [r for r in records if "tool" in r]
    assert [r["args_sha256"] for r in tool_records] == [arguments_digest(a) for a in sent]
    assert records[-1]["upstream"] == "echo"
    assert records[-1]["upstream_tool"] == "login"


async def test_two_upstreams_are_namespaced(tmp_path: Path) -> None:
    """Two servers with the same tool names are told apart by their configured ids."""
    config = write_config(
        tmp_path,
        {"one": {"command": sdk_server("echo")}, "two": {"command": sdk_server("echo")}},
        ALLOW_ALL,
    )
    async with sdk_client(glove_params(config)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"one__echo", "two__echo"} <= names
        for prefix in ("one", "two"):
            result = await client.call_tool(f"{prefix}__echo", {"text": prefix})
            assert _outcome(result)[0][0]["text"] == prefix


async def test_a_correct_pin_keeps_the_tool(tmp_path: Path) -> None:
    """Pinned to the digests of its current definition, a tool is listed and callable."""
    from glove.policy import ToolDefinition, definition_digests

    async with sdk_client(direct_params(sdk_server("echo"))) as direct:
        tool = next(t for t in (await direct.list_tools()).tools if t.name == "echo")
    description, schema = definition_digests(
        ToolDefinition(tool.name, tool.description, tool.input_schema)
    )
    policy = (
        f'version = 1\n\n[[tools]]\nname = "echo__echo"\n'
        f'description_sha256 = "{description.removeprefix("sha256:")}"\n'
        f'schema_sha256 = "{schema.removeprefix("sha256:")}"\n'
    )
    config = write_config(tmp_path, {"echo": {"command": sdk_server("echo")}}, policy)
    async with sdk_client(glove_params(config)) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["echo__echo"]
        result = await client.call_tool("echo__echo", {"text": "pinned"})
    assert _outcome(result)[0][0]["text"] == "pinned"
