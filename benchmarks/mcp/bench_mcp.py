"""tools/call round trip: direct vs ``glove mcp serve`` vs mcp-proxy (PyPI), same client, same run.

Usage::

    .venv/bin/python benchmarks/mcp/bench_mcp.py [--calls 1000] [--no-peer]

The upstream is the SDK echo fixture (``tests/mcp/fixtures/sdk_server.py echo``) over stdio.
Targets:

* ``direct``: the client launches the echo server itself;
* ``glove``: the client launches ``glove mcp serve`` (allow-all policy; audit log on the
  disk in a fresh directory under the system temp directory, one fdatasync per call, as in
  production; removed afterwards);
* ``glove-tmpfs``: the same with the audit log on /dev/shm, to separate the cost of the
  fdatasync from the cost of mediation;
* ``mcp-proxy``: sparfenyuk's mcp-proxy 0.13 (PyPI) serving the echo server over streamable
  HTTP; it pins ``mcp<2``, so it is installed into a venv of its own
  (``/var/tmp/glove-bench/peer-venv``, made on first use).

Two clients: the ``mcp`` SDK client (all targets) and a minimal raw newline-JSON client
(stdio targets only), which shows the mediation cost without the SDK client's own overhead.
Results are ratios against ``direct`` from the same run; nothing here is a test assertion.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
ECHO = [PYTHON, str(REPO / "tests" / "mcp" / "fixtures" / "sdk_server.py"), "echo"]
PEER_VENV = Path("/var/tmp/glove-bench/peer-venv")
PEER_PACKAGE = "mcp-proxy==0.13.0"
WARMUP_CALLS = 50

Call = Callable[[], Awaitable[None]]


def _config(folder: Path, audit_dir: Path) -> Path:
    (folder / "policy.toml").write_text('version = 1\n\n[[tools]]\nname = "*"\n')
    config = folder / "glove.toml"
    command = json.dumps(ECHO)
    config.write_text(
        f'policy = "policy.toml"\naudit = "{audit_dir / "audit.log"}"\n'
        f'[upstreams.echo]\ncommand = {command}\ninherit_env = ["PATH", "HOME"]\n'
        'era = "legacy"\n'
    )
    return config


def _glove(config: Path) -> list[str]:
    return [PYTHON, "-m", "glove", "mcp", "serve", "--config", str(config)]


async def _timed(call: Call, calls: int) -> tuple[list[float], float]:
    samples = []
    started = time.perf_counter()
    for _ in range(calls):
        t0 = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t0)
    return samples, time.perf_counter() - started


def _stats(samples: list[float], elapsed: float) -> dict[str, float]:
    samples = sorted(samples)
    return {
        "p50_ms": statistics.median(samples) * 1e3,
        "p99_ms": samples[max(0, int(len(samples) * 0.99) - 1)] * 1e3,
        "calls_per_s": len(samples) / elapsed,
    }


@asynccontextmanager
async def _sdk(target: StdioServerParameters | str, tool: str) -> AsyncIterator[Call]:
    async with Client(target, mode="legacy", cache=None) as client:  # type: ignore[arg-type]

        async def call() -> None:
            result = await client.call_tool(tool, {"text": "ping"})
            assert not result.is_error

        yield call


class _RawClient:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        while True:
            reply: dict[str, Any] = json.loads(await self.proc.stdout.readline())
            if reply.get("id") == self.next_id:
                return reply


@asynccontextmanager
async def _raw(command: list[str], tool: str) -> AsyncIterator[Call]:
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ},
    )
    client = _RawClient(proc)
    try:
        await client.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        assert proc.stdin is not None
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

        async def call() -> None:
            reply = await client.request("tools/call", {"name": tool, "arguments": {"text": "p"}})
            assert "result" in reply

        yield call
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await proc.wait()


def _ensure_peer() -> Path:
    program = PEER_VENV / "bin" / "mcp-proxy"
    if not program.exists():
        PEER_VENV.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(PEER_VENV)], check=True)
        pip = [str(PEER_VENV / "bin" / "pip"), "install", "-q", PEER_PACKAGE]
        subprocess.run(pip, check=True)
    return program


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def _peer() -> AsyncIterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [str(_ensure_peer()), "--port", str(port), "--host", "127.0.0.1", *ECHO],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _stdio(command: list[str]) -> StdioServerParameters:
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    return StdioServerParameters(command=command[0], args=command[1:], env=env)


async def main() -> None:
    """Run every target with both clients, interleaved in rounds, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per row")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--no-peer", action="store_true", help="skip mcp-proxy")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="glove-bench-"))
    shm = Path(tempfile.mkdtemp(prefix="glove-bench-", dir="/dev/shm"))
    per_round = max(1, args.calls // args.rounds)
    try:

        def glove(name: str, audit_dir: Path) -> list[str]:
            # One folder and one audit log per Glove instance: the log takes a writer lock.
            folder = work / name
            folder.mkdir()
            audit = audit_dir / name
            audit.mkdir(exist_ok=True)
            return _glove(_config(folder, audit))

        async with AsyncExitStack() as stack:
            targets: list[tuple[str, str, Call]] = [
                ("sdk", "direct", await stack.enter_async_context(_sdk(_stdio(ECHO), "echo"))),
                (
                    "sdk",
                    "glove",
                    await stack.enter_async_context(
                        _sdk(_stdio(glove("sdk-disk", work)), "echo__echo")
                    ),
                ),
                (
                    "sdk",
                    "glove-tmpfs",
                    await stack.enter_async_context(
                        _sdk(_stdio(glove("sdk-tmpfs", shm)), "echo__echo")
                    ),
                ),
            ]
            if not args.no_peer:
                url = await stack.enter_async_context(_peer())
                targets.append(
                    ("sdk", "mcp-proxy", await stack.enter_async_context(_sdk(url, "echo")))
                )
            targets += [
                ("raw", "direct", await stack.enter_async_context(_raw(ECHO, "echo"))),
                (
                    "raw",
                    "glove",
                    await stack.enter_async_context(_raw(glove("raw-disk", work), "echo__echo")),
                ),
                (
                    "raw",
                    "glove-tmpfs",
                    await stack.enter_async_context(_raw(glove("raw-tmpfs", shm), "echo__echo")),
                ),
            ]
            for _, _, call in targets:
                await _timed(call, WARMUP_CALLS)
            samples: dict[int, list[float]] = {index: [] for index in range(len(targets))}
            elapsed = dict.fromkeys(samples, 0.0)
            for _ in range(args.rounds):
                for index, (_, _, call) in enumerate(targets):
                    got, took = await _timed(call, per_round)
                    samples[index] += got
                    elapsed[index] += took
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    rows = [
        (client, target, _stats(samples[index], elapsed[index]))
        for index, (client, target, _) in enumerate(targets)
    ]
    base = {client: stats for client, target, stats in rows if target == "direct"}
    print(
        f"tools/call round trip: {per_round * args.rounds} sequential warm calls per row in "
        f"{args.rounds} interleaved rounds, {os.cpu_count()} cpus"
    )
    print(
        "| client | target | p50 ms | p99 ms | calls/s | added p50 ms | p50 ratio | calls/s ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for client, target, stats in rows:
        ref = base[client]
        print(
            f"| {client} | {target} | {stats['p50_ms']:.3f} | {stats['p99_ms']:.3f} | "
            f"{stats['calls_per_s']:.0f} | {stats['p50_ms'] - ref['p50_ms']:+.3f} | "
            f"{stats['p50_ms'] / ref['p50_ms']:.2f} | "
            f"{stats['calls_per_s'] / ref['calls_per_s']:.2f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
