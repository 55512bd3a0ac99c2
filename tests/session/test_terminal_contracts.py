"""Contracts of a session's terminal an audit found untested: ``glove attach --read-only``,
the detach key, the PTY drain's observer seam, ``glove session log --follow`` and the
``end`` of each ``data`` event."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import select
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from glove.actors import running
from glove.cli._terminal_client import parse_detach_key
from glove.control import AsyncClient
from glove.session._pty_drain import PtyDrain
from glove.session._transcript_format import MIN_RING_BYTES

from ._gloved import Gloved
from ._terminals import glove_raw, pty_plan, terminal_home
from .test_attach_tmux import Tmux

#: How long a ``glove`` subprocess may take to show what a test waits for.
OUTPUT_DEADLINE_S = 20.0
#: The drain test writes this much through a ring of MIN_RING_BYTES (it evicts).
DRAIN_TOTAL_BYTES = 5 * MIN_RING_BYTES
#: Sizes of the chunks the drain test writes (cycled; odd, to cross ring boundaries).
DRAIN_CHUNK_SIZES = (1, 4093, 65536, 17, 30001, 8192)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    """A tmux server of our own."""
    server = Tmux(f"glove-contract-{os.getpid()}-{time.monotonic_ns()}")
    try:
        yield server
    finally:
        subprocess.run(["tmux", "-L", server.name, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def gloved(tmp_path: Path) -> Iterator[Gloved]:
    """A running gloved with the terminal harnesses."""
    home = terminal_home(Path(os.path.realpath(tmp_path)))
    home.start()
    try:
        yield home
    finally:
        home.stop()


@pytest.fixture
async def agloved(tmp_path: Path) -> AsyncIterator[Gloved]:
    """The same, started from an async test."""
    home = terminal_home(Path(os.path.realpath(tmp_path)))
    await asyncio.to_thread(home.start)
    try:
        yield home
    finally:
        await asyncio.to_thread(home.stop)


def _shell(home: Gloved, **plan: int) -> str:
    created = home.glove("session", "create", "-", "--json", stdin=pty_plan("shell", **plan))
    assert created.returncode == 0, created.stderr
    return str(json.loads(created.stdout)["session_id"])


def _type(home: Gloved, session_id: str, text: str) -> None:
    done = home.glove("session", "input", session_id, "--data", text, "--enter")
    assert done.returncode == 0, done.stderr


def _transcript(home: Gloved, session_id: str) -> bytes:
    done = glove_raw(home, "session", "log", session_id, "--raw", "--from", "0")
    assert done.returncode == 0, done.stderr
    return bytes(done.stdout)


def _until_in_transcript(home: Gloved, session_id: str, needle: bytes) -> bytes:
    deadline = time.monotonic() + OUTPUT_DEADLINE_S
    while True:
        seen = _transcript(home, session_id)
        if needle in seen:
            return seen
        assert time.monotonic() < deadline, seen[-2000:]
        time.sleep(0.1)


def _pane_command(home: Gloved, session_id: str, *flags: str) -> str:
    """``glove attach`` in a pane, then how it ended, then a sleep (the pane stays)."""
    env = " ".join(
        f"{key}={shlex.quote(value)}"
        for key, value in home.env.items()
        if key.startswith("XDG_") or key in ("HOME", "PATH", "PYTHONPATH")
    )
    args = " ".join(shlex.quote(flag) for flag in flags)
    attach = f"env {env} {shlex.quote(sys.executable)} -m glove attach {session_id} {args}"
    return f"{attach}; echo DETACHED-$?; exec sleep 600"


# -- G1: --read-only -----------------------------------------------------------------------------


def test_a_read_only_attach_never_types_and_never_resizes(gloved: Gloved, tmux: Tmux) -> None:
    """In a 120x40 tmux pane, ``glove attach --read-only`` shows the agent's output, but
    keys typed in it never reach the agent and the agent's terminal keeps the plan's 30x100;
    Ctrl-] still detaches it."""
    session_id = _shell(gloved, rows=30, cols=100)
    _until_in_transcript(gloved, session_id, b"agent$")
    tmux("new-session", "-d", "-s", "ro", "-x", "120", "-y", "40",
         _pane_command(gloved, session_id, "--read-only"))  # fmt: skip
    tmux.until("ro", lambda s: "agent$" in s)
    tmux("send-keys", "-t", "ro", "echo TYPED-$((3+4))", "Enter")
    time.sleep(0.5)  # room for the keys (and a resize) to go anywhere they might
    _type(gloved, session_id, "stty size; echo SCRIPT-$((2+3))")
    screen = tmux.until("ro", lambda s: "SCRIPT-5" in s)
    assert "30 100" in screen, screen  # the plan's size: the viewer sent no resize
    seen = _transcript(gloved, session_id)
    assert b"TYPED" not in seen, seen
    assert b"30 100\r\n" in seen, seen
    tmux("send-keys", "-t", "ro", "C-]")
    tmux.until("ro", lambda s: "DETACHED-0" in s)


# -- G2: the detach key ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [("^]", b"\x1d"), ("^A", b"\x01"), ("^a", b"\x01"), ("^@", b"\x00"), ("^?", b"\x7f"),
     ("^_", b"\x1f"), ("q", b"q"), ("~", b"~"), ("^", b"^"), ("none", None), ("NONE", None)],
)  # fmt: skip
def test_parse_detach_key_takes_caret_form_one_ascii_character_or_none(
    text: str, key: bytes | None
) -> None:
    """``^X`` is the control byte (``^?`` DEL), one ASCII character is itself, ``none`` none."""
    assert parse_detach_key(text) == key


@pytest.mark.parametrize("text", ["", "bogus", "^^^", "^1", "^`", "^é", "é", "\u2603", "ab", "^AB"])
def test_parse_detach_key_refuses_anything_else(text: str) -> None:
    """Empty, several characters, a caret before a non-control letter, non-ASCII: ValueError."""
    with pytest.raises(ValueError, match="detach key"):
        parse_detach_key(text)


def test_attach_with_a_bogus_detach_key_is_a_usage_error(gloved: Gloved) -> None:
    """``glove attach ID --detach-key bogus`` exits 64 with one line naming the flag's rule."""
    session_id = _shell(gloved)
    done = gloved.glove("attach", session_id, "--detach-key", "bogus")
    assert done.returncode == 64, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "detach key" in lines[0]
    assert "Traceback" not in done.stderr


