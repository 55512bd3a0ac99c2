"""Terminals under load and failure: a viewer that stops reading while the agent prints over
100 MiB, ``kill -9`` of gloved during output, and hostile agents (escape floods, a PTY
held open, silence until the wall time, full-speed output for the whole wall time)."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from glove.control import AsyncClient
from glove.control._paths import RuntimePaths
from glove.session._transcript_format import digest_of
from glove.testing.control import RawPeer

from ._gloved import Gloved, leaked_sandboxes
from ._terminals import (
    FLOOD_LINES,
    HOLDER_SLEEP,
    SMALL_FLOOD_LINES,
    Viewer,
    glove_raw,
    lines_bytes,
    pty_plan,
    seq_bytes,
    terminal_home,
)
from .test_escape import assert_safe

MIB = 1024 * 1024
RING_BYTES = 32 * MIB
FLOOD_LIMITS = {"wall_time_s": 300, "cpu_time_s": 300}
LEAK_DEADLINE_S = 10.0


async def _started(home: Gloved) -> Gloved:
    await asyncio.to_thread(home.start)
    return home


@pytest.fixture
async def gloved(tmp_path: Path) -> AsyncIterator[Gloved]:
    """A running gloved with a 32 MiB transcript ring."""
    home = await _started(terminal_home(Path(os.path.realpath(tmp_path)), ring_bytes=RING_BYTES))
    try:
        yield home
    finally:
        await asyncio.to_thread(home.stop)


async def _receipt(home: Gloved, session_id: str, timeout: float = 120.0) -> dict[str, Any]:
    await asyncio.to_thread(home.wait_terminal, session_id, timeout)
    receipts = await asyncio.to_thread(home.all_receipts)
    (found,) = [r["receipt"] for r in receipts if r["session_id"] == session_id]
    return found


async def _create(client: AsyncClient, plan: str) -> str:
    return str((await client.call("session.create", {"plan": plan}))["session_id"])


async def _stalled_attach(home: Gloved, session_id: str) -> RawPeer:
    """An attach from offset 0 on a raw connection that then reads nothing."""
    peer = await RawPeer.open(RuntimePaths(home.runtime))
    await peer.hello()
    await peer.send(
        {"id": 2, "method": "session.attach", "params": {"session_id": session_id, "from": 0}}
    )
    return peer


async def _read_all(peer: RawPeer) -> tuple[list[tuple[int, bytes]], list[dict[str, Any]]]:
    """Every event of the stalled stream, now read: data chunks and the other events."""
    chunks: list[tuple[int, bytes]] = []
    others: list[dict[str, Any]] = []
    while "event" in (frame := await peer.reply(timeout=60)):
        event = frame["event"]
        if event["kind"] == "data":
            chunks.append((event["offset"], base64.b64decode(event["data"])))
        else:
            others.append(event)
    assert frame == {"id": 2, "result": {"events": len(chunks) + len(others)}}, frame
    return chunks, others


async def test_a_viewer_that_stops_reading_never_slows_the_agent(gloved: Gloved) -> None:
    """Two viewers attach from 0 and read nothing while the agents print 104 MiB and 17 MB:
    both agents finish and get their receipts meanwhile; then each viewer reads on, in
    order, from exactly where it stopped: the small one every byte, the large one its
    first bytes, a gap naming the evicted offsets, and the last 32 MiB."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        big = await _create(client, pty_plan("flood", **FLOOD_LIMITS))
        small = await _create(client, pty_plan("flood-small", **FLOOD_LIMITS))
    peers = [await _stalled_attach(gloved, big), await _stalled_attach(gloved, small)]
    try:
        receipts = [await _receipt(gloved, big), await _receipt(gloved, small)]
        # Both agents are done and no viewer has read a byte.
        assert [r["outcome"]["kind"] for r in receipts] == ["exited", "exited"]
        expected = [seq_bytes(FLOOD_LINES), seq_bytes(SMALL_FLOOD_LINES)]
        assert receipts[0]["transcript"]["bytes"] == len(expected[0]) > 100 * MIB
        assert receipts[0]["transcript"]["evicted"] == len(expected[0]) - RING_BYTES
        assert receipts[1]["transcript"]["evicted"] == 0
        for receipt, data in zip(receipts, expected, strict=True):
            assert receipt["transcript"]["digest"] == digest_of(data)

        chunks, others = await _read_all(peers[1])
        assert others[0]["kind"] == "attached"
        assert others[-1] == {"kind": "end", "offset": len(expected[1]), "reason": "closed"}
        assert b"".join(c for _, c in chunks) == expected[1]  # resumed exactly: all of it

        chunks, others = await _read_all(peers[0])
        (gap,) = [e for e in others if e["kind"] == "gap"]
        before = [c for o, c in chunks if o < gap["offset"]]
        after = [(o, c) for o, c in chunks if o >= gap["until"]]
        assert len(before) + len(after) == len(chunks)
        head = b"".join(before)
        assert head == expected[0][: len(head)]
        assert len(head) == gap["offset"]
        assert gap["until"] == gap["evicted"] == len(expected[0]) - RING_BYTES
        assert after[0][0] == gap["until"]
        assert b"".join(c for _, c in after) == expected[0][gap["until"] :]
        assert others[-1]["reason"] == "closed"
    finally:
        for peer in peers:
            await peer.close()


