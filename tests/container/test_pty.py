"""PTY mode: a fresh terminal inside, host terminal raw during the run and restored after."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time

from tests.container.conftest import GloveExec

#: How long a PTY session may take in these tests.
PTY_DEADLINE_S = 30.0


def _pty_argv(glove_exec: GloveExec, *args: str) -> list[str]:
    """``glove exec --pty ARGS`` as ``glove_exec`` runs it (root, or the test user)."""
    return [*glove_exec.wrap, glove_exec.python, "-m", "glove", "exec", "--pty", *args]


def _start_on_terminal(glove_exec: GloveExec, slave: int, *args: str) -> subprocess.Popen[bytes]:
    """Start ``glove exec --pty ARGS`` with the host pty ``slave`` as its terminal."""
    return subprocess.Popen(
        _pty_argv(glove_exec, *args),
        cwd=glove_exec.workspace,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )


def _run_on_terminal(
    glove_exec: GloveExec, script: str, stdin_data: bytes = b""
) -> tuple[int, bytes, list[object], list[object], list[object]]:
    """Run ``glove exec --pty`` with a host pty as its terminal; return rc, output, modes."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    before = termios.tcgetattr(slave)
    proc = _start_on_terminal(glove_exec, slave, "--", "/bin/sh", "-c", script)
    during: list[object] = []
    seen = b""
    deadline = time.monotonic() + PTY_DEADLINE_S
    sent = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
        if b"READY" in seen and not sent:
            during = termios.tcgetattr(slave)
            os.write(master, stdin_data)
            sent = True
        if proc.poll() is not None and not ready:
            break
    rc = proc.wait(timeout=10)
    after = termios.tcgetattr(slave)
    os.close(master)
    os.close(slave)
    return rc, seen, before, during, after


def test_pty_gives_a_controlling_terminal(glove_exec: GloveExec) -> None:
    """Inside, stdin is a terminal of the host's size, and it is the controlling tty."""
    rc, seen, before, during, after = _run_on_terminal(
        glove_exec,
        "echo READY; test -t 0 && echo IS-TTY; stty size; "
        "python3 -c 'import os; print(\"CTTY\", os.tcgetpgrp(0) == os.getpgrp())'; "
        "read line; echo GOT-$line",
        b"hello\r",
    )
    text = seen.decode(errors="replace")
    assert rc == 0, text
    assert "IS-TTY" in text
    assert "33 101" in text
    assert "CTTY True" in text
    assert "GOT-hello" in text
    assert during != before  # raw mode while the sandbox ran
    assert after == before  # and restored after


def test_pty_terminal_restored_after_a_limit_kill(glove_exec: GloveExec) -> None:
    """A wall-time kill still restores the host terminal's mode."""
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    rc = subprocess.run(
        _pty_argv(glove_exec, "--wall-time", "1", "--", "sleep", "30"),
        cwd=glove_exec.workspace,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        timeout=30,
        check=False,
    ).returncode
    after = termios.tcgetattr(slave)
    os.close(master)
    os.close(slave)
    assert rc == 137
    assert after == before


def test_pty_tiocsti_is_denied() -> None:
    """TIOCSTI on the sandbox's own terminal fails (seccomp), so nothing can be injected."""
    code = (
        "import fcntl, termios\n"
        "try:\n    fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('INJECTED')\n"
        "except OSError as e:\n    print('DENIED', e.errno)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "glove", "exec", "--pty", "--", "python3", "-c", code],
        capture_output=True,
        timeout=30,
        check=False,
        cwd="/var/tmp",
    )
    assert b"DENIED 1" in done.stdout
    assert b"INJECTED" not in done.stdout


def test_window_size_follows_sigwinch(glove_exec: GloveExec) -> None:
    """A host resize plus SIGWINCH reaches the command as a new size on its terminal."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 20, 70, 0, 0))
    script = "trap 'stty size' WINCH; echo READY; for i in $(seq 1 100); do sleep 0.1; done"
    proc = _start_on_terminal(glove_exec, slave, "--", "/bin/bash", "-c", script)
    seen = b""
    deadline = time.monotonic() + PTY_DEADLINE_S
    resized = False
    try:
        while time.monotonic() < deadline and b"44 132" not in seen:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                seen += os.read(master, 65536)
            if b"READY" in seen and not resized:
                fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 44, 132, 0, 0))
                os.kill(proc.pid if not glove_exec.wrap else _child_of(proc.pid), 28)
                resized = True
    finally:
        proc.kill()
        proc.wait(timeout=10)
        os.close(master)
        os.close(slave)
    assert b"44 132" in seen, seen


def _child_of(pid: int) -> int:
    """The pid of ``pid``'s only child (runuser's child is the glove launcher)."""
    from pathlib import Path

    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0])


def test_the_terminal_is_the_sandboxs_own_and_programs_recognise_it(glove_exec: GloveExec) -> None:
    """ttyname(0), tty and /dev/tty work: the terminal is /dev/pts/0 of the sandbox's devpts."""
    rc, seen, _, _, _ = _run_on_terminal(
        glove_exec,
        "echo READY; tty; "
        "python3 -c 'import os; print(\"TTYNAME\", os.ttyname(0), os.ttyname(1))'; "
        "ls -1 /dev/pts; echo VIA-DEV-TTY > /dev/tty; read line; echo GOT-$line",
        b"x\r",
    )
    text = seen.decode(errors="replace")
    assert rc == 0, text
    lines = [line.strip() for line in text.splitlines()]
    assert "/dev/pts/0" in lines, text  # tty(1)
    assert "TTYNAME /dev/pts/0 /dev/pts/0" in lines, text
    assert "0" in lines, text
    assert "ptmx" in lines, text  # the slave lives in the sandbox's devpts
    assert "VIA-DEV-TTY" in lines, text
    assert "GOT-x" in lines, text
