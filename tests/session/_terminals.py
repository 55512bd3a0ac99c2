"""Helpers for the terminal tests: a home whose gloved runs PTY sessions, and a viewer."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from glove.control import AsyncClient, AsyncStream, ControlError

from ._gloved import HARNESSES, LIMITS, MARKER, Gloved

#: ``seq 1 FLOOD_LINES`` on a terminal is 108,888,897 bytes (over 100 MiB).
FLOOD_LINES = 12_000_000
#: ... and ``seq 1 SMALL_FLOOD_LINES`` about 17 MB (it fits a 32 MiB ring).
SMALL_FLOOD_LINES = 2_000_000
#: The background sleep that keeps the terminal open after the command exits.
HOLDER_SLEEP = 4242

_HOSTILE = (
    r'printf "A\033]52;c;aGVsbG8=\007B\033]0;pwned\007C\033P\$q\"p\033\134D'
    r'\033[6nE\033[cF\033[1;31mred\033[0m\n"'
)
_ESCAPE_FLOOD = (
    r"i=0; while [ $i -lt 4000 ]; do "
    r'printf "\033]52;c;QUFB\007\033]0;t$i\007\033P1\$r0m\033\134\033[6n\033[?1049h'
    r'\033[?1000h\033[21t\033[3J\033c\033[999999999C x$i\n"; i=$((i+1)); done; '
    r'printf "\033]52;c;"; head -c 300000 /dev/zero | tr "\000" A'
)
_HARNESS_ARGV = {
    "lines": ["/bin/sh", "-c",
              "stty size; i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done"],
    "hostile": ["/bin/sh", "-c", _HOSTILE],
    "flood": ["/usr/bin/seq", "1", str(FLOOD_LINES)],
    "flood-small": ["/usr/bin/seq", "1", str(SMALL_FLOOD_LINES)],
    "lines-forever": ["/bin/sh", "-c",
                      f"i=0; while :; do echo line-$i; i=$((i+1)); done; : {MARKER}"],
    "escape-flood": ["/bin/sh", "-c", _ESCAPE_FLOOD],
    "holds-pty": ["/bin/sh", "-c", f"setsid sleep {HOLDER_SLEEP} & echo started; exit 0"],
    "silent": ["/bin/sleep", "1000"],
    "yes": ["/usr/bin/yes"],
}  # fmt: skip
#: TOML basic strings take JSON's escapes, so each argv is written as JSON.
TERMINAL_HARNESSES = (
    "\n[harnesses.shell]\nargv = ['/bin/bash', '--norc', '--noprofile', '-i']\n"
    "env = { TERM = 'xterm-256color', PS1 = 'agent$ ' }\n"
    + "".join(f"\n[harnesses.{name}]\nargv = {json.dumps(argv)}\n"
              for name, argv in _HARNESS_ARGV.items())
)  # fmt: skip

#: Plan limits generous enough for a flood (the home's local maxima are raised to match).
BIG_OUTPUT_BYTES = 1024**3


def terminal_home(
    base: Path,
    *,
    ring_bytes: int | None = None,
    creds: dict[str, Any] | None = None,
    python: str | None = None,
) -> Gloved:
    """A set-up home with the test and terminal harnesses, big local output maxima, and
    (optionally) another transcript ring size."""
    home = Gloved(base, creds=creds or {})
    if python is not None:
        home.python = python
    home.setup(HARNESSES + TERMINAL_HARNESSES)
    toml = home.config / "gloved.toml"
    text = toml.read_text()
    text = text.replace("output_bytes = 67108864", f"output_bytes = {BIG_OUTPUT_BYTES}")
    if ring_bytes is not None:
        text = re.sub(r"transcript_bytes = \d+", f"transcript_bytes = {ring_bytes}", text)
    toml.write_text(text)
    return home


def glove_raw(home: Gloved, *args: str, timeout: float = 120.0) -> Any:
    """Run the glove CLI as the home's owner; the CompletedProcess with bytes output."""
    return subprocess.run(
        [home.python, "-m", "glove", *args],
        **home.creds,
        env=home.env,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def pty_plan(harness: str, *, rows: int = 30, cols: int = 100, **limits: Any) -> str:
    """A PTY plan for ``harness`` with the suite's limits (``limits`` override some)."""
    doc = {
        "version": 1,
        "harness": harness,
        "exposures": [],
        "limits": {**LIMITS, "output_bytes": BIG_OUTPUT_BYTES, **limits},
        "network": "none",
        "terminal": "pty",
        "rows": rows,
        "cols": cols,
    }
    return json.dumps(doc)


def seq_bytes(count: int) -> bytes:
    """What ``seq 1 COUNT`` prints on a terminal (onlcr: CR LF)."""
    return "".join(f"{i}\r\n" for i in range(1, count + 1)).encode()


def lines_bytes(count: int) -> bytes:
    """What the ``lines-forever`` harness prints first (``line-N`` CR LF)."""
    return "".join(f"line-{i}\r\n" for i in range(count)).encode()


class Viewer:
    """One ``session.attach`` stream, read by a task into a buffer (offsets checked)."""

    def __init__(self, client: AsyncClient, session_id: str, **params: Any) -> None:
        self.client = client
        self.session_id = session_id
        self.params = {"session_id": session_id, **params}
        self.attached: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []
        self.data = bytearray()
        self.first_offset = 0
        self.offset = 0
        self.end: dict[str, Any] | None = None
        self._changed = asyncio.Event()
        self._stream: AsyncStream[dict[str, Any]] | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Viewer:
        self._stream = self.client.stream("session.attach", self.params, timeout=600)
        self.attached = await anext(self._stream)
        assert self.attached["kind"] == "attached", self.attached
        self.first_offset = self.offset = self.attached["offset"]
        self._task = asyncio.get_running_loop().create_task(self._read())
        return self

    async def __aexit__(self, *_exc: object) -> None:
        # A connection that broke under the viewer (gloved killed) is the test's business.
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ControlError):
                await self._task
        if self._stream is not None:
            with contextlib.suppress(ControlError):
                await self._stream.aclose()

    @property
    def viewer_id(self) -> int:
        return int(self.attached["viewer"])

    async def _read(self) -> None:
        assert self._stream is not None
        async for event in self._stream:
            self.events.append(event)
            kind = event["kind"]
            if kind in ("data", "gap", "end"):
                assert event["offset"] == self.offset, (event, self.offset)
            if kind == "data":
                chunk = base64.b64decode(event["data"])
                self.data += chunk
                self.offset += len(chunk)
            elif kind == "gap":
                self.offset = event["until"]
            elif kind == "end":
                self.end = event
            self._changed.set()

    async def wait_for(self, needle: bytes | str, timeout: float = 30.0) -> None:
        """Until the bytes seen contain ``needle``."""
        want = needle.encode() if isinstance(needle, str) else needle
        try:
            async with asyncio.timeout(timeout):
                while want not in self.data:
                    self._changed.clear()
                    if self._task is not None and self._task.done():
                        self._task.result()
                        raise AssertionError(f"stream ended before {want!r}")
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {want!r} in {bytes(self.data[-2000:])!r}") from None

    async def wait_event(self, kind: str, timeout: float = 30.0) -> dict[str, Any]:
        """Until an event of ``kind`` arrived; the first one."""
        async with asyncio.timeout(timeout):
            while True:
                for event in self.events:
                    if event["kind"] == kind:
                        return event
                self._changed.clear()
                if self._task is not None and self._task.done():
                    self._task.result()
                    raise AssertionError(f"stream ended without {kind}: {self.events[-3:]}")
                await self._changed.wait()
