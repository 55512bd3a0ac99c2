#!/usr/bin/python3
"""A small filesystem MCP server for the example (standard library only, like the agent).

    fs_server.py ROOT

It speaks MCP over stdio (newline-delimited JSON-RPC, protocol 2025-11-25 back to
2024-11-05) and offers three tools on the files under ROOT, named and shaped as the
reference server ``@modelcontextprotocol/server-filesystem`` names and shapes them:
``list_directory`` (``[FILE] name`` / ``[DIR] name`` lines), ``read_text_file`` and
``write_file``. It refuses a path outside ROOT itself (after resolving symlinks), so it is
safe even without Glove; under ``glove run`` the policy decides first what the agent may
ask. ``examples/mediated-agent/run`` uses it unless ``GLOVE_EXAMPLE_SERVER`` names another
server (the reference one, say: ``tests/peers/node_modules/.bin/mcp-server-filesystem``,
which ``scripts/setup test`` installs), so the example needs no Node.js.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MAX_READ_BYTES = 1024 * 1024
PATH_ARG = {"path": {"type": "string", "description": "An absolute path under the root."}}
TOOLS = [
    {
        "name": "list_directory",
        "description": "List a directory's entries, each prefixed [FILE] or [DIR].",
        "inputSchema": {"type": "object", "properties": PATH_ARG, "required": ["path"]},
    },
    {
        "name": "read_text_file",
        "description": f"Read a UTF-8 text file (at most {MAX_READ_BYTES} bytes).",
        "inputSchema": {"type": "object", "properties": PATH_ARG, "required": ["path"]},
    },
    {
        "name": "write_file",
        "description": "Create or replace a text file.",
        "inputSchema": {
            "type": "object",
            "properties": {**PATH_ARG, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
]


class Refused(Exception):
    """A tool call this server will not do (returned as a tool error, not a crash)."""


class NoSuchMethod(Exception):
    """A request for a method this server does not have."""


def inside(root: Path, path: object) -> Path:
    """``path`` resolved, if it lies under ``root``; :class:`Refused` otherwise."""
    if not isinstance(path, str) or not Path(path).is_absolute():
        raise Refused("path must be an absolute path")
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(root):
        raise Refused(f"access denied: {path} is outside {root}")
    return resolved


def call(root: Path, name: str, args: object) -> str:
    """Run tool ``name``; its text result."""
    if not isinstance(args, dict):
        raise Refused("arguments must be an object")
    path = inside(root, args.get("path"))
    try:
        if name == "list_directory":
            with os.scandir(path) as entries:
                rows = [f"[{'DIR' if e.is_dir() else 'FILE'}] {e.name}" for e in entries]
            return "\n".join(sorted(rows, key=lambda row: row.split(" ", 1)[1]))
        if name == "read_text_file":
            with path.open("rb") as handle:
                return handle.read(MAX_READ_BYTES).decode("utf-8", errors="replace")
        if name == "write_file":
            content = args.get("content")
            if not isinstance(content, str):
                raise Refused("content must be a string")
            with path.open("w", encoding="utf-8") as handle:
                handle.write(content)
            return f"Successfully wrote to {args['path']}"
    except OSError as exc:
        raise Refused(f"{args['path']}: {exc.strerror}") from exc
    raise Refused(f"unknown tool {name!r}")


def answer(root: Path, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The result of one request; :class:`NoSuchMethod` for a method this server lacks."""
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "glove-example-fs", "version": "1"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        try:
            text = call(root, str(params.get("name")), params.get("arguments") or {})
        except Refused as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        return {"content": [{"type": "text", "text": text}]}
    raise NoSuchMethod(method)


def main() -> int:
    """Serve requests from stdin until it closes."""
    if len(sys.argv) != 2:
        print("usage: fs_server.py ROOT", file=sys.stderr)
        return 2
    root = Path(sys.argv[1]).resolve()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            continue  # a notification or a response: nothing to answer
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        try:
            reply["result"] = answer(root, message["method"], params)
        except NoSuchMethod:
            reply["error"] = {"code": -32601, "message": f"Method not found: {message['method']}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
