"""PTY sessions through a real gloved: transcript, receipt digest, viewers and the writer,
input/resize/signal/detach, refusals, and ``glove session log`` neutralizing escapes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from glove.control import AsyncClient, RemoteError
from glove.session._transcript_format import digest_of
from glove.session._viewers import MAX_VIEWERS_PER_SESSION

from ._gloved import Gloved, plan_text
from ._terminals import Viewer, pty_plan, terminal_home

PROMPT = b"agent$ "
#: A sleep no other test runs, to find it in /proc.
SLEEP_MARK = 97531


@pytest.fixture
async def gloved(tmp_path: Path) -> AsyncIterator[Gloved]:
    """A running gloved whose home has the terminal harnesses."""
    home = terminal_home(Path(os.path.realpath(tmp_path)))
    await asyncio.to_thread(home.start)
    try:
        yield home
    finally:
        await asyncio.to_thread(home.stop)


async def _create(client: AsyncClient, plan: str) -> str:
    view = await client.call("session.create", {"plan": plan})
    return str(view["session_id"])


async def _until_foreground(cmdline: str, timeout: float = 30.0) -> None:
    """Until a process with ``cmdline`` is its terminal's foreground process group."""

    def found() -> bool:
        for entry in Path("/proc").iterdir():
            try:
                if (entry / "cmdline").read_bytes() != cmdline.encode():
                    continue
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[2] == fields[5]:  # pgrp == tpgid
                return True
        return False

    async with asyncio.timeout(timeout):
        while not await asyncio.to_thread(found):
            await asyncio.sleep(0.02)


async def _type(client: AsyncClient, session_id: str, text: str) -> None:
    await client.call("session.input", {"session_id": session_id, "data": text})


async def _receipt(home: Gloved, session_id: str) -> dict[str, Any]:
    await asyncio.to_thread(home.wait_terminal, session_id)
    receipts = await asyncio.to_thread(home.all_receipts)
    (found,) = [r["receipt"] for r in receipts if r["session_id"] == session_id]
    return found


