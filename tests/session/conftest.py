"""A session service on its own (no socket): real journals, real sandboxes, a temp home."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from glove.actors import Supervisor
from glove.config import GlovePaths
from glove.host._setup import setup
from glove.session._registry import SessionRegistry
from glove.session._service import SessionService, load_service
from glove.session._views import SessionView

HARNESSES = """
[harnesses.hello]
argv = ["/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"]

[harnesses.sleep]
argv = ["/bin/sleep", "30"]

[harnesses.ls]
argv = ["/bin/sh", "-c", "ls; cat note.txt"]
"""

LIMITS = {
    "wall_time_s": 30,
    "cpu_time_s": 10,
    "memory_bytes": 268435456,
    "pids": 64,
    "disk_bytes": 67108864,
    "output_bytes": 1048576,
}


def plan(harness: str = "hello", **extra: object) -> bytes:
    """A plan v1 for ``harness`` with modest limits."""
    doc = {"version": 1, "harness": harness, "exposures": [], "limits": dict(LIMITS),
           "network": "none", "terminal": "pipes", **extra}  # fmt: skip
    return json.dumps(doc).encode()


def glove_home(base: Path) -> GlovePaths:
    """Set up a fresh home under ``base`` and add the test harnesses."""
    paths = GlovePaths(base / "config" / "glove", base / "state" / "glove", base / "run" / "glove")
    setup(paths, home=str(base))
    with paths.gloved_toml.open("a") as handle:
        handle.write(HARNESSES)
    return paths


@dataclass
class Running:
    """A running session service."""

    service: SessionService
    tree: Supervisor
    task: asyncio.Task[None]

    @property
    def registry(self) -> SessionRegistry:
        assert self.service.registry is not None
        return self.service.registry

    async def until_terminal(self, session_id: str, timeout: float = 60.0) -> SessionView:
        queue = await self.registry.watch(session_id)
        last = None
        async with asyncio.timeout(timeout):
            while (view := await queue.get()) is not None:
                last = view
        assert last is not None
        return await self.registry.status(session_id)

    async def stop(self) -> None:
        self.tree.stop()
        await asyncio.wait({self.task})


async def start_service(paths: GlovePaths) -> Running:
    service = load_service(paths)
    tree = Supervisor("gloved-test", service.children(), strategy="rest_for_one", intensity=0)
    task = asyncio.get_running_loop().create_task(tree.run())
    await tree.started.wait()
    assert service.registry is not None
    async with asyncio.timeout(30):
        await service.registry.started.wait()
    return Running(service, tree, task)


@pytest.fixture
def home(tmp_path: Path) -> GlovePaths:
    """A fresh, set-up Glove home (config, state, runtime) in a temp dir."""
    base = Path(os.path.realpath(tmp_path))
    return glove_home(base)


@pytest.fixture
async def service(home: GlovePaths) -> AsyncIterator[Running]:
    """The session service of ``home``, running."""
    running = await start_service(home)
    try:
        yield running
    finally:
        await running.stop()
