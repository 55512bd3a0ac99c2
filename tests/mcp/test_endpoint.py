"""The agent-facing endpoint under raw frames, failures, cancellation and audit faults."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import resource
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from glove.audit import AuditLog
from glove.mcp import socket_streams, start_mediation
from glove.mcp._config import load_config
from glove.mcp.errors import (
    AUDIT_FAILED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UPSTREAM_FAILED,
    UPSTREAM_TIMEOUT,
)
from glove.testing.storage import FaultStorage

from .conftest import (
    ALLOW_ALL,
    glove_command,
    hostile_server,
    raw_agent,
    read_audit,
    read_calls,
    sdk_server,
    wait_for_call,
    write_config,
)

#: What "at once" may take on a loaded 2-core machine shared by several runs (and the bound
#: of each wait here): a hung upstream or session would wait forever, far past it.
FAIL_FAST_S = 15.0
GATE_S = 30.0


def _echo_config(tmp_path: Path, **fields: Any) -> Path:
    log = str(tmp_path / "calls")
    upstream = {"command": sdk_server("echo"), "env": {"GLOVE_TEST_CALL_LOG": log}, **fields}
    return write_config(tmp_path, {"echo": upstream}, ALLOW_ALL)


async def test_discover_probe_gets_an_error_and_the_stream_stays_open(tmp_path: Path) -> None:
    """server/discover and other requests before initialize are answered, not hung up on."""
    async with raw_agent(_echo_config(tmp_path)) as agent:
        probe = await agent.request("server/discover", {})
        assert probe["error"]["code"] == METHOD_NOT_FOUND
        early = await agent.request("tools/list")
        assert early["error"]["code"] == INVALID_REQUEST
        reply = await agent.initialize()
        assert reply["result"]["protocolVersion"] == "2025-11-25"
        assert reply["result"]["capabilities"] == {"tools": {"listChanged": True}}
        assert (await agent.request("ping"))["result"] == {}


async def test_initialize_echoes_an_older_version(tmp_path: Path) -> None:
    """A client asking for 2025-03-26 gets it; an unknown version gets the latest."""
    async with raw_agent(_echo_config(tmp_path)) as agent:
        old = await agent.request("initialize", {"protocolVersion": "2025-03-26"})
        assert old["result"]["protocolVersion"] == "2025-03-26"
        future = await agent.request("initialize", {"protocolVersion": "2099-01-01"})
        assert future["result"]["protocolVersion"] == "2025-11-25"


async def test_malformed_frames_get_typed_errors(tmp_path: Path) -> None:
    """Garbage, batches, bad ids, oversized lines and bad params each get an error; then work."""
    async with raw_agent(_echo_config(tmp_path)) as agent:
        await agent.initialize()
        await agent.send_bytes(b"{not json\n")
        assert (await agent.recv())["error"]["code"] == PARSE_ERROR
        await agent.send_bytes(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n')
        batch = await agent.recv()
        assert batch["error"]["code"] == INVALID_REQUEST
        assert "id" not in batch
        deep = b"[" * 100_000 + b"]" * 100_000
        await agent.send_bytes(
            b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"a":' + deep + b"}}\n"
        )
        assert (await agent.recv())["error"]["code"] == INVALID_REQUEST
        await agent.send_bytes(b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n')
        assert (await agent.recv())["error"]["code"] == INVALID_REQUEST
        await agent.send_bytes(b'{"jsonrpc":"2.0","id":"x' + b"a" * (5 * 1024 * 1024) + b'"}\n')
        assert (await agent.recv())["error"]["code"] == INVALID_REQUEST
        bad_args = await agent.request("tools/call", {"name": "echo__echo", "arguments": [1]})
        assert bad_args["error"]["code"] == INVALID_PARAMS
        unknown = await agent.request("resources/list")
        assert unknown["error"]["code"] == METHOD_NOT_FOUND
        bad_cursor = await agent.request("tools/list", {"cursor": "nope"})
        assert bad_cursor["error"]["code"] == INVALID_PARAMS
        ok = await agent.request("tools/call", {"name": "echo__echo", "arguments": {"text": "ok"}})
        assert ok["result"]["content"][0]["text"] == "ok"
    assert read_calls(tmp_path / "calls") == ["echo"]
    decisions = [r["decision"] for r in read_audit(tmp_path / "audit.log")]
    assert decisions == ["malformed"] * 6 + ["allow"]


async def test_list_changed_reaches_the_agent(tmp_path: Path) -> None:
    """An upstream's list_changed becomes the agent's, and the new tool is listed."""
    # The SDK server advertises listChanged only on the initialize era.
    upstream = {"command": sdk_server("list_changed"), "era": "legacy"}
    config = write_config(tmp_path, {"dyn": upstream}, ALLOW_ALL)
    async with raw_agent(config) as agent:
        await agent.initialize()
        listed = await agent.request("tools/list")
        assert [tool["name"] for tool in listed["result"]["tools"]] == ["dyn__first"]
        await agent.request("tools/call", {"name": "dyn__first", "arguments": {}})
        note = await agent.recv()
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        listed = await agent.request("tools/list")
        names = [tool["name"] for tool in listed["result"]["tools"]]
        assert names == ["dyn__first", "dyn__second"]


async def test_agent_cancellation_reaches_the_upstream(tmp_path: Path) -> None:
    """notifications/cancelled from the agent cancels upstream; no answer for that id."""
    log = tmp_path / "calls"
    upstream = {"command": hostile_server("hang"), "env": {"GLOVE_TEST_CALL_LOG": str(log)}}
    config = write_config(tmp_path, {"h": upstream}, ALLOW_ALL)
    async with raw_agent(config) as agent:
        await agent.initialize()
        call = {"jsonrpc": "2.0", "id": "c1", "method": "tools/call"}
        await agent.send({**call, "params": {"name": "h__poke", "arguments": {}}})
        await wait_for_call(log, "poke")
        cancel = {"requestId": "c1", "reason": "user"}
        await agent.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        pong = await agent.request("ping")
        assert pong["result"] == {}
        assert await wait_for_call(log, "cancelled") == ["poke", "cancelled"]
        second = await agent.request("ping")
        assert second["id"] != "c1"


async def test_call_timeout_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """A hung upstream call ends at call_timeout_s with a timeout error."""
    config = write_config(
        tmp_path, {"h": {"command": hostile_server("hang"), "call_timeout_s": 0.5}}, ALLOW_ALL
    )
    async with raw_agent(config) as agent:
        await agent.initialize()
        started = time.monotonic()
        reply = await agent.request("tools/call", {"name": "h__poke", "arguments": {}})
        assert reply["error"]["code"] == UPSTREAM_TIMEOUT
        assert time.monotonic() - started < FAIL_FAST_S
        assert (await agent.request("ping"))["result"] == {}


async def test_crashing_upstream_fails_the_call_then_the_session(tmp_path: Path) -> None:
    """The pending call gets a transport error at once; the session then ends (one strike)."""
    async with raw_agent(_echo_config(tmp_path)) as agent:
        await agent.initialize()
        started = time.monotonic()
        reply = await agent.request("tools/call", {"name": "echo__crash", "arguments": {}})
        assert reply["error"]["code"] == UPSTREAM_FAILED
        assert time.monotonic() - started < FAIL_FAST_S
        assert await asyncio.wait_for(agent.proc.wait(), FAIL_FAST_S) == 1
    assert "the session failed" in (tmp_path / "stderr.log").read_text()


async def test_stray_stdout_line_is_audited_and_dropped(tmp_path: Path) -> None:
    """A non-JSON line on an upstream's stdout is audited and dropped; the call answers."""
    upstream = {"command": hostile_server("garbage_then_answer")}
    config = write_config(tmp_path, {"h": upstream}, ALLOW_ALL)
    async with raw_agent(config) as agent:
        await agent.initialize()
        reply = await agent.request("tools/call", {"name": "h__poke", "arguments": {}})
        assert reply["result"]["content"][0]["text"] == "answered"
    dropped = [r for r in read_audit(tmp_path / "audit.log") if r["kind"] == "mcp.upstream_output"]
    assert len(dropped) == 1
    assert dropped[0]["decision"] == "dropped"
    assert dropped[0]["upstream"] == "h"
    assert dropped[0]["excerpt"] == "a stray print from the server"