async def test_a_pty_session_keeps_its_transcript_and_the_receipt_commits_to_it(
    gloved: Gloved,
) -> None:
    """The harness sees the plan's terminal size; every byte is in the transcript, in order;
    the receipt's transcript digest and pty SHA-256 are those of the bytes a later attach
    replays; capabilities offer pty."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        caps = await client.call("capabilities")
        assert caps["terminals"] == ["pipes", "pty"]
        session_id = await _create(client, pty_plan("lines", rows=33, cols=101))
        receipt = await _receipt(gloved, session_id)
        async with Viewer(client, session_id, **{"from": 0}) as replay:
            end = await replay.wait_event("end")
    assert end["reason"] == "closed"
    data = bytes(replay.data)
    expected = b"33 101\r\n" + "".join(f"line-{i}\r\n" for i in range(3000)).encode()
    assert data == expected
    assert receipt["outcome"]["kind"] == "exited"
    transcript = receipt["transcript"]
    assert transcript == {
        "format": "glove-transcript/v1",
        "bytes": len(expected),
        "digest": digest_of(expected),
        "evicted": 0,
        "ring_bytes": 16 * 1024 * 1024,
        "complete": True,
    }
    assert receipt["output"] == {
        "pty": {"bytes": len(expected), "sha256": "sha256:" + hashlib.sha256(expected).hexdigest()}
    }
    assert replay.attached["live"] is False
    assert replay.attached["end"] == len(expected)


async def test_viewers_share_the_terminal_and_one_writer_types(gloved: Gloved) -> None:
    """Two viewers see the same bytes at the same offsets; a later writer takes the role
    (the old one is told and refused); input, resize, a foreground INT and detach work."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        session_id = await _create(client, pty_plan("shell"))
        async with (
            Viewer(client, session_id, mode="write") as first,
            Viewer(client, session_id, mode="read") as watcher,
        ):
            assert first.attached["writer"] is True
            assert watcher.attached["writer"] is False
            await first.wait_for(PROMPT)
            await client.call(
                "session.input",
                {"session_id": session_id, "data": "echo $((6*7))\r", "viewer": first.viewer_id},
            )
            await first.wait_for(b"42\r\n")
            await watcher.wait_for(b"42\r\n")
            seen = min(len(first.data), len(watcher.data))
            assert first.data[:seen] == watcher.data[:seen]  # same offsets, same bytes

            async with Viewer(client, session_id, mode="write", tail=0) as second:
                role = await first.wait_event("role")
                assert role == {"kind": "role", "writer": False, "by": second.viewer_id}
                with pytest.raises(RemoteError) as refused:
                    await client.call(
                        "session.input",
                        {"session_id": session_id, "data": "x", "viewer": first.viewer_id},
                    )
                assert refused.value.code == "not_writer"
                await client.call(
                    "session.resize",
                    {"session_id": session_id, "rows": 41, "cols": 121,
                     "viewer": second.viewer_id},
                )  # fmt: skip
                raw = base64.b64encode(b"stty size\r").decode()
                await client.call(
                    "session.input",
                    {"session_id": session_id, "raw": raw, "viewer": second.viewer_id},
                )
                await second.wait_for(b"41 121\r\n")
                # A script's input (no viewer) is the owner's too.
                await _type(client, session_id, f"sleep {SLEEP_MARK}\r")
                await _until_foreground(f"sleep\0{SLEEP_MARK}\0")
                done = await client.call(
                    "session.signal", {"session_id": session_id, "signal": "INT"}
                )
                assert done == {"signal": "INT", "to": "foreground"}
                await _type(client, session_id, 'echo af""ter\r')
                await second.wait_for(b"after\r\n")
                detached = await client.call(
                    "session.detach", {"session_id": session_id, "viewer": watcher.viewer_id}
                )
                assert detached["viewer"] == watcher.viewer_id
                end = await watcher.wait_event("end")
                assert end["reason"] == "detached"
                assert end["offset"] == watcher.offset
        await client.call("session.stop", {"session_id": session_id})
        receipt = await _receipt(gloved, session_id)
    assert receipt["outcome"]["kind"] == "cancelled"
    assert receipt["transcript"]["complete"] is True


async def test_attach_streams_ended_by_their_deadline_leave_no_viewer_behind(
    gloved: Gloved,
) -> None:
    """More attaches than a session seats viewers, each ended by its own short deadline, and
    the next attach still gets in: the viewer leaves with its stream (its removal once ran
    under the stream's passed deadline, was dropped as stale and left a ghost in a seat)."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        session_id = await _create(client, pty_plan("shell"))
        async with Viewer(client, session_id, mode="read") as first:
            await first.wait_for(PROMPT)
        for _ in range(MAX_VIEWERS_PER_SESSION + 2):
            with contextlib.suppress(RemoteError, TimeoutError):
                async with client.stream(
                    "session.attach", {"session_id": session_id, "mode": "read"}, timeout=0.3
                ) as events:
                    async for _event in events:
                        pass
        async with Viewer(client, session_id, mode="write") as last:
            assert last.attached["writer"] is True
        await client.call("session.stop", {"session_id": session_id})


async def test_reattach_from_an_offset_misses_nothing_and_duplicates_nothing(
    gloved: Gloved,
) -> None:
    """A viewer that leaves at offset N and comes back with from=N gets exactly the bytes a
    viewer that never left got after N."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        session_id = await _create(client, pty_plan("lines"))
        async with Viewer(client, session_id, **{"from": 0}) as whole:
            async with Viewer(client, session_id, **{"from": 0}) as part:
                await part.wait_for(b"line-100\r\n")
            left_at = part.offset
            await whole.wait_event("end")
        async with Viewer(client, session_id, **{"from": left_at}) as back:
            await back.wait_event("end")
    assert bytes(part.data) + bytes(back.data) == bytes(whole.data)


