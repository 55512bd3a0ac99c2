"""The blocking client's typed calls are generated from the asyncio client's
(``scripts/unasync.py``, httpcore's model): the generated file is what the generator writes
now, and the two clients offer the same calls with the same signatures."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from glove.control import AsyncClient, Client
from glove.control._async_methods import AsyncMethods
from glove.control._sync_methods import SyncMethods

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "unasync.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_file_is_current() -> None:
    """``_sync_methods.py`` is exactly what ``scripts/unasync.py`` makes of
    ``_async_methods.py``: edit the source and regenerate, never the copy."""
    generator = _generator()
    for source, generated in generator.FILES:
        want = generator.unasync((ROOT / source).read_text(encoding="utf-8"), source, generated)
        assert (ROOT / generated).read_text(encoding="utf-8") == want, (
            f"{generated} is stale: run .venv/bin/python scripts/unasync.py"
        )
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_a_hand_edit_of_the_generated_file_is_caught() -> None:
    """The check compares whole files: a changed line in the copy (or a rule that no longer
    applies to the source) is a difference."""
    generator = _generator()
    source, generated = generator.FILES[0]
    want = generator.unasync((ROOT / source).read_text(encoding="utf-8"), source, generated)
    assert "async def" not in want
    assert "await " not in want
    edited = want.replace("def session_status(", "def session_status_(", 1)
    assert edited != want


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_both_clients_offer_the_same_typed_calls() -> None:
    """Every typed call exists on both clients, async on one and blocking on the other, with
    the same parameters and return annotation; a streaming call returns each client's
    stream (``AsyncStream``, ``SyncStream``) of the same events."""
    asynchronous, blocking = _public(AsyncMethods), _public(SyncMethods)
    assert asynchronous.keys() == blocking.keys()
    assert {"capabilities", "session_status", "session_list", "plan_validate"} <= blocking.keys()
    streams = {name for name, sig in blocking.items() if str(sig.return_annotation).startswith(
        "SyncStream[")}  # fmt: skip
    assert {"stream", "session_watch", "session_attach"} <= streams
    for name in blocking:
        if name in streams:
            want = asynchronous[name].replace(
                return_annotation=str(asynchronous[name].return_annotation).replace(
                    "AsyncStream[", "SyncStream["
                )
            )
            assert want == blocking[name], name
            continue
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name
        assert not inspect.iscoroutinefunction(getattr(Client, name)), name
        assert asynchronous[name] == blocking[name], name
