"""``glove exec`` and ``glove run`` at a terminal, as a person uses them: in a tmux pane.

What the command prints never drives the operator's terminal (no clipboard write, no
query answered into the input; ``--pty`` keeps the TUI's own sequences), and the keys a
person presses to interrupt, quit or suspend reach the whole contained job, with the exit
code a shell expects. As root and as the unprivileged user, in pipes and PTY mode.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Unpriv

from ._tmux import Person, Tmux, person, processes_with, tmux_server, until_processes

WHO = ["root", "unpriv"] if os.getuid() == 0 else ["self"]
#: What the command tries to put in the operator's clipboard.
CLIPBOARD = "PWNED-CLIPBOARD"
#: A command that writes the clipboard and asks the terminal five questions (DA1, DA2,
#: CPR, XTVERSION, the background colour), then reads a line and shows it in cat -v
#: notation: the answers, had the terminal given them, come before what the person typed.
_OSC52 = base64.b64encode(CLIPBOARD.encode()).decode()
QUERIES = (
    rf'printf "\033]52;c;{_OSC52}\007\033[c\033[>c\033[6n\033[>q\033]11;?\007"; '
    r'echo RE""ADY; read line; printf "GOT<%s>\n" "$line" | cat -v'
)
#: What the pane's shell prints after glove (quoted apart so the typed line never matches).
RC = '; echo R""C=$?'
_markers = itertools.count(1)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    """A tmux server of our own."""
    yield from tmux_server()


@pytest.fixture(params=WHO)
def at_terminal(request: pytest.FixtureRequest, unpriv: Unpriv, tmux: Tmux) -> Iterator[Person]:
    """The person at the pane: root, or the unprivileged user; the pane is started in
    their workspace."""
    for someone in person(request.param, unpriv):
        tmux.start(someone.workspace)
        yield someone


def _command(someone: Person, verb: str, flags: list[str], *argv: str) -> str:
    """``glove VERB FLAGS -- ARGV``: ``run`` with its small mediator configuration,
    ``proxy`` is ``glove exec --network proxy`` (the egress helper is the sandbox's command,
    the session tree its launcher)."""
    extra: list[str] = []
    if verb == "run":
        extra = ["--config", str(someone.run_config())]
    elif verb == "proxy":
        verb = "exec"
        audit = str(someone.base / "egress-audit.log")
        extra = ["--network", "proxy", "--allow", "127.0.0.1:9", "--audit", audit]
    return someone.glove(verb, *extra, *flags, "--", *argv)


def _status(someone: Person) -> str:
    return str(someone.base / "status.json")


def _read_status(someone: Person) -> dict[str, object]:
    return json.loads(Path(_status(someone)).read_text())  # type: ignore[no-any-return]


def _marker() -> str:
    """A sleep length no other process has (it marks the sandbox's processes)."""
    return f"3600.{os.getpid()}{next(_markers):04d}"


# -- what the command prints ---------------------------------------------------------------


@pytest.mark.parametrize("verb", ["exec", "run", "proxy"])
@pytest.mark.parametrize("mode", ["pipes", "pty"])
def test_output_neither_writes_the_clipboard_nor_types_answers_into_the_input(
    at_terminal: Person, tmux: Tmux, verb: str, mode: str
) -> None:
    """A command that writes OSC 52 and sends DA, CPR, XTVERSION and a colour query: the
    pane's clipboard stays empty, the line the command reads is exactly what the person
    typed, and the exit summary and --json-status count what the filter withheld."""
    flags = ["--json-status", _status(at_terminal), *(["--pty"] if mode == "pty" else [])]
    tmux.type(_command(at_terminal, verb, flags, "/bin/sh", "-c", QUERIES) + RC)
    tmux.until(lambda s: "READY" in s)
    tmux.type("typed-by-me")
    screen = tmux.until(lambda s: "RC=" in s)
    assert "GOT<typed-by-me>" in screen, screen
    assert "RC=0" in screen, screen
    assert "terminal sequence(s) withheld from your terminal" in screen, screen
    assert not any(CLIPBOARD in buffer for buffer in tmux.buffers())
    assert int(_read_status(at_terminal)["terminal_sequences_dropped"]) >= 6  # type: ignore[call-overload]


def test_raw_output_drives_the_terminal_as_before(at_terminal: Person, tmux: Tmux) -> None:
    """With --raw the same command does write the clipboard and gets the answers typed
    into its input (so the test above would see the attack if the filter were gone)."""
    tmux.type(_command(at_terminal, "exec", ["--raw"], "/bin/sh", "-c", QUERIES))
    tmux.until(lambda s: "READY" in s)
    tmux.type("typed-by-me")
    screen = tmux.until(lambda s: "typed-by-me>" in s)
    assert "GOT<^[[?1;2c" in screen, screen  # tmux's DA1 answer, read as the person's input
    assert any(CLIPBOARD in buffer for buffer in tmux.buffers())


def test_pty_output_keeps_the_tuis_own_sequences(at_terminal: Person, tmux: Tmux) -> None:
    """Under --pty the alternate screen and a window title reach the terminal (the TUI
    needs them); without --pty they are shown inert and the pane stays on its screen."""
    tui = (
        r'printf "\033]2;agent-title\007\033[?1049h\033[1;32mIN-%s\033[0m\n" ALT; read x; '
        r'printf "\033[?1049l"'
    )
    tmux.type(_command(at_terminal, "exec", ["--pty"], "/bin/sh", "-c", tui) + RC)
    tmux.until(lambda s: "IN-ALT" in s)
    assert tmux.show("#{alternate_on}") == "1"
    assert tmux.show("#{pane_title}") == "agent-title"
    tmux.type("")
    tmux.until(lambda s: "RC=0" in s)  # it left its alternate screen and glove is done
    tmux("select-pane", "-t", tmux.target, "-T", "person")
    tmux.type(_command(at_terminal, "exec", [], "/bin/sh", "-c", tui))
    screen = tmux.until(lambda s: "IN-ALT" in s)
    assert "^[[?1049h" in screen, screen
    assert tmux.show("#{alternate_on}") == "0"
    assert tmux.show("#{pane_title}") != "agent-title"
    tmux.type("")


# -- the keys a person presses -------------------------------------------------------------


def _job(marker: str) -> tuple[str, ...]:
    """A shell with a child and a grandchild, which must not outlive an interrupt."""
    script = 'echo sta""rted; sh -c "sleep $1" inner "$1"; echo not-inter""rupted'
    return ("/bin/sh", "-c", script, "sh", marker)


@pytest.mark.parametrize("verb", ["exec", "run", "proxy"])
@pytest.mark.parametrize("mode", ["pipes", "pty"])
def test_ctrl_c_stops_a_shell_and_its_children_with_130(
    at_terminal: Person, tmux: Tmux, verb: str, mode: str
) -> None:
    """Ctrl-C at the pane ends the shell, its child shell and the sleep under it, once,
    and glove exits 130 (in pipes mode glove passes the SIGINT to the command's process
    group; under --pty the sandbox's own terminal raises it in its foreground job)."""
    marker = _marker()
    flags = ["--pty"] if mode == "pty" else []
    tmux.type(_command(at_terminal, verb, flags, *_job(marker)) + RC)
    tmux.until(lambda s: "started" in s)
    until_processes(marker, lambda seen: len(seen) >= 3, "running")  # sh, sh, sleep
    tmux.keys("C-c")
    screen = tmux.until(lambda s: "RC=" in s)
    assert "RC=130" in screen, screen
    assert "not-interrupted" not in screen, screen
    assert processes_with(marker) == {}


def test_ctrl_backslash_quits_the_job_with_131(at_terminal: Person, tmux: Tmux) -> None:
    """Ctrl-\\ ends the whole job by SIGQUIT, and glove exits 131 having reported it
    (it passed the signal on instead of dying of it: --json-status says signal 3)."""
    marker = _marker()
    flags = ["--json-status", _status(at_terminal)]
    tmux.type(_command(at_terminal, "exec", flags, *_job(marker)) + RC)
    tmux.until(lambda s: "started" in s)
    until_processes(marker, lambda seen: len(seen) >= 3, "running")
    tmux.keys("C-\\")
    screen = tmux.until(lambda s: "RC=" in s)
    assert "RC=131" in screen, screen
    assert processes_with(marker) == {}
    result = _read_status(at_terminal)
    assert (result["outcome"], result["signal"]) == ("signaled", 3), result


@pytest.mark.parametrize("verb", ["exec", "run", "proxy"])
def test_ctrl_z_stops_the_whole_tree_and_fg_resumes_it(
    at_terminal: Person, tmux: Tmux, verb: str
) -> None:
    """Ctrl-Z stops glove (the shell says Stopped) and every process of the sandbox; fg
    resumes them all; Ctrl-C then ends the job with 130."""
    marker = _marker()
    tmux.type(_command(at_terminal, verb, [], *_job(marker)))
    tmux.until(lambda s: "started" in s)
    until_processes(marker, lambda seen: len(seen) >= 3, "running")
    tmux.keys("C-z")
    tmux.until(lambda s: "Stopped" in s)
    until_processes(marker, lambda seen: set(seen.values()) == {"T"}, "all stopped")
    tmux.type("fg")
    until_processes(marker, lambda seen: "T" not in seen.values(), "all running again")
    tmux.keys("C-c")
    tmux.until(lambda s: "person$" in s.rpartition("^C")[2])  # the job is over
    tmux.type(RC.removeprefix("; "))  # $? after fg: the job's status
    screen = tmux.until(lambda s: "RC=" in s)
    assert "RC=130" in screen, screen
    assert processes_with(marker) == {}


def test_closing_the_terminal_hangs_up_the_job(at_terminal: Person, tmux: Tmux) -> None:
    """Closing the pane (a hangup) ends the whole job by SIGHUP: --json-status says
    signal 1, exit 129, and nothing of the sandbox is left."""
    marker = _marker()
    flags = ["--json-status", _status(at_terminal)]
    tmux.type(_command(at_terminal, "exec", flags, *_job(marker)))
    tmux.until(lambda s: "started" in s)
    until_processes(marker, lambda seen: len(seen) >= 3, "running")
    tmux("kill-pane", "-t", tmux.target)
    until_processes(marker, lambda seen: not seen, "gone")
    status = Path(_status(at_terminal))
    until_processes(marker, lambda _seen: status.exists() and status.stat().st_size > 0, "done")
    result = _read_status(at_terminal)
    assert (result["signal"], result["exit_code"]) == (1, 129), result


def test_ctrl_c_while_run_waits_for_an_upstream_leaves_at_once(
    at_terminal: Person, tmux: Tmux
) -> None:
    """An upstream that never answers keeps glove run starting; Ctrl-C then ends it at
    once with 130, stops the upstream, and runs nothing (no traceback either)."""
    marker = _marker()
    config = at_terminal.run_config(["/bin/sleep", marker])
    line = at_terminal.glove("run", "--config", str(config), "--", "/bin/echo", "RAN")
    tmux.type(line + RC)
    until_processes(marker, lambda seen: len(seen) == 1, "the upstream started")
    tmux.keys("C-c")
    screen = tmux.until(lambda s: "RC=" in s)
    assert "RC=130" in screen, screen
    assert "RAN\n" not in screen
    assert "Traceback" not in screen
    assert "internal error" not in screen
    until_processes(marker, lambda seen: not seen, "the upstream gone")