async def test_garbage_from_upstream_fails_the_call(tmp_path: Path) -> None:
    """With stdout = "strict", an upstream writing garbage fails the call (transport error)."""
    upstream = {"command": hostile_server("garbage"), "stdout": "strict"}
    config = write_config(tmp_path, {"h": upstream}, ALLOW_ALL)
    async with raw_agent(config) as agent:
        await agent.initialize()
        reply = await agent.request("tools/call", {"name": "h__poke", "arguments": {}})
        assert reply["error"]["code"] == UPSTREAM_FAILED
        await asyncio.wait_for(agent.proc.wait(), FAIL_FAST_S)
    assert "wrote garbage" in (tmp_path / "stderr.log").read_text()


async def test_audit_write_failure_refuses_the_call(tmp_path: Path) -> None:
    """When the audit file cannot grow (RLIMIT_FSIZE), the call is refused and never forwarded."""
    config = _echo_config(tmp_path)
    audit = tmp_path / "audit.log"
    audit.write_bytes(b"")
    limit = 1500  # room for a few records, then every write fails with EFBIG

    def cap_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    async with raw_agent(config, preexec=cap_file_size) as agent:
        await agent.initialize()
        codes = []
        for index in range(8):
            args = {"text": f"call {index}"}
            reply = await agent.request("tools/call", {"name": "echo__echo", "arguments": args})
            codes.append(reply["error"]["code"] if "error" in reply else 0)
    forwarded = codes.count(0)
    assert 0 < forwarded < 8
    assert codes[forwarded:] == [AUDIT_FAILED] * (8 - forwarded)
    assert read_calls(tmp_path / "calls") == ["echo"] * forwarded
    assert len(read_audit(audit)) == forwarded


