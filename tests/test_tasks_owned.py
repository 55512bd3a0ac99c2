"""Every task has an owner: no raw task creation outside the actor runtime.

Outside ``glove/actors`` a task is started only through ``glove.actors`` (``race``,
``start_node`` / ``spawn_node``, ``TaskOwner``, an actor's ``spawn_task``), which cancel what
they started and read how it ended. This walks every module of ``src/glove`` and fails on a
raw ``create_task``, ``ensure_future`` or ``gather`` anywhere else.
"""

from __future__ import annotations

import ast
from pathlib import Path

import glove
from tests._ast import parse as parse_source

SRC = Path(glove.__file__).resolve().parent
RUNTIME = SRC / "actors"

#: The calls that make a task nobody may own: ``loop.create_task``, ``asyncio.create_task``,
#: ``asyncio.ensure_future``, ``asyncio.gather`` (which wraps each coroutine in one).
RAW = frozenset({"create_task", "ensure_future", "gather"})

#: Modules allowed a raw call, with the reason (none).
ALLOWED: dict[str, str] = {}


def _raw_calls(tree: ast.Module) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in RAW:
            found.append((node.lineno, func.attr))
        elif isinstance(func, ast.Name) and func.id in RAW:
            found.append((node.lineno, func.id))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "asyncio":
            found.extend((node.lineno, a.name) for a in node.names if a.name in RAW)
    return found


def _offenders() -> list[str]:
    offenders: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        if path.is_relative_to(RUNTIME):
            continue
        rel = path.relative_to(SRC).as_posix()
        if rel in ALLOWED:
            continue
        for line, name in _raw_calls(parse_source(path.read_text())):
            offenders.append(f"{rel}:{line}: {name}")
    return offenders


def test_no_task_is_created_outside_the_actor_runtime() -> None:
    assert _offenders() == [], "start tasks through glove.actors (race, spawn_node, TaskOwner)"


def test_the_allowlist_names_only_modules_that_still_need_it() -> None:
    for rel in ALLOWED:
        assert _raw_calls(parse_source((SRC / rel).read_text())), f"{rel} no longer needs it"


def test_the_walk_sees_each_raw_shape() -> None:
    source = (
        "import asyncio\nfrom asyncio import gather\n"
        "async def f(loop, c):\n"
        "    loop.create_task(c)\n    asyncio.create_task(c)\n"
        "    asyncio.ensure_future(c)\n    await asyncio.gather(c)\n"
    )
    names = [name for _, name in _raw_calls(parse_source(source))]
    assert sorted(names) == ["create_task", "create_task", "ensure_future", "gather", "gather"]
