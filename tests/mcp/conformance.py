"""Helpers to run ``@modelcontextprotocol/conformance`` (server scenarios) and read its results.

The suite (0.1.16, pinned in ``tests/peers/conformance/package.json``) needs Node 22; npm's
pinned ``node`` package brings it into the same folder. ``scripts/setup`` installs it; when
it is missing, :func:`conformance_bin` installs it (``npm ci``) before the first use.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / "tests" / "peers" / "conformance"
BIN = PEERS / "node_modules" / ".bin"
FIXTURE = Path(__file__).parent / "fixtures" / "conformance_server.py"
PYTHON = sys.executable
#: One whole suite run is bounded (the suite's own per-scenario timeouts are 10-30 s).
SUITE_TIMEOUT_S = 240.0
START_TIMEOUT_S = 20.0
NPM_TIMEOUT_S = 300.0
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def conformance_bin() -> Path:
    """The ``bin`` folder holding ``conformance``, ``mcp-inspector-cli`` and Node 22."""
    if not (BIN / "conformance").exists():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=PEERS,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"cannot install the conformance suite: {done.stderr[-2000:]}")
    return BIN


def node_env() -> dict[str, str]:
    """The environment with Node 22 first on PATH."""
    return {**os.environ, "PATH": f"{conformance_bin()}{os.pathsep}{os.environ.get('PATH', '')}"}


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_listening(port: int, proc: asyncio.subprocess.Process) -> None:
    """Wait until something accepts on ``port`` (or fail if ``proc`` exits)."""
    async with asyncio.timeout(START_TIMEOUT_S):
        while True:
            if proc.returncode is not None:
                pytest.fail(f"the server exited with {proc.returncode} before listening")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            return


@asynccontextmanager
async def process(
    *argv: str, env: dict[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run ``argv`` for the duration; stop it (SIGTERM, then SIGKILL) afterwards."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


@asynccontextmanager
async def reference_http(env: dict[str, str] | None = None) -> AsyncIterator[str]:
    """The reference server on Streamable HTTP; yields its URL."""
    port = free_port()
    async with process(PYTHON, str(FIXTURE), "http", str(port), env=env) as proc:
        await wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def glove_http(config: Path) -> AsyncIterator[str]:
    """``glove mcp serve --http`` for ``config``; yields its URL."""
    port = free_port()
    argv = [PYTHON, "-m", "glove", "mcp", "serve", "--config", str(config)]
    async with process(*argv, "--http", f"127.0.0.1:{port}") as proc:
        await wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"


def read_results(folder: Path) -> dict[str, tuple[int, int]]:
    """``scenario -> (checks passed, checks failed)`` from a suite's ``-o`` folder."""
    results: dict[str, tuple[int, int]] = {}
    for entry in sorted(folder.iterdir()):
        found = _RESULT_DIR.match(entry.name)
        if found is None or not (entry / "checks.json").exists():
            continue
        checks = json.loads((entry / "checks.json").read_text())
        passed = sum(1 for check in checks if check.get("status") == "SUCCESS")
        failed = sum(1 for check in checks if check.get("status") == "FAILURE")
        results[found.group("scenario")] = (passed, failed)
    return results


async def run_suite(url: str, out: Path, *extra: str) -> dict[str, tuple[int, int]]:
    """Run the server scenarios (``--suite all``) against ``url``; return their results."""
    out.mkdir(parents=True, exist_ok=True)
    argv = [str(conformance_bin() / "conformance"), "server", "--url", url, "-o", str(out)]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        *(extra or ("--suite", "all")),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=node_env(),
        cwd=out,
    )
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), SUITE_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"the conformance suite ran past {SUITE_TIMEOUT_S} s")
    (out / "output.txt").write_bytes(output)
    results = read_results(out)
    assert results, f"the suite wrote no results: {output.decode(errors='replace')[-2000:]}"
    return results
