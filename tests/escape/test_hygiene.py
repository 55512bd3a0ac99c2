"""Escape attempts through what the launcher hands down: fds, environment, the terminal."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import termios
import time
import tty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.escape._harness import (
    INSIDE_PYTHON,
    PROBE_MARK,
    ExecResult,
    Sandbox,
    glove_pid,
    kill_tree,
)

SECRET = "glove-inherited-secret"
FILE_FD = 40
DIR_FD = 41
HOST_SECRETS = {
    "GLOVE_ESCAPE_SECRET": "s3cr3t-value",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "GITHUB_TOKEN": "ghp_secret",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
}


@pytest.fixture
def inherited_fds() -> Iterator[tuple[int, int]]:
    """A file fd and a directory fd on a host secret, inheritable, at fixed numbers."""
    d = Path(tempfile.mkdtemp(prefix="glove-escape-fd-"))
    d.chmod(0o755)
    (d / "secret.txt").write_text(SECRET)
    (d / "secret.txt").chmod(0o644)
    f = os.open(d / "secret.txt", os.O_RDONLY)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.dup2(f, FILE_FD)
    os.dup2(dfd, DIR_FD)
    os.close(f)
    os.close(dfd)
    yield FILE_FD, DIR_FD
    os.close(FILE_FD)
    os.close(DIR_FD)
    shutil.rmtree(d, ignore_errors=True)


def test_inherited_fds_do_not_reach_the_sandbox(
    sb: Sandbox, inherited_fds: tuple[int, int]
) -> None:
    """Only 0/1/2 cross into the sandbox; an inherited directory fd cannot open host files."""
    arg = {"numbers": list(inherited_fds), "relative": "secret.txt"}
    control = sb.host_probe("fds", arg, pass_fds=inherited_fds)
    assert control["probes"][f"{DIR_FD}/secret.txt"] == {"ok": SECRET}, f"control: {control}"
    res = sb.run(sb.probe_cmd("fds", arg), pass_fds=inherited_fds)
    assert res.returncode == 0, res.describe()
    report = res.probe()
    # Besides 0/1/2, only the probe's own scan of /proc/self/fd may be open.
    extra = {
        n: t
        for n, t in report["fds"].items()
        if n not in {"0", "1", "2"} and "ok" in t and not t["ok"].endswith("/fd")
    }
    assert extra == {}, f"unexpected fds inside: {extra}"
    leaked = {k: v for k, v in report["probes"].items() if "ok" in v}
    assert leaked == {}, f"inherited fds usable inside: {leaked}"
    targets = [v.get("ok", "") for v in report["fds"].values()]
    assert not any("glove-escape-fd-" in t for t in targets), targets


def test_environment_is_scrubbed(sb: Sandbox) -> None:
    """Host secrets in the environment are absent inside; --env passes what is asked."""
    control = sb.host_probe("env", env=HOST_SECRETS)
    assert control["env"].get("GLOVE_ESCAPE_SECRET") == "s3cr3t-value", "control: env passes"
    report = sb.probe(
        "env",
        flags=["--env", "GLOVE_PASSED=yes", "--env", "SECOND=a=b"],
        env=HOST_SECRETS,
    )
    env = report["env"]
    leaked = {k for k in HOST_SECRETS if k in env}
    assert leaked == set(), f"host secrets leaked: {leaked}"
    assert not any(v in env.values() for v in HOST_SECRETS.values())
    assert env.get("GLOVE_PASSED") == "yes"
    assert env.get("SECOND") == "a=b"


def _drain(fd: int, wait_s: float = 0.3) -> bytes:
    """Read whatever is pending on a non-blocking fd within ``wait_s``."""
    data = b""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            time.sleep(0.02)
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _run_on_tty(sb: Sandbox, argv: list[str], slave: int, timeout: float = 60) -> ExecResult:
    """Run ``argv`` with the pty ``slave`` as stdin and controlling terminal (setsid -c)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        ["setsid", "--ctty", *argv],
        cwd=sb.ws,
        env=sb.host_env({"TERM": "xterm"}),
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        return sb.finish(proc, started, timeout)
    finally:
        kill_tree(proc.pid)


def _legacy_tiocsti() -> bool:
    """Whether this kernel still lets an unprivileged process use TIOCSTI on its own tty."""
    try:
        return Path("/proc/sys/dev/tty/legacy_tiocsti").read_text().strip() == "1"
    except OSError:
        return True


