"""The upstream actor against real server processes, well-behaved and hostile."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from glove.actors import DeadlineExceeded, running
from glove.mcp import CallTool, ListTools, UpstreamActor, UpstreamConfig, UpstreamTransportError

from .conftest import FIXTURES, PYTHON, hostile_server, sdk_server, wait_for_call

#: What "at once" may take on a loaded 2-core machine shared by several runs: still far
#: below what a failure to fail fast would wait for (the 30 s ask, the 60 s silent server).
FAIL_FAST_S = 15.0


def _config(command: list[str], log: Path | None = None, **fields: Any) -> UpstreamConfig:
    env = {"GLOVE_TEST_CALL_LOG": str(log)} if log is not None else {}
    return UpstreamConfig(command=command, env=env, inherit_env=["PATH"], **fields)


def _text(raw: msgspec.Raw) -> str:
    result = json.loads(bytes(raw))
    return str(result["content"][0]["text"])


@pytest.mark.parametrize(("era", "expected"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_handshake_in_both_eras(era: str, expected: str) -> None:
    """An SDK server is spoken to statelessly when it supports it, else via initialize."""
    async with running(UpstreamActor("e", _config(sdk_server("echo"), era=era))) as actor:
        assert actor.state == "running"
        assert actor.era == expected
        tools = await actor.ask(ListTools())
        assert "echo" in [tool.name for tool in tools]
        assert _text(await actor.ask(CallTool("echo", {"text": "hi"}))) == "hi"


async def test_a_modern_server_slow_to_start_is_probed_again() -> None:
    """A 2026-07-28 server whose first discover answer comes after the probe's 3 s (as the
    SDK fixture's does on a loaded machine) refuses initialize; Glove probes once more."""
    noisy = [PYTHON, str(FIXTURES / "noisy_server.py"), "modern_after=4"]
    async with running(UpstreamActor("m", _config(noisy))) as actor:
        assert actor.era == "2026-07-28"
        assert [tool.name for tool in await actor.ask(ListTools())] == ["poke"]
        assert actor.dropped_messages == 0  # the late first answer was expected, not a stray


async def test_legacy_only_server_falls_back_to_initialize() -> None:
    """A server that answers server/discover with an error is initialized instead."""
    async with running(UpstreamActor("h", _config(hostile_server("stderr_flood")))) as actor:
        assert actor.era == "2025-11-25"


async def test_a_slow_modern_server_is_spoken_to_in_its_era() -> None:
    """A 2026-07-28 server that answers the discover probe only after the probe's wait ran
    out (a slow start), and then refuses the initialize that followed, is spoken to
    statelessly: the late answer decides (it once failed the session with -32022)."""
    async with running(UpstreamActor("m", _config(hostile_server("slow_modern")))) as actor:
        assert actor.era == "2026-07-28"
        assert [tool.name for tool in await actor.ask(ListTools())] == ["poke"]


async def test_pagination_collects_every_page() -> None:
    """All eight tools of the three-per-page server are listed, in order."""
    async with running(UpstreamActor("p", _config(sdk_server("paginated")))) as actor:
        tools = await actor.ask(ListTools())
        assert [tool.name for tool in tools] == [f"tool{index}" for index in range(8)]


async def test_progress_is_forwarded_with_the_callers_token() -> None:
    """Progress notifications reach the caller's sink under its own token."""
    seen: list[dict[str, Any]] = []
    async with running(UpstreamActor("e", _config(sdk_server("echo")))) as actor:
        raw = await actor.ask(
            CallTool("progress", {"steps": 3}, progress_token="agent-7", progress=seen.append)
        )
    assert _text(raw) == "progressed"
    assert [(item["progressToken"], item["progress"]) for item in seen] == [
        ("agent-7", 1),
        ("agent-7", 2),
        ("agent-7", 3),
    ]


async def test_deadline_cancels_upstream_and_drops_the_late_reply(tmp_path: Path) -> None:
    """A call past its deadline sends notifications/cancelled; later calls still work."""
    log = tmp_path / "calls"
    async with running(UpstreamActor("h", _config(hostile_server("hang"), log))) as actor:
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            await actor.ask(CallTool("poke", {}), timeout=0.3)
        assert time.monotonic() - started < FAIL_FAST_S
        assert await wait_for_call(log, "cancelled") == ["poke", "cancelled"]
        assert actor.state == "running"


async def test_late_reply_after_deadline_is_dropped() -> None:
    """The SDK server's reply to a cancelled slow call does not disturb the next call."""
    async with running(UpstreamActor("e", _config(sdk_server("echo")))) as actor:
        with pytest.raises(DeadlineExceeded):
            await actor.ask(CallTool("slow", {"seconds": 0.5}), timeout=0.1)
        await asyncio.sleep(0.6)
        assert _text(await actor.ask(CallTool("echo", {"text": "next"}))) == "next"


async def test_list_changed_relists_and_notifies() -> None:
    """notifications/tools/list_changed makes the actor list again and call back."""
    changed = asyncio.Event()
    actor = UpstreamActor(
        "c",
        _config(sdk_server("list_changed"), era="legacy"),
        on_tools_changed=lambda _: changed.set(),
    )
    async with running(actor):
        assert [tool.name for tool in actor.tools] == ["first"]
        await actor.ask(CallTool("first", {}))
        await asyncio.wait_for(changed.wait(), FAIL_FAST_S)
        assert [tool.name for tool in await actor.ask(ListTools())] == ["first", "second"]