def test_a_chosen_detach_key_detaches_and_ctrl_bracket_goes_to_the_agent(
    gloved: Gloved, tmux: Tmux
) -> None:
    """Under tmux with ``--detach-key ^A``: Ctrl-] is a byte for the agent (``cat -v`` shows
    it) and Ctrl-A detaches."""
    session_id = _shell(gloved)
    tmux("new-session", "-d", "-s", "dk", "-x", "100", "-y", "30",
         _pane_command(gloved, session_id, "--detach-key", "^A"))  # fmt: skip
    tmux.until("dk", lambda s: "agent$" in s)
    tmux("send-keys", "-t", "dk", "cat -v", "Enter")
    time.sleep(0.3)
    tmux("send-keys", "-t", "dk", "C-]")
    tmux("send-keys", "-t", "dk", "Enter")
    # The line discipline echoes ^] and cat -v prints it: two on screen, the client attached.
    screen = tmux.until("dk", lambda s: s.count("^]") >= 2)
    assert "DETACHED" not in screen
    tmux("send-keys", "-t", "dk", "C-a")
    tmux.until("dk", lambda s: "DETACHED-0" in s)


# -- G3: the observer seam ----------------------------------------------------------------------


def _drain_chunks() -> list[bytes]:
    chunks: list[bytes] = []
    total = 0
    index = 0
    while total < DRAIN_TOTAL_BYTES:
        size = DRAIN_CHUNK_SIZES[index % len(DRAIN_CHUNK_SIZES)]
        chunks.append(bytes((total + i) * 7 % 251 for i in range(size)))
        total += size
        index += 1
    return chunks