async def test_audit_sync_failure_refuses_and_ends_the_session(tmp_path: Path) -> None:
    """An fdatasync failure withholds the call's answer, crashes the log, ends the session.

    The decision is written before the call is forwarded and synced while the upstream works
    (decision 0046), so the upstream saw the call; the agent gets the audit error instead of
    its result.
    """
    config = load_config(_echo_config(tmp_path))
    storage = FaultStorage()
    glove_side, agent_side = socket.socketpair()
    reader, writer = await socket_streams(glove_side.detach())
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_side)
    mediation = await start_mediation(
        config, reader, writer, audit_factory=lambda path: AuditLog(path, storage=storage)
    )
    agent = _SocketAgent(agent_reader, agent_writer)
    await agent.call("initialize", {"protocolVersion": "2025-11-25"})
    ok = await agent.call("tools/call", {"name": "echo__echo", "arguments": {"text": "a"}})
    assert "result" in ok
    storage.sync_errno = errno.EIO
    refused = await agent.call("tools/call", {"name": "echo__echo", "arguments": {"text": "b"}})
    assert refused["error"]["code"] == AUDIT_FAILED
    failure = await asyncio.wait_for(mediation.wait(), FAIL_FAST_S)
    assert failure is not None
    agent_writer.close()
    assert read_calls(tmp_path / "calls") == ["echo", "echo"]
    assert "result" not in refused


