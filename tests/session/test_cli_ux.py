"""The session commands as a new user meets them (issue 23): a pipes session's output, a
gloved started before setup, and no noise (escape toggles, a stop shown as a failure, long
or repeated lines)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Unpriv

from ._gloved import HARNESSES, Gloved, plan_text
from ._terminals import pty_plan, terminal_home

UX_HARNESSES = (
    HARNESSES
    + """
[harnesses.osc]
argv = ["/bin/sh", "-c",
        "printf 'A\\\\033]52;c;aGVsbG8=\\\\007B\\\\n'; printf 'E\\\\033]0;t\\\\007\\\\n' >&2"]

[harnesses.later]
argv = ["/bin/sh", "-c", "echo first; /bin/sleep 1; echo second"]
"""
)


@pytest.fixture
def gloved(tmp_path: Path) -> Iterator[Gloved]:
    """A set-up home (the test harnesses and two of this file's) with a running gloved."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    home.setup(UX_HARNESSES)
    home.start()
    try:
        yield home
    finally:
        home.stop()


def _create(home: Gloved, plan: str) -> str:
    done = home.glove("session", "create", "-", "--json", stdin=plan)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session_id"])


def test_a_pipes_sessions_output_has_its_command(gloved: Gloved) -> None:
    """`glove session output ID` prints stdout, `--stderr` stderr, both through the escape
    filter; `session log` of a pipes session names the command; `--follow` prints output
    as it comes and ends with the session."""
    session_id = _create(gloved, plan_text("osc"))
    gloved.wait_terminal(session_id)
    out = gloved.glove("session", "output", session_id)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "A^[]52;c;aGVsbG8=^GB\n"  # the clipboard write is inert
    err = gloved.glove("session", "output", session_id, "--stderr")
    assert err.returncode == 0, err.stderr
    assert err.stdout == "E^[]0;t^G\n"
    raw = gloved.glove("session", "output", session_id, "--raw")
    assert raw.stdout == "A\x1b]52;c;aGVsbG8=\x07B\n"

    log = gloved.glove("session", "log", session_id)
    assert log.returncode == 1
    assert f"glove session output {session_id}" in log.stderr, log.stderr

    later = _create(gloved, plan_text("later"))
    follow = gloved.glove("session", "output", later, "--follow")
    assert follow.returncode == 0, follow.stderr
    assert follow.stdout == "first\nsecond\n"


def test_session_output_of_a_pty_session_names_session_log(tmp_path: Path) -> None:
    """A PTY session's output is its transcript: `session output` says `session log`."""
    home = terminal_home(Path(os.path.realpath(tmp_path)))
    home.start()
    try:
        session_id = _create(home, pty_plan("hostile"))
        home.wait_terminal(session_id)
        done = home.glove("session", "output", session_id)
        assert done.returncode == 1
        assert f"`glove session log {session_id}`" in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1
    finally:
        home.stop()


def test_session_log_shows_no_bracketed_paste_toggles(tmp_path: Path) -> None:
    """An interactive bash wraps every prompt in bracketed-paste toggles; `glove session
    log` shows the prompt and the command's output without `^[[?2004h`/`l`."""
    home = terminal_home(Path(os.path.realpath(tmp_path)))
    home.start()
    try:
        session_id = _create(home, pty_plan("shell"))
        done = home.glove("session", "input", session_id, "--data", "echo $((6*7))", "--enter")
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 60
        while True:
            raw = home.glove("session", "log", session_id, "--raw").stdout
            if raw.count("agent$") >= 2:
                break
            assert time.monotonic() < deadline, raw
            time.sleep(0.1)
        assert "\x1b[?2004h" in raw  # bash did emit them
        log = home.glove("session", "log", session_id)
        assert log.returncode == 0, log.stderr
        assert "42" in log.stdout
        assert "agent$" in log.stdout
        assert "2004" not in log.stdout, log.stdout
        home.glove("session", "stop", session_id)
        home.wait_terminal(session_id)
    finally:
        home.stop()


def test_a_normal_end_is_not_shown_as_a_failure_in_diag_tree(gloved: Gloved) -> None:
    """After a session ends normally, `glove diag tree` shows no CancelledError and no `!`."""
    session_id = _create(gloved, plan_text("ok"))
    gloved.wait_terminal(session_id)
    tree = gloved.glove("diag", "tree", "--runtime-dir", str(gloved.runtime))
    assert tree.returncode == 0, tree.stderr
    assert f"session-{session_id}: exited normally" in tree.stdout, tree.stdout
    assert "CancelledError" not in tree.stdout
    assert " ! " not in tree.stdout


def test_gloved_start_lines_are_short(gloved: Gloved) -> None:
    """gloved's start-up log has no paragraph lines (the cgroup line names what is missing,
    `glove doctor` says why)."""
    lines = gloved.stderr().splitlines()
    assert any("listening on" in line for line in lines)
    assert all(len(line) <= 200 for line in lines), max(lines, key=len)


def test_a_plan_error_is_printed_once(gloved: Gloved) -> None:
    """`glove session create` of an invalid plan prints each problem once."""
    bad = json.loads(plan_text("ok"))
    bad["limits"]["wall_time_s"] = "x"
    done = gloved.glove("session", "create", "-", stdin=json.dumps(bad))
    assert done.returncode == 1
    assert done.stderr.count("$.limits.wall_time_s") == 1, done.stderr


def test_gloved_started_before_setup_says_run_setup(tmp_path: Path) -> None:
    """A gloved started without `glove setup`: each command says to run setup and restart
    gloved, never "unknown method"; gloved's own log says the same."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    (home.base / "run").mkdir(mode=0o700)
    home.start()
    try:
        for argv in (("init", "wrk", str(tmp_path)), ("session", "list"),
                     ("receipts", "page"), ("attach", "x")):  # fmt: skip
            done = home.glove(*argv)
            assert done.returncode in (1, 11), (argv, done.stderr)
            assert "unknown method" not in done.stderr, done.stderr
            assert "run `glove setup`, then restart gloved" in done.stderr, done.stderr
            assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "run `glove setup`, then restart gloved" in home.stderr()
    finally:
        home.stop()


def test_hints_are_said_once_and_name_the_path(tmp_path: Path) -> None:
    """Without a gloved each client command says "start it with" once; `glove init ALIAS`
    without a path shows the command with this directory's path."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    (home.base / "run").mkdir(mode=0o700)
    for argv in (("session", "list"), ("attach", "x"), ("receipts", "page"),
                 ("capabilities",), ("diag", "tree"), ("session", "log", "x")):  # fmt: skip
        done = home.glove(*argv)
        assert done.returncode in (1, 69), (argv, done.stderr)
        assert done.stderr.count("start it with") == 1, done.stderr
    done = subprocess_in(home, tmp_path, "init", "wrk")
    assert done.returncode == 64
    assert f"glove init wrk {tmp_path}" in done.stderr, done.stderr


def subprocess_in(home: Gloved, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the glove CLI as the home's owner in ``cwd``."""
    return subprocess.run([home.python, "-m", "glove", *args], env=home.env, cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_keys_default_to_what_setup_made(gloved: Gloved, tmp_path: Path) -> None:
    """After `glove setup`: `journal verify` needs no --key-file, `receipts export` no --key,
    `receipts verify` takes the key text `receipts public-key` printed, a file, or nothing."""
    session_id = _create(gloved, plan_text("ok"))
    gloved.wait_terminal(session_id)
    done = gloved.glove("journal", "verify", str(gloved.state / "receipts"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK ")
    done = gloved.glove("journal", "verify", str(gloved.state / "receipts"), "--key",
                        str(gloved.config / "journal.key"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    bundle = tmp_path / "bundle.json"
    done = gloved.glove("receipts", "export", session_id, "-o", str(bundle))
    assert done.returncode == 0, done.stderr
    text = gloved.glove("receipts", "public-key").stdout.strip()
    key_file = tmp_path / "receipts.pub"
    key_file.write_text(text + "\n")
    for extra in (["--public-key", text], ["--public-key", str(key_file)], []):
        done = gloved.glove("receipts", "verify", str(bundle), *extra)
        assert done.returncode == 0, (extra, done.stderr)
        assert done.stdout.startswith(f"OK: the receipt of session {session_id}")
    done = gloved.glove("receipts", "verify", str(bundle), "--public-key", "not-a-key")
    assert done.returncode == 6, done.stderr  # neither a file nor a key: cannot read
    assert "not-a-key" in done.stderr


def test_output_and_key_defaults_as_an_unprivileged_owner(
    request: pytest.FixtureRequest, unpriv: Unpriv
) -> None:
    """As the unprivileged test user: `session output` reads the owner's session files,
    `journal verify` takes setup's key, `receipts verify` the key text."""
    base = Path(tempfile.mkdtemp(prefix="glove-ux-", dir="/var/tmp"))
    os.chown(base, unpriv.uid, unpriv.gid)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    home = Gloved(base, python=unpriv.python, creds=unpriv.credentials())
    home.setup(UX_HARNESSES)
    home.start()
    try:
        session_id = _create(home, plan_text("hello"))
        assert home.glove("session", "wait", session_id).returncode == 3
        assert home.glove("session", "output", session_id).stdout == "hello\n"
        assert home.glove("session", "output", session_id, "--stderr").stdout == "oops\n"
        done = home.glove("journal", "verify", str(home.state / "receipts"))
        assert done.returncode == 0, done.stderr
        bundle = str(base / "bundle.json")
        assert home.glove("receipts", "export", session_id, "-o", bundle).returncode == 0
        text = home.glove("receipts", "public-key").stdout.strip()
        done = home.glove("receipts", "verify", bundle, "--public-key", text)
        assert done.returncode == 0, done.stderr
    finally:
        assert home.stop() == 0