def test_tiocsti_cannot_inject_into_the_host_terminal(sb: Sandbox) -> None:
    """Run from a terminal, the sandbox cannot push input into it (setsid + seccomp)."""
    master, slave = os.openpty()
    try:
        tty.setraw(slave)
        os.set_blocking(slave, False)
        arg = {"payload": f"#{sb.tag}\n"}
        probe = [INSIDE_PYTHON, "-I", "-S", str(sb.ws / "probe.py"), "tty", json.dumps(arg)]
        control = _run_on_tty(sb, sb.user.argv(probe), slave).probe()
        if _legacy_tiocsti():
            assert control["TIOCSTI:0"] == {"ok": "injected"}, f"control: {control}"
            assert sb.tag.encode() in _drain(slave), "control: injected bytes reach the tty"
        res = _run_on_tty(sb, sb.glove_argv([], sb.probe_cmd("tty", arg), True), slave)
        assert res.returncode == 0, res.describe()
        report = res.probe()
        assert "open_dev_tty" in report, "/dev/tty opened: the host terminal still controls"
        injected = {k: v for k, v in report.items() if k.startswith("TIOCSTI") and "ok" in v}
        assert injected == {}, injected
        assert "ok" not in report["TIOCSCTTY:0"], "the sandbox stole the host terminal"
        assert sb.tag.encode() not in _drain(slave), "sandbox injected into the host terminal"
    finally:
        os.close(master)
        os.close(slave)


def _on_host_terminal(sb: Sandbox, argv: list[str], slave: int) -> subprocess.Popen[bytes]:
    """Start ``argv`` with the host pty ``slave`` as its controlling terminal and stdio."""
    return subprocess.Popen(
        ["setsid", "--ctty", *argv],
        cwd=sb.ws,
        env=sb.host_env({"TERM": "xterm"}),
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE,
    )


def _pty_probe(sb: Sandbox, master: int, slave: int, arg: dict[str, str]) -> dict[str, Any]:
    """Run the tty probe under ``glove exec --pty`` from the host pty; return its report."""
    os.set_blocking(master, False)
    argv = sb.glove_argv(["--pty"], sb.probe_cmd("tty", arg), True)
    proc = _on_host_terminal(sb, argv, slave)
    output = b""
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            output += _drain(master, 0.1)
    finally:
        kill_tree(proc.pid)
        _, err = proc.communicate(timeout=10)
    output += _drain(master, 0.3)
    assert proc.returncode == 0, (proc.returncode, output[-2000:], err[-2000:])
    line = next((ln for ln in output.splitlines() if PROBE_MARK in ln), None)
    assert line is not None, (output[-2000:], err[-2000:])
    report: dict[str, Any] = json.loads(line.split(PROBE_MARK, 1)[1])
    return report


def test_tiocsti_denied_under_pty(sb: Sandbox) -> None:
    """With --pty the command gets a fresh controlling pty, and TIOCSTI on it is denied."""
    master, slave = os.openpty()
    try:
        before = termios.tcgetattr(slave)
        report = _pty_probe(sb, master, slave, {"payload": f"#{sb.tag}"})
        assert report["isatty"] == [True, True, True], "control: the command runs on a pty"
        extra = {
            n: t
            for n, t in report["fds"].items()
            if n not in {"0", "1", "2"} and "ok" in t and not t["ok"].endswith("/fd")
        }
        assert extra == {}, f"fds inside under --pty (the pty master?): {extra}"
        assert "open_dev_tty" not in report, "control: the fresh pty is the controlling tty"
        injected = {k: v for k, v in report.items() if k.startswith("TIOCSTI") and "ok" in v}
        assert injected == {}, f"TIOCSTI worked under --pty: {injected}"
        assert termios.tcgetattr(slave) == before, "the host terminal mode was not restored"
        os.set_blocking(slave, False)
        assert sb.tag.encode() not in _drain(slave), "sandbox injected into the host terminal"
    finally:
        os.close(master)
        os.close(slave)