class _GatedStorage(FaultStorage):
    """Real storage whose fdatasync, once gated, waits for the test to open the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gated = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def fdatasync(self, fd: int) -> None:
        """Wait for the gate (in the log's executor thread) when gated, then sync."""
        if self.gated:
            self.entered.set()
            self.gate.wait(GATE_S)
        super().fdatasync(fd)


def _executor_synced_log(path: str, storage: FaultStorage) -> AuditLog:
    log = AuditLog(path, storage=storage)
    log.pacer.enabled = False  # every sync in the log's executor thread, where it can wait
    return log


async def test_the_answer_waits_for_the_decision_to_be_durable(tmp_path: Path) -> None:
    """The call reaches the upstream while its record's fdatasync is still running, and the
    agent gets the answer only once that fdatasync returned (decision 0046)."""
    config = load_config(_echo_config(tmp_path))
    storage = _GatedStorage()
    glove_side, agent_side = socket.socketpair()
    reader, writer = await socket_streams(glove_side.detach())
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_side)
    mediation = await start_mediation(
        config,
        reader,
        writer,
        audit_factory=lambda path: _executor_synced_log(path, storage),
    )
    agent = _SocketAgent(agent_reader, agent_writer)
    await agent.call("initialize", {"protocolVersion": "2025-11-25"})
    storage.gated = True
    call = asyncio.ensure_future(
        agent.call("tools/call", {"name": "echo__echo", "arguments": {"text": "held"}})
    )
    try:
        await wait_for_call(tmp_path / "calls", "echo")
        assert await asyncio.to_thread(storage.entered.wait, GATE_S)
        assert [r["decision"] for r in read_audit(tmp_path / "audit.log")] == ["allow"]
        assert not call.done()  # forwarded and answered upstream, not yet durable here
    finally:
        storage.gate.set()
    reply = await call
    assert reply["result"]["content"][0]["text"] == "held"
    agent_writer.close()
    await mediation.stop()


class _OrderStorage(FaultStorage):
    """Real storage that notes, at each fdatasync, its thread and what ``watch`` says."""

    def __init__(self) -> None:
        super().__init__()
        self.watch: Any = None
        self.seen: list[tuple[bool, object]] = []

    def fdatasync(self, fd: int) -> None:
        """Note where the sync runs and what was forwarded by then, then sync."""
        if self.watch is not None:
            on_loop = threading.current_thread() is threading.main_thread()
            self.seen.append((on_loop, self.watch()))
        super().fdatasync(fd)


async def test_the_decisions_sync_runs_in_the_executor_beside_the_forward(
    tmp_path: Path,
) -> None:
    """The decision's fdatasync is handed to the log's executor thread, not left for the
    loop after the forward (where the upstream, woken on the same CPU by the forward, ran
    first), so it overlaps the upstream's work; the answer still comes after it (decision
    0046)."""
    config = load_config(_echo_config(tmp_path))
    storage = _OrderStorage()
    glove_side, agent_side = socket.socketpair()
    reader, writer = await socket_streams(glove_side.detach())
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_side)
    mediation = await start_mediation(
        config, reader, writer, audit_factory=lambda path: AuditLog(path, storage=storage)
    )
    agent = _SocketAgent(agent_reader, agent_writer)
    await agent.call("initialize", {"protocolVersion": "2025-11-25"})
    upstream = mediation.supervisor.child("mcp-echo")
    before = len(upstream._pending)  # type: ignore[union-attr]
    storage.watch = lambda: len(upstream._pending) - before  # type: ignore[union-attr]
    reply = await agent.call("tools/call", {"name": "echo__echo", "arguments": {"text": "x"}})
    assert reply["result"]["content"][0]["text"] == "x"
    assert [on_loop for on_loop, _ in storage.seen] == [False]  # one sync, in the thread
    agent_writer.close()
    await mediation.stop()


class _SocketAgent:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.next_id = 0

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.writer.write(json.dumps(message).encode() + b"\n")
        await self.writer.drain()
        while True:
            line = await asyncio.wait_for(self.reader.readline(), FAIL_FAST_S)
            assert line
            reply: dict[str, Any] = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply


async def test_calls_run_concurrently_and_answer_out_of_order(tmp_path: Path) -> None:
    """A slow call does not hold up a fast one sent after it on the same stream."""
    async with raw_agent(_echo_config(tmp_path)) as agent:
        await agent.initialize()
        slow = {"name": "echo__slow", "arguments": {"seconds": 1.0}}
        await agent.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": slow})
        fast = {"name": "echo__echo", "arguments": {"text": "fast"}}
        await agent.send({"jsonrpc": "2.0", "id": "fast", "method": "tools/call", "params": fast})
        first = await agent.recv()
        second = await agent.recv()
    assert [first["id"], second["id"]] == ["fast", "slow"]
    assert second["result"]["content"][0]["text"] == "done"


