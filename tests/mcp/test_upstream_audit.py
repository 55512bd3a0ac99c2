"""What an upstream says and Glove drops is audited from the first byte (docs/mcp.md).

Real upstream processes print garbage before, during and after the handshake
(``fixtures/noisy_server.py`` on stdio, ``fixtures/noisy_http_server.py`` on Streamable
HTTP), send messages nobody takes, or fail with their own error on stderr. Each test runs
``glove mcp serve`` (or ``glove run``) as a user would and reads the audit file back
exactly; the mediation runs as the test's own user and as the unprivileged test user.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from glove.mcp._agent_session import SESSION_ENDED
from glove.mcp._text import printable
from glove.mcp._upstream_audit import (
    AUDITED_EVERY,
    AUDITED_ONE_BY_ONE,
    STDERR_REPORT_BYTES,
    STDERR_REPORT_LINES,
    DropCounter,
    stderr_lines,
)
from glove.mcp.errors import UPSTREAM_FAILED, UpstreamTransportError, agent_message
from tests.conftest import Unpriv

from .conftest import FIXTURES, PYTHON, RawAgent, hostile_server, toml_value

RUN_TIMEOUT_S = 60.0
STDOUT_REASON = 'a line on the server\'s stdout was not JSON (stdout = "lenient")'
HTTP_REASON = "a message on the server's HTTP stream was not JSON"
#: What the failing fixture writes on stderr before it exits 3: an error, a stack line, a
#: clipboard write (OSC 52) and colour codes, which must reach nobody's terminal raw.
STDERR = (
    b"Error: EACCES: permission denied, open '/srv/work/notes'\n"
    b"    at Object.openSync (node:fs:573:18)\n"
    b"\x1b]52;c;c2VjcmV0\x07\x1b[31mfatal\x1b[0m: giving up\n"
)
STDERR_SHOWN = (
    "Error: EACCES: permission denied, open '/srv/work/notes'",
    "    at Object.openSync (node:fs:573:18)",
    "\\u001b]52;c;c2VjcmV0\\u0007\\u001b[31mfatal\\u001b[0m: giving up",
)
OWN_KEYS = ("seq", "ts", "run", "policy")


@dataclass
class World:
    """Where one test's mediation lives and whom it runs as."""

    folder: Path
    python: str
    launcher: list[str]
    owner: tuple[int, int] | None

    def fixture(self, name: str) -> str:
        """Copy a fixture server where the mediation's owner can read it."""
        shutil.copy(FIXTURES / name, self.folder)
        return str(self.folder / name)

    def config(self, upstreams: dict[str, dict[str, Any]], policy: str = "allow-all") -> Path:
        """Write ``glove.toml`` (and ``policy.toml`` unless allow-all) owned by the owner."""
        lines = [
            'policy = "allow-all"' if policy == "allow-all" else 'policy = "policy.toml"',
            'audit = "audit.log"',
        ]
        for upstream_id, fields in upstreams.items():
            lines.append(f"[upstreams.{upstream_id}]")
            extra = {"inherit_env": ["PATH", "HOME"]} if "command" in fields else {}
            merged = {**extra, **fields}
            lines.extend(f"{key} = {toml_value(value)}" for key, value in merged.items())
        if policy != "allow-all":
            (self.folder / "policy.toml").write_text(policy)
        (self.folder / "glove.toml").write_text("\n".join(lines) + "\n")
        self.give()
        return self.folder / "glove.toml"

    def give(self) -> None:
        """Hand every file of the folder to the owner."""
        if self.owner is not None:
            for path in [self.folder, *self.folder.iterdir()]:
                os.chown(path, *self.owner)

    def glove(self, *args: str) -> list[str]:
        """The command line of ``glove ARGS`` as the owner."""
        return [*self.launcher, "-m", "glove", *args]

    def audit(self) -> list[dict[str, Any]]:
        """Every audit record, as written."""
        text = (self.folder / "audit.log").read_text()
        return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(params=["own-user", "unprivileged"])