async def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server sees only PATH and its configured variables, not Glove's secrets."""
    monkeypatch.setenv("GLOVE_SECRET_FOR_TEST", "do-not-leak")
    async with running(UpstreamActor("e", _config(sdk_server("echo")))) as actor:
        raw = await actor.ask(CallTool("env", {}))
    names = json.loads(bytes(raw))["structuredContent"]["result"]
    assert "GLOVE_SECRET_FOR_TEST" not in names
    assert "PATH" in names


@pytest.mark.parametrize(
    ("mode", "stdout"),
    [
        ("garbage", "strict"),
        ("not_jsonrpc", "lenient"),
        ("oversized", "lenient"),
        ("exit", "lenient"),
    ],
)
async def test_broken_upstream_fails_pending_calls_at_once(mode: str, stdout: str) -> None:
    """Garbage (strict), JSON that is not JSON-RPC, an oversized frame or an early exit fail
    the call fast and crash the actor."""
    actor = UpstreamActor("h", _config(hostile_server(mode), stdout=stdout))
    async with running(actor):
        started = time.monotonic()
        with pytest.raises(UpstreamTransportError):
            await actor.ask(CallTool("poke", {}), timeout=30)
        assert time.monotonic() - started < FAIL_FAST_S
        await asyncio.wait_for(_crashed(actor), FAIL_FAST_S)
    assert isinstance(actor.exit_reason, UpstreamTransportError)


class _Events:
    """Records what an upstream reports to its mediation."""

    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []

    def list_changed(self, upstream_id: str, kind: str) -> None:
        """Ignored."""

    def notification(self, upstream_id: str, method: str, params: dict[str, Any]) -> str | None:
        """Passed on (nothing dropped)."""
        return None

    async def server_request(
        self, upstream_id: str, method: str, params: dict[str, Any] | None
    ) -> Any:
        """Refused."""
        raise RuntimeError("no")

    async def record(self, upstream_id: str, record: dict[str, object]) -> None:
        """Kept."""
        self.records.append(record)


async def test_lenient_stdout_drops_a_stray_line_and_answers() -> None:
    """A line that is not JSON is dropped and reported; the call still gets its answer."""
    events = _Events()
    actor = UpstreamActor("h", _config(hostile_server("garbage_then_answer")), events=events)
    async with running(actor):
        assert _text(await actor.ask(CallTool("poke", {}), timeout=30)) == "answered"
        assert actor.state == "running"
    assert actor.dropped_lines == 1
    assert [r["excerpt"] for r in events.records] == ["a stray print from the server"]
    assert [r["dropped_so_far"] for r in events.records] == [1]


async def _crashed(actor: UpstreamActor) -> None:
    """Wait until the actor crashed and its teardown reaped the server (``running`` would
    otherwise cancel that teardown on exit and leave the process to the garbage collector)."""
    while actor.state != "crashed" or actor._transport._proc.returncode is None:  # type: ignore[attr-defined]
        await asyncio.sleep(0.01)


async def test_wrong_id_reply_is_dropped_and_the_call_times_out() -> None:
    """A reply under an id Glove never issued is ignored; the call ends at its deadline."""
    async with running(UpstreamActor("h", _config(hostile_server("wrong_id")))) as actor:
        with pytest.raises(DeadlineExceeded):
            await actor.ask(CallTool("poke", {}), timeout=0.5)
        assert actor.state == "running"


async def test_stderr_flood_does_not_block_the_server() -> None:
    """8 MiB on stderr is drained into a bounded tail and the call still answers."""
    async with running(UpstreamActor("h", _config(hostile_server("stderr_flood")))) as actor:
        assert _text(await actor.ask(CallTool("poke", {}), timeout=30)) == "survived"
        assert 0 < len(actor.stderr_tail) <= 8 * 1024


async def test_server_to_client_requests_are_refused() -> None:
    """A sampling request from the server is answered with an error, never relayed."""
    async with running(UpstreamActor("h", _config(hostile_server("server_request")))) as actor:
        assert _text(await actor.ask(CallTool("poke", {}))) == "sampling refused with -32601"


async def test_unstartable_program_is_a_transport_error() -> None:
    """A command that does not exist crashes the actor with a clear transport error."""
    actor = UpstreamActor("x", _config(["/nonexistent/server"]))
    async with running(actor):
        pass
    assert isinstance(actor.exit_reason, UpstreamTransportError)
    assert "cannot start" in str(actor.exit_reason)


async def test_stop_kills_the_process_group() -> None:
    """Stopping the actor leaves no server process behind."""
    actor = UpstreamActor("e", _config(sdk_server("echo")))
    async with running(actor):
        pid = actor.pid
        assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_silent_server_fails_startup_within_its_timeout() -> None:
    """A program that never answers the handshake fails startup at startup_timeout_s."""
    actor = UpstreamActor("s", _config(["sleep", "60"], startup_timeout_s=1.0))
    started = time.monotonic()
    async with running(actor):
        pass
    assert time.monotonic() - started < FAIL_FAST_S
    assert isinstance(actor.exit_reason, UpstreamTransportError)
    assert "no handshake" in str(actor.exit_reason)
    assert actor.pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(actor.pid, 0)
