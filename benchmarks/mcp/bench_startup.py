"""Start-up: time from spawning a server to the first ``tools/list`` answer, direct vs Glove.

Usage::

    .venv/bin/python benchmarks/mcp/bench_startup.py [--rounds 15]

Each round spawns, in turn, the SDK echo fixture directly and ``glove mcp serve`` mediating
it (``era = "legacy"`` and ``era = "auto"``), sends ``initialize``, ``notifications/initialized``
and ``tools/list`` as a raw client, and times until the ``tools/list`` answer. The figure the
issue asks for is Glove's *added* start-up: median(glove) - median(direct), in the same run.
Nothing here is a test assertion.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
ECHO = [PYTHON, str(REPO / "tests" / "mcp" / "fixtures" / "sdk_server.py"), "echo"]
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "b", "version": "0"},
}


def _config(folder: Path, era: str) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "glove.toml").write_text(
        'policy = "allow-all"\naudit = "audit.log"\n[upstreams.echo]\n'
        f'command = {json.dumps(ECHO)}\ninherit_env = ["PATH", "HOME"]\nera = "{era}"\n'
    )
    return [PYTHON, "-m", "glove", "mcp", "serve", "--config", str(folder / "glove.toml")]


async def _first_list(command: list[str]) -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ},
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    while True:
        reply = json.loads(await proc.stdout.readline())
        if reply.get("id") == 2:
            took = time.perf_counter() - started
            break
    proc.stdin.close()
    await proc.wait()
    return took


async def main() -> None:
    """Interleave the targets round by round and print medians and the added start-up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="glove-bench-startup-"))
    try:
        targets = {
            "direct": ECHO,
            "glove era=legacy": _config(work / "legacy", "legacy"),
            "glove era=auto": _config(work / "auto", "auto"),
        }
        samples: dict[str, list[float]] = {name: [] for name in targets}
        for command in targets.values():
            await _first_list(command)  # warm the page cache
        for _ in range(args.rounds):
            for name, command in targets.items():
                samples[name].append(await _first_list(command))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(samples["direct"])
    rounds = f"{args.rounds} interleaved rounds, {os.cpu_count()} cpus"
    print(f"first tools/list answer after spawn: {rounds}")
    print("| target | median ms | min ms | added ms | ratio |")
    print("|---|---|---|---|---|")
    for name, got in samples.items():
        median = statistics.median(got)
        print(
            f"| {name} | {median * 1e3:.1f} | {min(got) * 1e3:.1f} | "
            f"{(median - base) * 1e3:+.1f} | {median / base:.2f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