def world(request: pytest.FixtureRequest, tmp_path: Path, unpriv: Unpriv) -> Iterator[World]:
    """A folder for the mediation's files, and the user it runs as."""
    if request.param == "own-user":
        yield World(tmp_path, PYTHON, [PYTHON], None)
        return
    folder = Path(tempfile.mkdtemp(prefix="glove-mcp-audit-", dir="/var/tmp"))
    owner = (unpriv.uid, unpriv.gid) if os.getuid() == 0 else None
    try:
        yield World(folder, unpriv.python, unpriv.command(unpriv.python), owner)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@asynccontextmanager
async def serving(world: World, config: Path) -> AsyncIterator[RawAgent]:
    """``glove mcp serve`` on pipes for a raw agent; stopped (stdin EOF) on exit."""
    with (world.folder / "stderr.log").open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *world.glove("mcp", "serve", "--config", str(config)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            limit=1024 * 1024,
        )
    try:
        yield RawAgent(proc)
    finally:
        if proc.returncode is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), RUN_TIMEOUT_S)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def serve_until_it_ends(world: World, config: Path) -> tuple[int, str]:
    """Run ``glove mcp serve`` with an agent that never speaks; return its exit and stderr."""
    proc = await asyncio.create_subprocess_exec(
        *world.glove("mcp", "serve", "--config", str(config)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = await asyncio.wait_for(proc.stderr.read(), RUN_TIMEOUT_S)
    code = await asyncio.wait_for(proc.wait(), RUN_TIMEOUT_S)
    return code, err.decode()


def own(record: dict[str, Any]) -> dict[str, Any]:
    """A record without the keys the log and the run add (seq, ts, run, policy)."""
    return {key: value for key, value in record.items() if key not in OWN_KEYS}


def line(
    excerpt: str, count: int, reason: str = STDOUT_REASON, upstream: str = "n"
) -> dict[str, Any]:
    """The record of the ``count``-th dropped line."""
    return {
        "kind": "mcp.upstream_output",
        "decision": "dropped",
        "upstream": upstream,
        "reason": reason,
        "excerpt": excerpt,
        "dropped_so_far": count,
    }


def noise(*phases: tuple[str, int]) -> list[str]:
    """The lines the noisy fixtures print for ``(phase, count)``, in order."""
    return [f"noise {phase} {i}" for phase, count in phases for i in range(1, count + 1)]


def failure(reason: str, stderr: tuple[str, ...] = (), upstream: str = "n") -> dict[str, Any]:
    """The record of an upstream's failure."""
    return {
        "kind": "mcp.upstream",
        "decision": "failed",
        "upstream": upstream,
        "reason": reason,
        "stderr": list(stderr),
    }


def check_log_shape(records: list[dict[str, Any]]) -> None:
    """One run wrote the whole fresh log, under one policy, with seq 1, 2, 3, ..."""
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert len({r["run"] for r in records}) == 1
    assert len({r["policy"] for r in records}) == 1


# -- stdio -----------------------------------------------------------------------------------


async def test_every_stdout_line_around_the_handshake_has_its_record(world: World) -> None:
    """Lines before the first request, before the initialize answer, after it, during the
    listing and during a call each get one record, in order, counted 1..10."""
    server = world.fixture("noisy_server.py")
    phases = (("start", 2), ("init", 2), ("initialized", 2), ("list", 1))
    args = [f"{phase}={count}" for phase, count in (*phases, ("call", 3))]
    config = world.config({"n": {"command": [world.python, server, *args]}})
    async with serving(world, config) as agent:
        await agent.initialize()
        reply = await agent.request("tools/call", {"name": "n__poke", "arguments": {}})
        assert reply["result"]["content"][0]["text"] == "poked"
        assert agent.proc.stdin is not None
        agent.proc.stdin.close()
        assert await asyncio.wait_for(agent.proc.wait(), RUN_TIMEOUT_S) == 0
    records = world.audit()
    check_log_shape(records)
    before = [line(text, n) for n, text in enumerate(noise(*phases), 1)]
    during = [line(text, n) for n, text in enumerate(noise(("call", 3)), len(before) + 1)]
    assert [own(r) for r in records[: len(before)]] == before
    assert records[len(before)]["kind"] == "mcp.call"
    assert records[len(before)]["decision"] == "allow"
    assert [own(r) for r in records[len(before) + 1 :]] == during


async def test_an_upstream_that_only_prints_garbage_fails_closed_with_every_line_counted(
    world: World,
) -> None:
    """A server that never answers fails the start (exit 2, a clear error); the log holds
    the first 100 lines one by one, the 1000th, the final count and the failure."""
    server = world.fixture("noisy_server.py")
    command = [world.python, server, "start=120", "init=1000", "answer=no"]
    upstream = {"command": command, "era": "legacy", "startup_timeout_s": 5.0}
    code, err = await serve_until_it_ends(world, world.config({"n": upstream}))
    why = (
        "upstream 'n': no handshake and tool list within 5.0 s "
        "(it wrote 1120 lines that are not JSON: see the audit log)"
    )
    assert (code, err) == (2, f"glove mcp serve: {why}\n")
    records = world.audit()
    check_log_shape(records)
    texts = noise(("start", 120), ("init", 1000))
    expected = [line(text, n) for n, text in enumerate(texts[:AUDITED_ONE_BY_ONE], 1)]
    expected.append(line(texts[AUDITED_EVERY - 1], AUDITED_EVERY))
    final = line("noise init 1000", 1120, "the upstream stopped: 1120 lines dropped in all")
    expected += [{**final, "final": True}, failure(why)]
    assert [own(r) for r in records] == expected


async def test_an_upstream_error_on_stderr_reaches_the_user_and_the_audit(world: World) -> None:
    """A server that prints garbage and an error on stderr, then exits before answering:
    `glove mcp serve` exits 2 showing its last stderr lines (escapes neutralised), and the
    audit holds each line and the failure with the same stderr lines."""
    server = world.fixture("noisy_server.py")
    (world.folder / "stderr.txt").write_bytes(STDERR)
    args = ["start=3", "fail=start", f"stderr_file={world.folder / 'stderr.txt'}"]
    code, err = await serve_until_it_ends(
        world, world.config({"n": {"command": [world.python, server, *args]}})
    )
    summary = "upstream 'n': closed its stdout (exit status 3)"
    shown = "".join(f"  | {text}\n" for text in STDERR_SHOWN)
    assert (code, err) == (2, f"glove mcp serve: {summary}; the last lines of its stderr:\n{shown}")
    assert "\x1b" not in err
    records = world.audit()
    check_log_shape(records)
    lines = [line(text, n) for n, text in enumerate(noise(("start", 3)), 1)]
    assert [own(r) for r in records] == [*lines, failure(summary, STDERR_SHOWN)]


async def test_an_upstream_dying_in_a_call_tells_the_operator_not_the_agent(world: World) -> None:
    """A server that dies during a call: the agent gets -33002 without the server's stderr
    (it may hold host paths or secrets); the operator's error and the audit have it."""
    server = world.fixture("noisy_server.py")
    (world.folder / "stderr.txt").write_bytes(STDERR)
    args = ["call=2", "fail=call", f"stderr_file={world.folder / 'stderr.txt'}"]
    config = world.config({"n": {"command": [world.python, server, *args]}})
    summary = "upstream 'n': closed its stdout (exit status 3)"
    async with serving(world, config) as agent:
        await agent.initialize()
        reply = await agent.request("tools/call", {"name": "n__poke", "arguments": {}})
        # The summary, or "the mediation session ended" when the teardown answers first.
        assert reply["error"]["code"] == UPSTREAM_FAILED
        assert reply["error"]["message"] in (summary, SESSION_ENDED)
        assert await asyncio.wait_for(agent.proc.wait(), RUN_TIMEOUT_S) == 1
    shown = "".join(f"\n  | {text}" for text in STDERR_SHOWN)
    logged = (world.folder / "stderr.log").read_text()
    assert f"the session failed: {summary}; the last lines of its stderr:{shown}\n" in logged
    records = [own(r) for r in world.audit()]
    assert records[1:3] == [line("noise call 1", 1), line("noise call 2", 2)]
    assert failure(summary, STDERR_SHOWN) in records
    assert not any("EACCES" in json.dumps(r) for r in records if r["kind"] == "mcp.call")


async def test_messages_nobody_takes_are_audited(world: World) -> None:
    """Notifications Glove does not relay, a log line before the mediation is ready and a
    reply to an id Glove never issued are each dropped with a record, counted 1..5."""
    server = world.fixture("noisy_server.py")
    command = [world.python, server, "notify=3", "stray=yes"]
    policy = 'version = 1\n\n[[tools]]\nname = "n__poke"\n'
    async with serving(world, world.config({"n": {"command": command}}, policy)) as agent:
        await agent.initialize()
        reply = await agent.request("tools/call", {"name": "n__poke", "arguments": {}})
        assert reply["result"]["content"][0]["text"] == "poked"
    records = world.audit()
    check_log_shape(records)

    def message(count: int, reason: str, method: str | None) -> dict[str, Any]:
        found: dict[str, Any] = {
            "kind": "mcp.upstream_message",
            "decision": "dropped",
            "upstream": "n",
            "reason": reason,
            "dropped_so_far": count,
        }
        return found if method is None else {**found, "method": method}

    relayed_never = "a notification Glove does not relay"
    assert [own(r) for r in records[:4]] == [
        message(1, relayed_never, "notifications/noise"),
        message(2, relayed_never, "notifications/noise"),
        message(3, relayed_never, "notifications/noise"),
        message(4, "it came before the mediation was ready", "notifications/message"),
    ]
    assert records[4]["kind"] == "mcp.call"
    stray = "a reply to request 987654, which nothing waits for (never sent, or answered already)"
    assert [own(r) for r in records[5:]] == [message(5, stray, None)]


@pytest.mark.parametrize(
    ("mode", "stdout", "reason"),
    [
        ("oversized", "lenient", "upstream 'h': wrote a frame over 16777216 bytes"),
        ("not_jsonrpc", "lenient", 'upstream \'h\': wrote garbage: "jsonrpc" must be "2.0"'),
        ("garbage", "strict", "upstream 'h': wrote garbage: not JSON"),
        ("exit", "lenient", "upstream 'h': closed its stdout (exit status 0)"),
    ],
)
async def test_every_fatal_upstream_failure_has_its_record(
    tmp_path: Path, mode: str, stdout: str, reason: str
) -> None:
    """An oversized frame, JSON that is not JSON-RPC, garbage under strict and an exit each
    end the session with an `mcp.upstream` record naming why."""
    world = World(tmp_path, PYTHON, [PYTHON], None)
    config = world.config({"h": {"command": hostile_server(mode), "stdout": stdout}})
    async with serving(world, config) as agent:
        await agent.initialize()
        reply = await agent.request("tools/call", {"name": "h__poke", "arguments": {}})
        assert reply["error"]["code"] == UPSTREAM_FAILED
        assert await asyncio.wait_for(agent.proc.wait(), RUN_TIMEOUT_S) == 1
    failed = [r for r in world.audit() if r["kind"] == "mcp.upstream"]
    assert len(failed) == 1
    assert failed[0]["decision"] == "failed"
    assert failed[0]["reason"].startswith(reason)


async def test_a_request_before_the_mediation_is_ready_is_refused_and_audited(
    tmp_path: Path,
) -> None:
    """A server-to-client request during start-up (server-filesystem asks for roots right
    after its handshake) is refused with an `mcp.server_request` deny record."""
    world = World(tmp_path, PYTHON, [PYTHON], None)
    server = world.fixture("noisy_server.py")
    config = world.config({"n": {"command": [PYTHON, server, "ask=roots/list"]}})
    async with serving(world, config) as agent:
        await agent.initialize()
    denied = [own(r) for r in world.audit() if r["kind"] == "mcp.server_request"]
    assert denied == [
        {
            "kind": "mcp.server_request",
            "method": "roots/list",
            "upstream": "n",
            "params_sha256": denied[0]["params_sha256"],
            "decision": "deny",
            "reason": "it came before the mediation was ready",
        }
    ]


async def test_no_upstream_starts_when_the_audit_log_cannot_open(tmp_path: Path) -> None:
    """The audit log comes first: with its folder missing, `glove mcp serve` exits 2 and
    the upstream was never started (not even prestarted)."""
    world = World(tmp_path, PYTHON, [PYTHON], None)
    server = world.fixture("noisy_server.py")
    started = tmp_path / "started"
    config = world.config({"n": {"command": [PYTHON, server, f"touch={started}"]}})
    config.write_text(config.read_text().replace('"audit.log"', '"missing/audit.log"'))
    code, err = await serve_until_it_ends(world, config)
    assert code == 2
    assert "does not exist" in err
    assert not started.exists()


async def test_glove_run_shows_the_upstream_error(tmp_path: Path) -> None:
    """`glove run` with an upstream that dies at start exits 125 and shows its stderr."""
    world = World(tmp_path, PYTHON, [PYTHON], None)
    server = world.fixture("noisy_server.py")
    (tmp_path / "stderr.txt").write_bytes(STDERR)
    args = ["fail=start", f"stderr_file={tmp_path / 'stderr.txt'}"]
    config = world.config({"n": {"command": [PYTHON, server, *args]}})
    (tmp_path / "ws").mkdir()
    proc = await asyncio.create_subprocess_exec(
        *world.glove("run", "--config", str(config), "--workspace", str(tmp_path / "ws")),
        "--",
        "true",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT_S)
    assert proc.returncode == 125
    text = err.decode()
    assert "upstream 'n': closed its stdout (exit status 3); the last lines of its stderr:" in text
    for shown in STDERR_SHOWN:
        assert f"  | {shown}\n" in text
    assert "\x1b" not in text
    assert own(world.audit()[-1]) == failure(
        "upstream 'n': closed its stdout (exit status 3)", STDERR_SHOWN
    )


# -- Streamable HTTP ---------------------------------------------------------------------------


@asynccontextmanager
async def http_upstream(world: World, *args: str) -> AsyncIterator[str]:
    """The noisy HTTP fixture on a free loopback port; yields its URL."""
    server = world.fixture("noisy_http_server.py")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, server, *args, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        port = int(await asyncio.wait_for(proc.stdout.readline(), RUN_TIMEOUT_S))
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        await proc.wait()


async def test_every_non_json_event_on_http_streams_has_its_record(world: World) -> None:
    """Non-JSON SSE data on the initialize, tools/list and tools/call streams, and an SSE
    event that is not a message, each get one record, in order."""
    async with http_upstream(world, "init=2", "ping=yes", "list=1", "call=2") as url:
        config = world.config({"h": {"url": url}})
        async with serving(world, config) as agent:
            await agent.initialize()
            reply = await agent.request("tools/call", {"name": "h__poke", "arguments": {}})
            assert reply["result"]["content"][0]["text"] == "poked over http"
    records = world.audit()
    check_log_shape(records)
    ping = line("are you there", 3, "an SSE event of type 'ping'", "h")
    assert [own(r) for r in records] == [
        line("noise init 1", 1, HTTP_REASON, "h"),
        line("noise init 2", 2, HTTP_REASON, "h"),
        ping,
        line("noise list 1", 4, HTTP_REASON, "h"),
        own(records[4]),
        line("noise call 1", 5, HTTP_REASON, "h"),
        line("noise call 2", 6, HTTP_REASON, "h"),
    ]
    assert records[4]["kind"] == "mcp.call"


async def test_an_http_upstream_that_only_sends_garbage_fails_closed(world: World) -> None:
    """An HTTP server whose initialize stream carries only garbage and never answers: the
    start fails (exit 2) and the log holds 100 lines one by one, the final count and why."""
    async with http_upstream(world, "init=150", "answer=no") as url:
        config = world.config({"h": {"url": url, "era": "legacy", "startup_timeout_s": 5.0}})
        code, err = await serve_until_it_ends(world, config)
    why = (
        "upstream 'h': no handshake and tool list within 5.0 s "
        "(it wrote 150 lines that are not JSON: see the audit log)"
    )
    assert (code, err) == (2, f"glove mcp serve: {why}\n")
    records = world.audit()
    check_log_shape(records)
    texts = noise(("init", 150))
    expected = [line(t, n, HTTP_REASON, "h") for n, t in enumerate(texts[:AUDITED_ONE_BY_ONE], 1)]
    final = line("noise init 150", 150, "the upstream stopped: 150 lines dropped in all", "h")
    expected += [{**final, "final": True}, failure(why, upstream="h")]
    assert [own(r) for r in records] == expected


# -- the pure parts ----------------------------------------------------------------------------


def test_the_count_rule_records_the_first_hundred_then_one_in_a_thousand() -> None:
    """Drops 1..100 and every 1000th are recorded; the final record closes the count."""
    counter = DropCounter()
    recorded = [n for n in range(1, 2501) if counter.drop(f"line {n}")]
    assert recorded == [*range(1, AUDITED_ONE_BY_ONE + 1), 1000, 2000]
    assert counter.final() == 2500
    assert counter.final() is None
    exact = DropCounter()
    assert all(exact.drop() for _ in range(AUDITED_EVERY // 10))
    assert exact.final() is None


def test_printable_neutralises_every_control_and_bidi_character() -> None:
    """ESC, BEL, CR, LF, NUL, DEL, C1 controls and bidirectional overrides become escapes."""
    hostile = "a\x1b[2Jb\x07c\r\nd\x00e\x7ff\x9bg\u202eh\u2066i"
    shown = printable(hostile)
    assert shown.isprintable()
    assert shown == ("a\\u001b[2Jb\\u0007c\\u000d\\u000ad\\u0000e\\u007ff\\u009bg\\u202eh\\u2066i")


def test_stderr_lines_keep_the_last_lines_within_the_bounds() -> None:
    """Only the last lines, at most the line and byte bounds, blank lines left out, and a
    line cut by the byte bound marked."""
    tail = b"".join(f"line {i:02d} ".encode() + b"x" * 290 + b"\n\n" for i in range(40))
    lines = stderr_lines(tail)
    assert len(lines) <= STDERR_REPORT_LINES
    assert sum(len(text) for text in lines) <= STDERR_REPORT_BYTES + 3
    assert lines[-1].startswith("line 39 ")
    assert lines[0].startswith("...")
    short = stderr_lines(b"".join(f"e{i}\n".encode() for i in range(30)))
    assert short == tuple(f"e{i}" for i in range(30 - STDERR_REPORT_LINES, 30))
    assert stderr_lines(b"") == ()


def test_an_upstream_error_quoting_its_server_cannot_drive_a_terminal() -> None:
    """An upstream error's message (which may quote the server) and its stderr lines are
    neutralised; the agent's version carries neither the escapes nor the stderr."""
    error = UpstreamTransportError("n", "bad tools/list: at `$.tools[0].\x1b]52;c;eA==\x07`")
    error.add_stderr(stderr_lines(b"\x1b[2Jwiped\n"))
    assert str(error) == (
        "upstream 'n': bad tools/list: at `$.tools[0].\\u001b]52;c;eA==\\u0007`; "
        "the last lines of its stderr:\n  | \\u001b[2Jwiped"
    )
    assert agent_message(error) == error.summary
    assert "wiped" not in error.summary


async def test_glove_run_audits_what_its_upstreams_print_from_the_first_byte(
    world: World,
) -> None:
    """Under `glove run`, lines an upstream prints before and during its handshake and
    listing are in the run's audit log, one record each, while the agent runs normally."""
    server = world.fixture("noisy_server.py")
    phases = (("start", 2), ("init", 1), ("initialized", 1), ("list", 1))
    args = [f"{phase}={count}" for phase, count in phases]
    config = world.config({"n": {"command": [world.python, server, *args]}})
    workspace = Path(tempfile.mkdtemp(prefix="glove-mcp-audit-ws-", dir="/var/tmp"))
    try:
        if world.owner is not None:
            os.chown(workspace, *world.owner)
        # Not root: the per-user limit mechanisms are weaker than the cgroup ones (test_run).
        as_root = os.getuid() == 0 and world.owner is None
        weaker = [] if as_root else ["--accept-weaker", "all"]
        command = world.glove("run", "--config", str(config), "--workspace", str(workspace))
        proc = await asyncio.create_subprocess_exec(
            *command,
            *weaker,
            "--",
            "true",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT_S)
        assert proc.returncode == 0, err.decode()
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    records = world.audit()
    check_log_shape(records)
    assert [own(r) for r in records] == [line(text, n) for n, text in enumerate(noise(*phases), 1)]
