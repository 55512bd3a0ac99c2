"""Helpers for the MCP mediation tests: configs, fixture commands, a raw agent, SDK clients."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp import Client, StdioServerParameters

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
PEERS_BIN = REPO / "tests" / "peers" / "node_modules" / ".bin"
PYTHON = sys.executable
RAW_TIMEOUT_S = 20.0


def sdk_server(mode: str) -> list[str]:
    """The command of an ``mcp`` SDK fixture server."""
    return [PYTHON, str(FIXTURES / "sdk_server.py"), mode]


def hostile_server(mode: str) -> list[str]:
    """The command of the misbehaving raw-stdio fixture server."""
    return [PYTHON, str(FIXTURES / "hostile_server.py"), mode]


def npm_server(name: str) -> list[str]:
    """The command of an npm reference server installed by ``scripts/setup``."""
    program = PEERS_BIN / name
    if not program.exists():
        pytest.fail(f"{program} is missing: run scripts/setup (it installs the npm peers)")
    node = shutil.which("node")
    assert node is not None, "node is required for the npm peers"
    return [str(program)]


def toml_value(value: Any) -> str:
    """Render a JSON-like value as TOML (strings, numbers, lists, inline tables)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def write_config(
    folder: Path,
    upstreams: dict[str, dict[str, Any]],
    policy: str,
    *,
    audit: str = "audit.log",
) -> Path:
    """Write ``glove.toml`` and ``policy.toml`` into ``folder``; return the config path.

    ``policy = "allow-all"`` selects the built-in policy (no file is written).
    """
    builtin = policy == "allow-all"
    lines = [
        'policy = "allow-all"' if builtin else 'policy = "policy.toml"',
        f"audit = {json.dumps(audit)}",
    ]
    for upstream_id, fields in upstreams.items():
        lines.append(f"[upstreams.{upstream_id}]")
        merged = {"inherit_env": ["PATH", "HOME"], **fields}
        lines.extend(f"{key} = {toml_value(value)}" for key, value in merged.items())
    if not builtin:
        (folder / "policy.toml").write_text(policy)
    config = folder / "glove.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


ALLOW_ALL = 'version = 1\n\n[[tools]]\nname = "*"\n'


def glove_command(config: Path) -> list[str]:
    """The command line of ``glove mcp serve`` for ``config``."""
    return [PYTHON, "-m", "glove", "mcp", "serve", "--config", str(config)]


def glove_params(config: Path) -> StdioServerParameters:
    """Stdio parameters that make an SDK client launch Glove as its server."""
    command = glove_command(config)
    return StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))


def direct_params(command: list[str], env: dict[str, str] | None = None) -> StdioServerParameters:
    """Stdio parameters that make an SDK client launch an upstream directly."""
    base = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    return StdioServerParameters(command=command[0], args=command[1:], env={**base, **(env or {})})


@asynccontextmanager
async def sdk_client(params: StdioServerParameters, mode: str = "legacy") -> AsyncIterator[Client]:
    """An ``mcp`` SDK client connected to the server ``params`` launches."""
    async with Client(params, mode=mode, cache=None) as client:  # type: ignore[arg-type]
        yield client


def read_calls(log: Path) -> list[str]:
    """The tool invocations a fixture server recorded."""
    return log.read_text().split() if log.exists() else []


CALL_LOG_WAIT_S = 15.0


async def wait_for_call(log: Path, name: str, timeout: float = CALL_LOG_WAIT_S) -> list[str]:
    """Wait until the fixture server recorded ``name``; return everything it recorded."""
    async with asyncio.timeout(timeout):
        while name not in read_calls(log):
            await asyncio.sleep(0.02)
    return read_calls(log)


def read_audit(path: Path) -> list[dict[str, Any]]:
    """The audit records written so far."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class RawAgent:
    """An agent that writes raw frames to ``glove mcp serve`` and reads its replies."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._next_id = 0

    async def send_bytes(self, data: bytes) -> None:
        """Write bytes as they are."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message."""
        await self.send_bytes(json.dumps(message).encode() + b"\n")

    async def recv(self, timeout: float = RAW_TIMEOUT_S) -> dict[str, Any]:
        """Read one message (fails on EOF or timeout)."""
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        assert line, "glove closed its stdout"
        message: dict[str, Any] = json.loads(line)
        return message

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float = RAW_TIMEOUT_S
    ) -> dict[str, Any]:
        """Send a request and return its response, skipping notifications."""
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        while True:
            reply = await self.recv(timeout)
            if reply.get("id") == request_id:
                return reply

    async def initialize(self) -> dict[str, Any]:
        """Complete the handshake."""
        reply = await self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw"}},
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply


@asynccontextmanager
async def raw_agent(config: Path, *, preexec: Any = None) -> AsyncIterator[RawAgent]:
    """Start ``glove mcp serve`` with pipes for a raw agent; kill it on exit."""
    with (config.parent / "stderr.log").open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *glove_command(config),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            limit=64 * 1024 * 1024,
            preexec_fn=preexec,
        )
    try:
        yield RawAgent(proc)
    finally:
        if proc.returncode is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
