"""1,000 concurrent clients against a real gloved: every one is served or told busy."""

from __future__ import annotations

import asyncio
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.control import AsyncClient, ControlError, RemoteError
from tests.control.test_gloved import _start, _stop

CLIENTS = 1000
#: File descriptors this test process needs: one socket per client, with room.
FDS_NEEDED = CLIENTS + 256


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A running gloved in a private runtime directory."""
    runtime = tmp_path / "run" / "glove"
    proc = _start(runtime)
    try:
        yield runtime, proc
    finally:
        if proc.poll() is None:
            assert _stop(proc) == 0


@pytest.fixture
def enough_fds() -> Iterator[None]:
    """Raise this process's soft RLIMIT_NOFILE to fit a socket per client."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = soft if soft >= FDS_NEEDED else min(hard, FDS_NEEDED)
    if wanted < FDS_NEEDED:
        pytest.fail(f"RLIMIT_NOFILE hard limit {hard} is below the {FDS_NEEDED} this test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def _one(socket_path: Path, n: int) -> tuple[str, float]:
    started = time.perf_counter()
    client = AsyncClient(socket_path, client_name=f"load/{n}", timeout=30.0)
    try:
        await client.connect()
        health = await client.call("health")
        assert health["status"] == "ok"
        return "served", time.perf_counter() - started
    except RemoteError as exc:
        return exc.code, time.perf_counter() - started
    except ControlError as exc:
        return f"{type(exc).__name__}: {exc}", time.perf_counter() - started
    finally:
        await client.aclose()


@pytest.mark.usefixtures("enough_fds")
async def test_a_thousand_concurrent_clients_are_served_or_told_busy(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """1,000 clients connect, say hello and call health at once: each is served or refused
    with busy (no resets, no timeouts), the daemon stays up, and serves afterwards."""
    runtime, proc = daemon
    socket_path = runtime / "gloved.sock"
    results = await asyncio.gather(*(_one(socket_path, n) for n in range(CLIENTS)))
    outcomes = Counter(outcome for outcome, _ in results)
    served = sorted(t for outcome, t in results if outcome == "served")
    assert set(outcomes) <= {"served", "busy"}, outcomes.most_common(5)
    assert outcomes["served"] > 0
    p50 = statistics.median(served) * 1000
    p99 = served[max(0, int(len(served) * 0.99) - 1)] * 1000
    print(
        f"\n{CLIENTS} concurrent clients: served {outcomes['served']}, busy {outcomes['busy']}; "
        f"connect+hello+health p50 {p50:.1f} ms, p99 {p99:.1f} ms",
        file=sys.stderr,
    )
    assert proc.poll() is None
    async with AsyncClient(socket_path) as after:
        assert (await after.call("health"))["status"] == "ok"