async def test_duplicate_in_flight_id_is_refused(tmp_path: Path) -> None:
    """Reusing the id of a call still in flight is an invalid request, not a mix-up."""
    async with raw_agent(_echo_config(tmp_path)) as agent:
        await agent.initialize()
        slow = {"name": "echo__slow", "arguments": {"seconds": 0.5}}
        message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": slow}
        await agent.send(message)
        await agent.send(message)
        replies = [await agent.recv(), await agent.recv()]
    assert replies[0]["error"]["code"] == INVALID_REQUEST
    assert replies[1]["result"]["content"][0]["text"] == "done"


async def test_serve_exit_codes(tmp_path: Path) -> None:
    """A bad configuration or an unstartable upstream exits 2 with the reason on stderr."""
    bad = tmp_path / "bad.toml"
    bad.write_text('policy = "p"\naudit = "a"\nbogus = 1\n[upstreams.x]\ncommand = ["x"]\n')
    missing = write_config(tmp_path, {"x": {"command": ["/nonexistent/server"]}}, ALLOW_ALL)
    for config, expected in ((bad, b"unknown field"), (missing, b"cannot start")):
        proc = await asyncio.create_subprocess_exec(
            *glove_command(config),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(b""), FAIL_FAST_S * 4)
        assert proc.returncode == 2
        assert out == b""
        assert expected in err


async def test_sigterm_ends_the_upstreams_too(tmp_path: Path) -> None:
    """SIGTERM to glove mcp serve stops it cleanly and leaves no upstream process behind."""
    async with raw_agent(_echo_config(tmp_path)) as agent:
        await agent.initialize()
        reply = await agent.request("tools/call", {"name": "echo__pid", "arguments": {}})
        upstream_pid = reply["result"]["structuredContent"]["result"]
        os.kill(upstream_pid, 0)
        agent.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(agent.proc.wait(), FAIL_FAST_S * 2) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(upstream_pid, 0)


def _junk_frames(seed: int, count: int) -> list[bytes]:
    """Deterministic hostile frames: random bytes, JSON of every shape, wrong JSON-RPC types."""
    rng = random.Random(seed)
    shapes: list[Any] = [
        None,
        True,
        3.5,
        "text",
        [],
        {},
        {"jsonrpc": "2.0"},
        {"jsonrpc": "2.0", "id": {}, "method": "tools/call"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": 5}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo__echo"}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": "x"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": []}},
        {"jsonrpc": "2.0", "id": 5, "result": {}},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"_meta": "x"}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"_meta": [], "name": 1}},
        {"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": []}},
        {"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": {"cursor": {}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
        {"jsonrpc": "2.0", "id": 6, "error": {"code": "x"}},
    ]
    frames = []
    for index in range(count):
        if index % 3 == 0:
            raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            frames.append(raw.replace(b"\n", b" "))
        else:
            frames.append(json.dumps(rng.choice(shapes)).encode())
    return frames


async def test_hostile_agent_input_never_breaks_the_endpoint(tmp_path: Path) -> None:
    """Hundreds of malformed frames get errors or silence; the stream then still works."""
    async with raw_agent(_echo_config(tmp_path)) as agent:
        await agent.initialize()
        await agent.send_bytes(b"\n".join(_junk_frames(seed=1, count=300)) + b"\n")
        params = {"name": "echo__echo", "arguments": {"text": "ok"}}
        await agent.send(
            {"jsonrpc": "2.0", "id": "final", "method": "tools/call", "params": params}
        )
        replies = 0
        while (reply := await agent.recv()).get("id") != "final":
            # ids 3 (a valid call), 9 (initialize) and notifications are answered normally
            assert "error" in reply or reply.get("id") in (3, 9) or "method" in reply
            replies += 1
        assert reply["result"]["content"][0]["text"] == "ok"
        assert replies > 100
        assert agent.proc.returncode is None
