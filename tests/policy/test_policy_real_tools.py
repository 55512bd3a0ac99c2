"""Pins from a real server's tools/list, made by ``glove policy pin``, hold through the mediator.

The real npm ``server-filesystem`` is asked for its tools over raw stdio JSON-RPC (the
bytes an operator would review), ``glove policy pin`` turns them into rules, and the
mediator, with a stock ``mcp`` SDK client as the agent, must list exactly the pinned tools
whose pins still match, refuse the one whose reviewed definition differs, and never let
that call reach the server.
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
FILESYSTEM_SERVER = REPO / "tests" / "peers" / "node_modules" / ".bin" / "mcp-server-filesystem"
RAW_TIMEOUT_S = 30.0
MAX_PAGES = 50


def _server_command(root: Path) -> list[str]:
    if not FILESYSTEM_SERVER.exists() or shutil.which("node") is None:
        pytest.fail(f"{FILESYSTEM_SERVER} or node is missing: run scripts/setup")
    return [str(FILESYSTEM_SERVER), str(root)]


async def _raw_tools_list(command: list[str]) -> list[dict[str, Any]]:
    """The tool objects exactly as the server sends them (legacy handshake, all pages)."""
    env = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None

    async def request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None
        assert proc.stdout is not None
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        proc.stdin.write(json.dumps(frame).encode() + b"\n")
        await proc.stdin.drain()
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), RAW_TIMEOUT_S)
            assert line, "the server closed its stdout"
            message = json.loads(line)
            if message.get("id") == request_id:
                assert "result" in message, message
                result: dict[str, Any] = message["result"]
                return result

    try:
        await request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "glove-policy-test", "version": "0"},
            },
        )
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for page in range(MAX_PAGES):
            result = await request(2 + page, "tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
        pytest.fail("tools/list did not end")
    finally:
        proc.kill()
        await proc.wait()


def _glove_policy(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "glove", "policy", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _write_config(folder: Path, command: list[str], policy: str) -> Path:
    (folder / "policy.toml").write_text(policy)
    config = folder / "glove.toml"
    config.write_text(
        'policy = "policy.toml"\naudit = "audit.log"\n[upstreams.fs]\n'
        f"command = {json.dumps(command)}\n"
        'inherit_env = ["PATH", "HOME"]\nera = "legacy"\n'
    )
    return config


@pytest.mark.parametrize("full", [False, True], ids=["schema-pins", "full-definition-pins"])
async def test_pins_from_a_real_tools_list_hold_through_the_mediator(
    tmp_path: Path, full: bool
) -> None:
    """Matching pins list and call; a pin that differs hides the tool and blocks its call."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("pinned and read")
    command = _server_command(root)
    tools = await _raw_tools_list(command)
    names = {tool["name"] for tool in tools}
    assert {"read_text_file", "create_directory", "list_allowed_directories"} <= names

    extra = ["--full"] if full else []
    pinned = _glove_policy(
        "pin", "-", "--upstream", "fs", *extra, stdin=json.dumps({"tools": tools})
    )
    assert pinned.returncode == 0, pinned.stderr
    # Without --full the whole-definition digest is only shown, commented out.
    assert ("\ndefinition_sha256 = " in pinned.stdout) is full
    assert pinned.stdout.count("[[tools]]") == len(tools)
    # The reviewed create_directory differs from what the server now advertises: a rug pull.
    rules = pinned.stdout.split("[[tools]]\n")
    for index, rule in enumerate(rules):
        if rule.startswith('name = "fs__create_directory"'):
            digest_line = next(line for line in rule.splitlines() if line.startswith("schema_"))
            rules[index] = rule.replace(digest_line, f'schema_sha256 = "{"0" * 64}"')
    policy = "version = 1\n" + "[[tools]]\n".join(rules)
    config = _write_config(tmp_path, command, policy)
    assert _glove_policy("check", str(tmp_path / "policy.toml")).returncode == 0

    glove = [sys.executable, "-m", "glove", "mcp", "serve", "--config", str(config)]
    params = StdioServerParameters(command=glove[0], args=glove[1:], env=dict(os.environ))
    async with Client(params, mode="legacy", cache=None) as client:  # type: ignore[arg-type]
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert listed == {f"fs__{name}" for name in names} - {"fs__create_directory"}
        result = await client.call_tool("fs__read_text_file", {"path": str(root / "a.txt")})
        assert not result.is_error
        assert "pinned and read" in json.dumps(result.model_dump(mode="json"))
        with pytest.raises(MCPError):
            await client.call_tool("fs__create_directory", {"path": str(root / "made")})
    assert not (root / "made").exists()
    audit = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    denied = [record for record in audit if record.get("tool") == "fs__create_directory"]
    assert [record["decision"] for record in denied] == ["deny"]
    assert "schema_sha256" in denied[0]["reason"]


SYMLINK_POLICY = """version = 1

[[tools]]
name = "fs__read_text_file"
[[tools.args]]
pointer = "/path"
op = "path"
roots = ["{root}"]
"""


async def test_symlinks_are_beyond_the_lexical_check(tmp_path: Path) -> None:
    """The documented limit: a symlink inside a root passes the policy; the server refuses it."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("must not leak")
    (root / "link").symlink_to(outside)
    command = _server_command(root)
    config = _write_config(tmp_path, command, SYMLINK_POLICY.format(root=root))
    glove = [sys.executable, "-m", "glove", "mcp", "serve", "--config", str(config)]
    params = StdioServerParameters(command=glove[0], args=glove[1:], env=dict(os.environ))
    async with Client(params, mode="legacy", cache=None) as client:  # type: ignore[arg-type]
        try:
            result = await client.call_tool(
                "fs__read_text_file", {"path": str(root / "link" / "secret.txt")}
            )
            leaked = json.dumps(result.model_dump(mode="json"))
            assert result.is_error
        except MCPError as exc:
            leaked = str(exc)
        assert "must not leak" not in leaked
    audit = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    calls = [record for record in audit if record.get("tool") == "fs__read_text_file"]
    # The policy allowed it (lexically inside the root); the upstream's realpath refused it.
    assert calls[0]["decision"] == "allow"