async def test_kill9_during_output_keeps_what_was_durable(tmp_path: Path) -> None:
    """gloved is SIGKILLed while a viewer watches an agent print; after the restart the
    session has its daemon_lost receipt, whose transcript digest is that of exactly the
    bytes the log still returns, and those are the agent's bytes at their offsets."""
    home = terminal_home(Path(os.path.realpath(tmp_path)))
    await _started(home)
    try:
        async with AsyncClient.for_runtime_dir(home.runtime) as client:
            view = await client.call("session.create", {"plan": pty_plan("lines-forever")})
            session_id = view["session_id"]
            async with Viewer(client, session_id, **{"from": 0}) as viewer:
                async with asyncio.timeout(60):
                    while viewer.offset < 2 * MIB:
                        await viewer.wait_for(b"\n")
                        await asyncio.sleep(0.05)
                await asyncio.to_thread(home.kill9)
                seen = bytes(viewer.data)
        deadline = time.monotonic() + LEAK_DEADLINE_S
        while leaked_sandboxes():
            assert time.monotonic() < deadline, f"sandboxes outlived gloved: {leaked_sandboxes()}"
            await asyncio.sleep(0.05)
        await _started(home)
        receipt = await _receipt(home, session_id)
        assert receipt["outcome"]["kind"] == "daemon_lost"
        transcript = receipt["transcript"]
        assert transcript["complete"] is False
        durable = transcript["bytes"]
        count = 1000
        while len(expected := lines_bytes(count)) < max(durable, len(seen)):
            count *= 2
        assert seen == expected[: len(seen)]
        assert durable > 0
        assert transcript["digest"] == digest_of(expected[:durable])
        log = await asyncio.to_thread(glove_raw, home, "session", "log", session_id, "--raw")
        assert log.returncode == 0, log.stderr
        start = transcript["evicted"]
        assert log.stdout == expected[start:durable]
    finally:
        await asyncio.to_thread(home.stop)


async def test_an_escape_flood_is_neutralized_and_gloved_serves_on(gloved: Gloved) -> None:
    """An agent printing thousands of clipboard writes, titles, DCS, queries, resets and an
    unterminated OSC: gloved answers meanwhile, the session ends normally, and the log
    shows every sequence inert."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        view = await client.call("session.create", {"plan": pty_plan("escape-flood")})
        health = await client.call("health")
        assert health["status"] == "ok"
        receipt = await _receipt(gloved, view["session_id"])
    assert receipt["outcome"]["kind"] == "exited"
    log = await asyncio.to_thread(gloved.glove, "session", "log", view["session_id"])
    assert log.returncode == 0, log.stderr
    assert_safe(log.stdout)
    assert log.stdout.count("^[]52;c;QUFB^G") == 4000
    assert log.stdout.endswith("^[]52;c;" + "A" * 300_000)


async def test_a_terminal_held_open_or_silent_still_ends(gloved: Gloved) -> None:
    """An agent whose background child keeps the terminal open ends when the command does
    (the sandbox's pid namespace goes with it); a silent one ends at its wall time; the
    viewers of both are told the transcript closed."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        held = await _create(client, pty_plan("holds-pty"))
        silent = await _create(client, pty_plan("silent", wall_time_s=2))
        async with Viewer(client, held) as one, Viewer(client, silent) as two:
            ends = [await one.wait_event("end", 60), await two.wait_event("end", 60)]
        assert [e["reason"] for e in ends] == ["closed", "closed"]
        first = await _receipt(gloved, held)
        second = await _receipt(gloved, silent)
    assert first["outcome"]["kind"] == "exited"
    assert b"started" in one.data
    assert (second["outcome"]["kind"], second["outcome"]["limit"]) == ("limit", "wall_time")
    marker = f"sleep\0{HOLDER_SLEEP}\0".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                assert (entry / "cmdline").read_bytes() != marker, "the holder outlived it"
            except OSError:
                continue


async def test_full_speed_output_for_the_whole_wall_time(tmp_path: Path) -> None:
    """``yes`` until its wall time on a 1 MiB ring: gloved answers meanwhile, a live viewer
    stays in order (told of what it missed), the ring keeps exactly its newest MiB, and
    the receipt counts every byte and every eviction."""
    ring = MIB
    home = await _started(terminal_home(Path(os.path.realpath(tmp_path)), ring_bytes=ring))
    try:
        async with AsyncClient.for_runtime_dir(home.runtime) as client:
            view = await client.call("session.create", {"plan": pty_plan("yes", wall_time_s=4)})
            session_id = view["session_id"]
            async with Viewer(client, session_id) as viewer:
                for _ in range(10):
                    assert (await client.call("health"))["status"] == "ok"
                    await asyncio.sleep(0.2)
                end = await viewer.wait_event("end", 60)
            receipt = await _receipt(home, session_id)
        assert (receipt["outcome"]["kind"], receipt["outcome"]["limit"]) == ("limit", "wall_time")
        transcript = receipt["transcript"]
        total = transcript["bytes"]
        assert total > 4 * ring
        assert transcript["evicted"] == total - ring
        assert end == {"kind": "end", "offset": total, "reason": "closed"}
        ring_file = home.state / "sessions-data" / session_id / "transcript.ring"
        assert ring_file.stat().st_size == ring
        log = await asyncio.to_thread(
            glove_raw, home, "session", "log", session_id, "--raw", "--from", "0"
        )
        assert log.stdout == bytes(b"y\r\n"[o % 3] for o in range(total - ring, total))
        assert f"were evicted ({total - ring} in all)".encode() in log.stderr
    finally:
        await asyncio.to_thread(home.stop)
