"""``glove attach`` as a person uses it: in a tmux pane, on an interactive shell in gloved."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._gloved import Gloved
from ._terminals import pty_plan, terminal_home

SCREEN_DEADLINE_S = 30.0


class Tmux:
    """A private tmux server (its own socket), torn down after the test."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.name, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def screen(self, target: str) -> str:
        return self("capture-pane", "-p", "-t", target)

    def flags(self, target: str) -> tuple[str, str]:
        """``(alternate_on, cursor_flag)`` of the pane."""
        shown = self("display", "-p", "-t", target, "#{alternate_on} #{cursor_flag}")
        first, second = shown.split()
        return first, second

    def until(self, target: str, check: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + SCREEN_DEADLINE_S
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(target)
            if check(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"the pane never showed it:\n{screen}")

    def until_flags(self, target: str, want: tuple[str, str]) -> None:
        deadline = time.monotonic() + SCREEN_DEADLINE_S
        while self.flags(target) != want:
            assert time.monotonic() < deadline, (self.flags(target), self.screen(target))
            time.sleep(0.1)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    """A tmux server of our own."""
    server = Tmux(f"glove-attach-{os.getpid()}-{time.monotonic_ns()}")
    try:
        yield server
    finally:
        subprocess.run(["tmux", "-L", server.name, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def gloved(tmp_path: Path) -> Iterator[Gloved]:
    """A running gloved with an interactive shell harness."""
    home = terminal_home(Path(os.path.realpath(tmp_path)))
    home.start()
    try:
        yield home
    finally:
        home.stop()


def _attach_command(home: Gloved, session_id: str, workdir: Path, tag: str) -> str:
    """A pane command: save the terminal's settings, attach, say how it ended, save again."""
    env = " ".join(
        f"{key}={shlex.quote(value)}"
        for key, value in home.env.items()
        if key.startswith("XDG_") or key in ("HOME", "PATH")
    )
    before, after = workdir / f"{tag}.before", workdir / f"{tag}.after"
    attach = f"env {env} {shlex.quote(sys.executable)} -m glove attach {session_id}"
    return f"stty -g > {before}; {attach}; echo DETACHED-$?; stty -g > {after}; exec sleep 600"


def test_a_person_attaches_types_resizes_interrupts_detaches_and_reattaches(
    gloved: Gloved, tmux: Tmux, tmp_path: Path
) -> None:
    """In a tmux pane: ``echo $((6*7))`` shows 42; ``stty size`` shows the pane's size and
    follows a resize; Ctrl-C interrupts a sleep and the client stays; Ctrl-] detaches with
    the terminal's settings as they were; a second attach replays 42; the alternate
    screen and a hidden cursor the agent set are undone at detach and restored at attach."""
    plan = pty_plan("shell")
    session_id = json.loads(gloved.glove("session", "create", "-", "--json", stdin=plan).stdout)[
        "session_id"
    ]
    tmux("new-session", "-d", "-s", "one", "-x", "100", "-y", "30",
         _attach_command(gloved, session_id, tmp_path, "one"))  # fmt: skip
    tmux.until("one", lambda s: "agent$" in s)
    tmux("send-keys", "-t", "one", "echo $((6*7))", "Enter")
    tmux.until("one", lambda s: "\n42\n" in s)
    tmux("send-keys", "-t", "one", "stty size", "Enter")
    tmux.until("one", lambda s: "30 100" in s)
    tmux("resize-window", "-t", "one", "-x", "120", "-y", "40")
    tmux("send-keys", "-t", "one", "stty size", "Enter")
    tmux.until("one", lambda s: "40 120" in s)
    tmux("send-keys", "-t", "one", "sleep 600", "Enter")
    time.sleep(0.5)
    tmux("send-keys", "-t", "one", "C-c")
    tmux("send-keys", "-t", "one", "echo still-$((1+1))", "Enter")
    tmux.until("one", lambda s: "still-2" in s)
    tmux("send-keys", "-t", "one", "C-]")
    screen = tmux.until("one", lambda s: "DETACHED-0" in s)
    assert f"glove attach {session_id} --from" in screen.replace("\n", "")
    assert (tmp_path / "one.after").read_text() == (tmp_path / "one.before").read_text()

    tmux("new-session", "-d", "-s", "two", "-x", "100", "-y", "30",
         _attach_command(gloved, session_id, tmp_path, "two"))  # fmt: skip
    tmux.until("two", lambda s: "\n42\n" in s and "still-2" in s)  # replayed
    tmux("send-keys", "-t", "two", r"printf '\033[?1049h\033[?25lALT\n'", "Enter")
    tmux.until_flags("two", ("1", "0"))
    tmux("send-keys", "-t", "two", "C-]")
    tmux.until("two", lambda s: "DETACHED-0" in s)
    assert tmux.flags("two") == ("0", "1")  # normal screen, visible cursor: undone
    assert (tmp_path / "two.after").read_text() == (tmp_path / "two.before").read_text()

    tmux("new-session", "-d", "-s", "three", "-x", "100", "-y", "30",
         _attach_command(gloved, session_id, tmp_path, "three"))  # fmt: skip
    tmux.until_flags("three", ("1", "0"))  # the agent's modes, restored before the replay
    tmux("send-keys", "-t", "three", "C-]")
    tmux.until("three", lambda s: "DETACHED-0" in s)
    assert tmux.flags("three") == ("0", "1")