async def test_terminal_requests_that_do_not_fit_are_typed_refusals(gloved: Gloved) -> None:
    """A pipes session has no terminal; an offset past the end, from with tail, input to a
    finished session, a detach of no viewer: each a typed error, the connection kept."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        pipes = await _create(client, plan_text("hello"))
        await asyncio.to_thread(gloved.wait_terminal, pipes)
        with pytest.raises(RemoteError) as refused:
            async with Viewer(client, pipes):
                pass
        assert refused.value.code == "no_terminal"
        session_id = await _create(client, pty_plan("lines"))
        await asyncio.to_thread(gloved.wait_terminal, session_id)
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("session.input", {"data": "x"}, "session_conflict"),
            ("session.input", {}, "invalid_params"),
            ("session.resize", {"rows": 0, "cols": 10}, "invalid_params"),
            ("session.signal", {"signal": "KILL"}, "invalid_params"),
            ("session.detach", {"viewer": 999}, "session_conflict"),
        ]
        for method, params, code in cases:
            with pytest.raises(RemoteError) as refused:
                await client.call(method, {"session_id": session_id, **params})
            assert refused.value.code == code, (method, refused.value)
        for params, code in (({"from": 10**9}, "session_conflict"),
                             ({"from": 0, "tail": 5}, "invalid_params")):  # fmt: skip
            with pytest.raises(RemoteError) as refused:
                async with Viewer(client, session_id, **params):
                    pass
            assert refused.value.code == code
        with pytest.raises(RemoteError) as refused:
            await client.call("session.attach", {"session_id": "nosuch"})
        assert refused.value.code in ("session_not_found", "invalid_params")
        assert (await client.call("health"))["status"] == "ok"


async def test_session_log_shows_hostile_sequences_inert_and_raw_shows_them(
    gloved: Gloved,
) -> None:
    """``glove session log`` renders OSC 52, the title, DCS and queries as ^[ text and keeps
    colours; ``--raw`` gives the exact bytes; input, resize and signal work from the CLI."""
    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        session_id = await _create(client, pty_plan("hostile"))
        await asyncio.to_thread(gloved.wait_terminal, session_id)
    safe = await asyncio.to_thread(gloved.glove, "session", "log", session_id)
    assert safe.returncode == 0, safe.stderr
    assert safe.stdout == (
        'A^[]52;c;aGVsbG8=^GB^[]0;pwned^GC^[P$q"p^[\\D^[[6nE^[[cF\x1b[1;31mred\x1b[0m\n'
    )
    raw = await asyncio.to_thread(gloved.glove, "session", "log", session_id, "--raw")
    assert "\x1b]52;c;aGVsbG8=\x07" in raw.stdout
    tail = await asyncio.to_thread(gloved.glove, "session", "log", session_id, "--tail", "5")
    assert tail.stdout == "[0m\n"  # the last 5 bytes (text mode reads CR LF as LF)

    async with AsyncClient.for_runtime_dir(gloved.runtime) as client:
        shell = await _create(client, pty_plan("shell"))
        async with Viewer(client, shell) as view:
            await view.wait_for(PROMPT)
            done = await asyncio.to_thread(
                gloved.glove, "session", "input", shell, "--data", "stty size", "--enter"
            )
            assert done.returncode == 0, done.stderr
            await view.wait_for(b"30 100\r\n")
            done = await asyncio.to_thread(gloved.glove, "session", "resize", shell, "50", "60")
            assert done.returncode == 0, done.stderr
            await asyncio.to_thread(
                gloved.glove, "session", "input", shell, "--data", "stty size", "--enter"
            )
            await view.wait_for(b"50 60\r\n")
            done = await asyncio.to_thread(gloved.glove, "session", "signal", shell, "SIGHUP")
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "SIGHUP -> command"
            await view.wait_event("end")  # an interactive bash exits on HUP
    bad = await asyncio.to_thread(gloved.glove, "session", "signal", shell, "KILL")
    assert bad.returncode == 64
    assert "not one of" in bad.stderr
    follow = await asyncio.to_thread(
        gloved.glove, "session", "log", shell, "--follow", "--from", "0"
    )
    assert "50 60" in follow.stdout
    assert json.loads((await asyncio.to_thread(gloved.glove, "capabilities", "--json")).stdout)[
        "terminals"
    ] == ["pipes", "pty"]
