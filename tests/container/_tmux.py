"""Driving ``glove exec`` and ``glove run`` as a person does: an interactive shell in a
tmux pane (its own server), keys typed, the screen and the paste buffers read back, and
the sandbox's processes seen from the host's ``/proc``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.conftest import Unpriv, at_workspace_profile

#: How long the pane may take to show what a test waits for (a loaded machine).
SCREEN_DEADLINE_S = 60.0
#: How often the pane and ``/proc`` are looked at while waiting.
POLL_S = 0.1
REPO = Path(__file__).resolve().parents[2]
SDK_SERVER = REPO / "tests" / "mcp" / "fixtures" / "sdk_server.py"


class Tmux:
    """A private tmux server (its own socket) running one interactive bash, torn down by
    :meth:`kill`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.target = "main"

    def __call__(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.name, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=check,
        )
        return done.stdout

    def start(self, cwd: Path) -> None:
        """A 120x30 pane with ``bash`` (job control on), clipboard writes accepted."""
        self("new-session", "-d", "-s", self.target, "-x", "120", "-y", "30", "-c", str(cwd),
             "env", "PS1=person$ ", "bash", "--norc", "--noprofile", "-i")  # fmt: skip
        self("set-option", "-g", "set-clipboard", "on")
        self.until(lambda screen: "person$" in screen)

    def type(self, line: str) -> None:
        """Type ``line`` and Enter."""
        self("send-keys", "-t", self.target, "-l", line)
        self("send-keys", "-t", self.target, "Enter")

    def keys(self, *keys: str) -> None:
        """Press keys (``C-c``, ``C-z``, ``C-\\``)."""
        self("send-keys", "-t", self.target, *keys)

    def screen(self) -> str:
        """The pane as shown (joined wrapped lines)."""
        return self("capture-pane", "-p", "-J", "-t", self.target)

    def show(self, fmt: str) -> str:
        """A pane format, e.g. ``#{alternate_on}``."""
        return self("display", "-p", "-t", self.target, fmt).strip()

    def buffers(self) -> list[str]:
        """The paste buffers' contents (what OSC 52 wrote into tmux's clipboard)."""
        names = self("list-buffers", "-F", "#{buffer_name}").split()
        return [self("show-buffer", "-b", name) for name in names]

    def until(self, check: Callable[[str], bool]) -> str:
        """Wait until the screen satisfies ``check``; return it."""
        deadline = time.monotonic() + SCREEN_DEADLINE_S
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if check(screen):
                return screen
            time.sleep(POLL_S)
        raise AssertionError(f"the pane never showed it:\n{screen}")

    def kill(self) -> None:
        """End the server (and whatever still runs in it)."""
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True, check=False)


def tmux_server() -> Iterator[Tmux]:
    """A tmux server of our own for one test."""
    server = Tmux(f"glove-term-{os.getpid()}-{time.monotonic_ns()}")
    try:
        yield server
    finally:
        server.kill()


@dataclass
class Person:
    """Who types the glove command: root, or the unprivileged user (through ``setpriv``,
    which execs: glove itself is the pane's foreground job, as when that user types it).

    Attributes:
        who: ``root`` or ``unpriv``.
        base: a private directory the user owns (workspace, config, status files).
        workspace: the sandbox's workspace (``base/ws``).
    """

    who: str
    unpriv: Unpriv
    base: Path
    workspace: Path

    @property
    def python(self) -> str:
        """The interpreter with this user's copy of glove."""
        return self.unpriv.python if self.who == "unpriv" else sys.executable

    def prefix(self) -> str:
        """What runs a program as this user from root's shell."""
        if self.who != "unpriv" or os.getuid() != 0:
            return ""
        return (
            f"env HOME={shlex.quote(str(self.base))} setpriv --reuid={self.unpriv.uid} "
            f"--regid={self.unpriv.gid} --clear-groups "
        )

    def glove(self, verb: str, *args: str) -> str:
        """The shell line that runs ``glove VERB ARGS`` as this user in the workspace."""
        profile = ["--profile", at_workspace_profile(self.base)] if verb == "exec" else []
        argv = [self.python, "-m", "glove", verb, *profile, *args]
        return self.prefix() + shlex.join(argv)

    def run_config(self, upstream: list[str] | None = None) -> Path:
        """A ``glove run`` configuration with one small stdio upstream (the SDK echo
        server, or ``upstream``), readable by this user."""
        cfg = self.base / "cfg"
        cfg.mkdir(exist_ok=True)
        server = cfg / "sdk_server.py"
        shutil.copy(SDK_SERVER, server)
        config = cfg / "glove.toml"
        command = upstream or [self.python, str(server), "echo"]
        config.write_text(
            'policy = "allow-all"\naudit = "audit.log"\n[upstreams.echo]\n'
            f'command = {json.dumps(command)}\ninherit_env = ["PATH", "HOME"]\n'
        )
        if self.who == "unpriv" and os.getuid() == 0:
            for path in (cfg, server, config):
                os.chown(path, self.unpriv.uid, self.unpriv.gid)
        return config


def person(who: str, unpriv: Unpriv) -> Iterator[Person]:
    """A :class:`Person` with a private base directory (removed afterwards)."""
    base = Path(tempfile.mkdtemp(prefix="glove-term-", dir="/var/tmp"))
    workspace = base / "ws"
    workspace.mkdir()
    if who == "unpriv" and os.getuid() == 0:
        for path in (base, workspace):
            os.chown(path, unpriv.uid, unpriv.gid)
    try:
        yield Person(who, unpriv, base, workspace)
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


SANDBOX_NAMES: Final = frozenset({"sh", "sleep"})


def processes_with(marker: str, names: frozenset[str] = SANDBOX_NAMES) -> dict[int, str]:
    """``{pid: state}`` of the host's processes named one of ``names`` whose command line
    holds ``marker`` (the sandbox's shell and its children, seen from outside)."""
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        if Path(argv[0].decode(errors="replace")).name in names and any(
            marker.encode() in arg for arg in argv
        ):
            found[int(entry.name)] = stat.rpartition(")")[2].split()[0]
    return found


def until_processes(
    marker: str, check: Callable[[dict[int, str]], bool], what: str
) -> dict[int, str]:
    """Wait until the marked processes satisfy ``check``; return them."""
    deadline = time.monotonic() + SCREEN_DEADLINE_S
    seen: dict[int, str] = {}
    while time.monotonic() < deadline:
        seen = processes_with(marker)
        if check(seen):
            return seen
        time.sleep(POLL_S)
    raise AssertionError(f"the sandbox's processes never were {what}: {seen}")