async def test_pty_drain_observers_see_every_byte_in_order_before_the_transcript(
    tmp_path: Path,
) -> None:
    """An observer is called with each chunk while the transcript still ends before it, and
    gets every byte in order, although the ring (MIN_RING_BYTES) evicts most of them."""
    seen: list[tuple[int, bytes]] = []
    also: list[bytes] = []

    def observer(data: bytes) -> None:
        assert drain.transcript is not None
        seen.append((drain.transcript.end, bytes(data)))

    drain = PtyDrain(
        tmp_path / "s1",
        capacity=MIN_RING_BYTES,
        size=(24, 80),
        observers=[observer, lambda data: also.append(bytes(data))],
    )
    chunks = _drain_chunks()
    async with running(drain):
        assert drain.transcript is not None
        offset = 0
        for chunk in chunks:
            pause = drain.write("pty", chunk)
            assert drain.transcript.end == offset + len(chunk)
            offset += len(chunk)
            if pause is not None:
                await pause
        assert drain.exit_reason is None
        assert drain.transcript.start > 0  # the ring evicted what the observer saw
    expected = b"".join(chunks)
    ends = [0]
    for chunk in chunks[:-1]:
        ends.append(ends[-1] + len(chunk))
    assert [end for end, _ in seen] == ends
    assert [data for _, data in seen] == chunks
    assert b"".join(also) == expected
    assert drain.digests()["pty"].bytes == len(expected)


# -- G4: session log --follow ---------------------------------------------------------------------


def _read_until(proc: subprocess.Popen[bytes], needle: bytes, got: bytearray) -> None:
    """Read ``proc``'s stdout into ``got`` until it holds ``needle``."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + OUTPUT_DEADLINE_S
    while needle not in got:
        left = deadline - time.monotonic()
        assert left > 0, (needle, bytes(got[-2000:]))
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, (needle, bytes(got[-2000:]), proc.poll())
            got += chunk


def test_session_log_follow_prints_later_output_and_ends_with_the_session(
    gloved: Gloved,
) -> None:
    """``glove session log ID --follow`` on a running session prints output the agent made
    after it started, and exits 0 once the session ends."""
    session_id = _shell(gloved)
    _until_in_transcript(gloved, session_id, b"agent$")
    proc = subprocess.Popen(
        [gloved.python, "-m", "glove", "session", "log", session_id, "--follow"],
        env=gloved.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        got = bytearray()
        _read_until(proc, b"agent$", got)
        assert b"FOLLOW" not in got
        _type(gloved, session_id, "echo FOLLOW-$((5*5))")
        _read_until(proc, b"FOLLOW-25\r\n", got)
        assert proc.poll() is None  # still following
        _type(gloved, session_id, "echo LAST-$((1+1)); exit 0")
        _read_until(proc, b"LAST-2\r\n", got)
        assert proc.wait(timeout=OUTPUT_DEADLINE_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


# -- G5: the data event's end ---------------------------------------------------------------------


async def test_data_events_carry_the_transcript_end_a_lagging_viewer_is_behind(
    agloved: Gloved,
) -> None:
    """A viewer reading from offset 0 of a running session that already produced far more
    than one chunk gets data events whose ``end`` is the transcript's end (the same for each,
    the agent idle), beyond the chunk until the last one."""
    session_id = await asyncio.to_thread(_shell, agloved)
    await asyncio.to_thread(_type, agloved, session_id, "seq 1 60000; echo SEQ-$((9*9))")
    await asyncio.to_thread(_until_in_transcript, agloved, session_id, b"SEQ-81\r\n")
    async with AsyncClient.for_runtime_dir(agloved.runtime) as client:
        events: list[dict[str, Any]] = [
            event
            async for event in client.stream(
                "session.attach",
                {"session_id": session_id, "from": 0, "follow": False},
                timeout=60,
            )
        ]
    attached, *data, ended = events
    assert attached["kind"] == "attached", attached
    total = int(attached["end"])
    assert ended == {"kind": "end", "offset": total, "reason": "caught_up"}
    assert len(data) >= 4, len(data)  # seq's ~400 KB is several chunks
    offset = 0
    for event in data:
        assert event["kind"] == "data"
        size = len(base64.b64decode(event["data"]))
        assert event["offset"] == offset
        assert event["end"] >= offset + size
        assert event["end"] == total, (event["offset"], event["end"], total)
        offset += size
    assert offset == total
    assert data[0]["end"] > len(base64.b64decode(data[0]["data"]))  # the lag is visible