def test_output_cap_holds_when_stdin_is_a_terminal(sb: Sandbox) -> None:
    """A terminal on stdin is no side channel around --output: writes to fd 0 stay capped."""
    master, slave = os.openpty()
    try:
        os.set_blocking(master, False)
        arg = {"bytes": 256 * 1024, "stream": "fd0"}
        started = time.monotonic()
        proc = subprocess.Popen(
            [
                "setsid",
                "--ctty",
                *sb.glove_argv(["--output", "4K"], sb.probe_cmd("output", arg), True),
            ],
            cwd=sb.ws,
            env=sb.host_env(),
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        seen = b""
        while proc.poll() is None and time.monotonic() < started + 60:
            seen += _drain(master, 0.1)
        kill_tree(proc.pid)
        proc.communicate(timeout=10)
        seen += _drain(master, 0.3)
        assert len(seen) <= 64 * 1024, f"{len(seen)} bytes reached the terminal past --output 4K"
    finally:
        os.close(master)
        os.close(slave)


def test_pty_mode_restores_the_terminal_after_a_limit_kill(sb: Sandbox) -> None:
    """When the wall limit kills a --pty command, the host terminal mode is restored."""
    master, slave = os.openpty()
    try:
        before = termios.tcgetattr(slave)
        os.set_blocking(master, False)
        argv = sb.glove_argv(["--pty", "--wall-time", "1"], ["/bin/sleep", "30"], True)
        proc = _on_host_terminal(sb, argv, slave)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            _drain(master, 0.1)
        kill_tree(proc.pid)
        proc.communicate(timeout=10)
        assert proc.returncode != 0, "control: the wall limit ended the command"
        assert termios.tcgetattr(slave) == before, "the host terminal was left in raw mode"
    finally:
        os.close(master)
        os.close(slave)


def test_stdin_opened_read_write_is_no_way_out(sb: Sandbox) -> None:
    """A host file given as read-write stdin cannot be written or reopened from inside."""
    victim = sb.base / "stdin.txt"
    victim.write_text("original")
    sb.give(victim)
    fd = os.open(victim, os.O_RDWR)
    try:
        res = sb.run(sb.probe_cmd("stdin", {"payload": "PWNED"}), stdin=fd)
    finally:
        os.close(fd)
    assert res.returncode == 0, res.describe()
    report = res.probe()
    assert "ok" not in report["write"], report
    assert victim.read_text() == "original", f"host file written through stdin: {report}"


def test_output_cap_holds_under_pty(sb: Sandbox) -> None:
    """Under --pty, what reaches the host terminal is still bounded by --output."""
    master, slave = os.openpty()
    try:
        os.set_blocking(master, False)
        arg = {"bytes": 256 * 1024}
        argv = sb.glove_argv(["--pty", "--output", "4K"], sb.probe_cmd("output", arg), True)
        proc = _on_host_terminal(sb, argv, slave)
        seen = b""
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            seen += _drain(master, 0.1)
        kill_tree(proc.pid)
        _, err = proc.communicate(timeout=10)
        seen += _drain(master, 0.3)
        context = f"rc={proc.returncode} seen={len(seen)} tail={seen[-80:]!r} err={err[-300:]!r}"
        assert seen.count(b"o") > 0, f"control: output reached the terminal; {context}"
        assert seen.count(b"o") <= 4096, f"{seen.count(b'o')} bytes past --output 4K; {context}"
    finally:
        os.close(master)
        os.close(slave)


def test_python_m_glove_ignores_planted_modules(sb: Sandbox) -> None:
    """A module the sandbox plants in the workspace is not imported by ``python -m glove`` there."""
    marker = sb.base / "hijacked"
    plant = f"open({str(marker)!r}, 'w').write('ran on the host')\n"
    res = sb.run(["/bin/sh", "-c", f'printf %s "{plant}" > /workspace/typer.py'])
    assert res.returncode == 0, res.describe()
    assert (sb.ws / "typer.py").exists(), "control: the plant is on the host"
    argv = sb.user.argv([sb.user.python, "-m", "glove", "exec", "--", "/bin/true"])
    p = subprocess.run(
        argv, cwd=sb.ws, env=sb.host_env(), capture_output=True, timeout=60, check=False
    )
    assert not marker.exists(), f"planted typer.py ran on the host (rc {p.returncode})"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_pty_mode_restores_the_terminal_when_glove_is_signalled(sb: Sandbox, signum: int) -> None:
    """TERM or HUP to glove during --pty leaves the host terminal as it found it."""
    master, slave = os.openpty()
    try:
        before = termios.tcgetattr(slave)
        os.set_blocking(master, False)
        ready = "/workspace/ready"
        cmd = ["/bin/sh", "-c", f"touch {ready}; exec sleep 30"]
        proc = _on_host_terminal(sb, sb.glove_argv(["--pty"], cmd, True), slave)
        try:
            deadline = time.monotonic() + 30
            while not (sb.ws / "ready").exists() and time.monotonic() < deadline:
                _drain(master, 0.05)
            assert (sb.ws / "ready").exists(), "control: the command started"
            assert termios.tcgetattr(slave) != before, "control: glove put the tty in raw mode"
            os.kill(glove_pid(sb, proc.pid), signum)  # setsid execs in place
            deadline = time.monotonic() + 15
            while proc.poll() is None and time.monotonic() < deadline:
                _drain(master, 0.1)
            assert proc.poll() is not None, f"glove ignored signal {signum}"
        finally:
            kill_tree(proc.pid)
            proc.communicate(timeout=10)
        assert termios.tcgetattr(slave) == before, f"terminal left raw after signal {signum}"
    finally:
        os.close(master)
        os.close(slave)
