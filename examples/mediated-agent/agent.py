#!/usr/bin/python3
"""A small agent that uses mediated MCP tools from inside ``glove run`` (standard library only).

It starts the MCP server Glove put in the sandbox (``$GLOVE_MCP_COMMAND``, that is
``/opt/glove/glove-mcp``) as any MCP client would, over stdio, and then:

1. lists the tools the policy lets it see;
2. calls an allowed one (``fs__list_directory`` on its own workspace, the directory it
   starts in: the same path the host-side filesystem server uses);
3. tries a call the policy refuses (``fs__write_file``, hidden by the policy) and one whose
   arguments it refuses (a listing outside the workspace);
4. prints what happened as JSON lines, one per step.

Nothing here is Glove-specific except the variable that names the server: point any MCP
client (Claude Code's ``.mcp.json``, Codex's ``config.toml``) at ``/opt/glove/glove-mcp``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
REPLY_TIMEOUT_S = 30.0


class McpClient:
    """A minimal MCP client over a child process's stdin/stdout (newline-delimited JSON-RPC)."""

    def __init__(self, command: list[str]) -> None:
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ)
        )
        self._next_id = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return its response object (result or error)."""
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)
        while True:
            line = self._proc.stdout.readline() if self._proc.stdout else b""
            if not line:
                raise RuntimeError(f"the MCP server closed its output during {method}")
            reply = json.loads(line)
            if reply.get("id") == self._next_id:
                return reply
            # A notification or a request from the server: this agent needs none.

    def notify(self, method: str) -> None:
        """Send a notification (no reply)."""
        self._send({"jsonrpc": "2.0", "method": method})

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")
        self._proc.stdin.flush()

    def close(self) -> None:
        """Close the server's stdin and wait for it."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=REPLY_TIMEOUT_S)


def say(step: str, **fields: Any) -> None:
    """Print one step's outcome as a JSON line."""
    print(json.dumps({"step": step, **fields}), flush=True)


def main() -> int:
    """Run the four steps; exit 0 when the allowed call worked and both refusals held."""
    command = os.environ.get("GLOVE_MCP_COMMAND")
    if not command:
        print("GLOVE_MCP_COMMAND is not set: run me under `glove run`", file=sys.stderr)
        return 2
    workspace = os.getcwd()
    client = McpClient([command])
    try:
        client.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "glove-example-agent", "version": "1"},
            },
        )
        client.notify("notifications/initialized")
        tools = [tool["name"] for tool in client.request("tools/list")["result"]["tools"]]
        say("list", tools=tools)
        listed = client.request(
            "tools/call", {"name": "fs__list_directory", "arguments": {"path": workspace}}
        )
        text = "".join(
            part.get("text", "") for part in listed.get("result", {}).get("content", [])
        )
        say("allowed", workspace=workspace, ok="result" in listed, listing=text.splitlines())
        hidden = client.request(
            "tools/call",
            {"name": "fs__write_file", "arguments": {"path": f"{workspace}/x", "content": "x"}},
        )
        say("hidden", error=hidden.get("error"))
        outside = client.request(
            "tools/call", {"name": "fs__list_directory", "arguments": {"path": "/etc"}}
        )
        say("outside", error=outside.get("error"))
    finally:
        client.close()
    held = "result" in listed and "error" in hidden and "error" in outside
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
