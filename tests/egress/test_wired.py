"""``glove exec --network proxy`` for real: clients inside a real Glove sandbox, real origins.

Each test runs the real CLI (root and, where the sandbox allows it, the unprivileged test
user) against origins on host loopback; the sandbox reaches them only through its helper
and the proxy in the ``glove`` process. See ``_wired.py`` for the harness.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Unpriv

from ._wired import Launcher, World, launcher, web_rules, world
from .conftest import LocalCA

WHO = ["root", "unprivileged"]
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def origins(test_ca: LocalCA) -> Iterator[World]:
    """The module's origins (HTTPS, HTTP, sshd, a repository) and files."""
    with world(test_ca) as made:
        yield made


@pytest.fixture(params=WHO)
def glove(request: pytest.FixtureRequest, origins: World, unpriv: Unpriv) -> Iterator[Launcher]:
    """``glove`` as root and as the unprivileged test user."""
    with launcher(origins, request.param, unpriv) as made:
        yield made


@pytest.fixture
def as_root(origins: World, unpriv: Unpriv) -> Iterator[Launcher]:
    """``glove`` as root only (ssh keys, cgroup pids, signals to the launcher)."""
    with launcher(origins, "root", unpriv) as made:
        yield made


def test_allowed_denied_resolved_and_direct(glove: Launcher) -> None:
    """curl and urllib reach allowed origins; a denied host gets 403 and a record; DNS answers
    only allowed names (others fail at once); a direct connect() fails; a name the host
    resolves to 127.0.0.1 is refused unless its address is listed."""
    world = glove.world
    https, http = world.https.port, world.http.port
    script = f"""
curl -sS --max-time 10 https://web.test:{https}/hello
curl -sS --max-time 10 http://web.test:{http}/hello
curl -sS --max-time 10 -i http://other.test:{http}/hello | tr -d '\\r' \\
    | grep -E '^(HTTP|X-Glove|glove)'
{SYSTEM_PYTHON} -c "import urllib.request as u
print(u.urlopen('https://web.test:{https}/hello', timeout=10).read().decode().strip())"
getent hosts web.test
start=$(date +%s%N); getent hosts other.test; rc=$?; end=$(date +%s%N)
echo "lookup rc=$rc ms=$(( (end - start) / 1000000 ))"
curl -sS --max-time 10 http://rebind.test:{http}/hello
curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{http}/hello; echo "direct rc=$?"
{SYSTEM_PYTHON} -c "import socket
try:
    socket.create_connection(('127.0.0.1', {http}), timeout=3); print('connected')
except OSError as exc: print('connect', type(exc).__name__)"
"""
    done = glove.exec(script, *web_rules(world), "--allow", f"rebind.test:{http}")
    lines = done.stdout.splitlines()
    assert done.rc == 0, done
    assert lines[:2] == ["hello from the origin"] * 2
    assert lines[2:5] == [
        "HTTP/1.1 403 Forbidden",
        "X-Glove-Egress: denied",
        f"glove egress: GET other.test:{http} refused: no rule allows this host and port",
    ]
    assert lines[5] == "hello from the origin"
    assert lines[6].split() == ["127.0.0.1", "web.test"]
    rc, ms = lines[7].split()[1:]
    assert rc == "rc=2"
    assert int(ms.removeprefix("ms=")) < 1000  # NXDOMAIN at once
    assert lines[8] == (
        f"glove egress: GET rebind.test:{http} refused: "
        "the name resolves to a loopback address that no rule lists"
    )
    assert lines[9:] == ["direct rc=7", "connect ConnectionRefusedError"]
    decisions = done.decisions()
    assert ("connect", "web.test", https, "allow") in decisions
    assert ("http", "other.test", http, "deny") in decisions
    assert ("http", "rebind.test", http, "deny") in decisions
    assert ("dns", "other.test", None, "deny") in decisions
    assert len({r["session"] for r in done.audit}) == 1
    assert done.audit[0]["session"].startswith("exec-")
    egress = done.status["egress"]
    assert egress["denied"] == 2
    assert {"host": "other.test", "port": http, "rule": None, "count": 1} in egress[
        "denied_destinations"
    ]
    assert "egress: 2 connection(s)" in done.stderr


def test_git_clone_and_pip_download_over_https(as_root: Launcher) -> None:
    """git clone (smart HTTP) and pip download (a PEP 503 index) through CONNECT."""
    port = as_root.world.https.port
    script = f"""
cd /tmp && git clone -q https://git.test:{port}/git/repo.git clone && cat clone/README
{SYSTEM_PYTHON} -m pip download -q --no-deps --no-cache-dir --disable-pip-version-check \\
    --index-url https://pypi.test:{port}/simple/ --cert "$SSL_CERT_FILE" -d dl demo-pkg && ls dl
"""
    rules = ("--allow", f"git.test:{port}", "--allow", f"pypi.test:{port}",
             "--allow", f"127.0.0.1:{port}")  # fmt: skip
    done = as_root.exec(script, *rules, "--env", "PIP_CONFIG_FILE=/dev/null")
    assert done.rc == 0, done
    assert done.stdout.splitlines() == ["hello through the proxy", "demo_pkg-1.0-py3-none-any.whl"]
    tunnels = {(h, d) for proto, h, _, d in done.decisions() if proto == "connect"}
    assert tunnels == {("git.test", "allow"), ("pypi.test", "allow")}
    # The sandbox's own host name resolves (to itself), never counted as a refusal.
    assert ("dns", "glove", None, "allow") in done.decisions()
    assert done.status["egress"]["dns_refused"] == 0


def test_ssh_and_git_over_ssh_through_socks5(as_root: Launcher) -> None:
    """ssh with the documented ProxyCommand, and git with the GIT_SSH_COMMAND the helper sets."""
    world = as_root.world
    port, ssh = world.ssh.port, world.ssh
    options = (
        f"-F /dev/null -i {ssh.client_key} -o UserKnownHostsFile={ssh.known_hosts} "
        "-o StrictHostKeyChecking=yes -o BatchMode=yes"
    )
    script = f"""
ssh {options} -o ProxyCommand='/usr/bin/python3 /opt/glove/glove-egress connect %h %p' \\
    -p {port} root@ssh.test echo ssh-ok
export GIT_SSH_COMMAND="$GIT_SSH_COMMAND {options}"
cd /tmp && git clone -q ssh://root@ssh.test:{port}{world.repo} c && cat c/README
ssh {options} -p 22 -o ProxyCommand='/usr/bin/python3 /opt/glove/glove-egress connect %h %p' \\
    root@other.test true; echo "denied rc=$?"
"""
    done = as_root.exec(script, "--allow", f"ssh.test:{port}", "--allow", f"127.0.0.1:{port}")
    assert done.stdout.splitlines() == ["ssh-ok", "hello through the proxy", "denied rc=255"], done
    assert "refused by the egress rules" in done.stderr
    assert ("socks5", "other.test", 22, "deny") in done.decisions()
    assert done.decisions().count(("socks5", "ssh.test", port, "allow")) == 2


FORKS = """
import os
read_fd, write_fd = os.pipe()
children = []
os.write(1, b"0\\n")
while len(children) < 64:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(write_fd)
        os.read(read_fd, 1)
        os._exit(0)
    children.append(pid)
    # Each count is written before the next fork: the pids limit's kill, which follows the
    # refused fork at the supervisor's next poll, can never come before the last one.
    os.write(1, b"%d\\n" % len(children))
os.close(write_fd)
for pid in children:
    os.waitpid(pid, 0)
"""
PIDS_LIMIT = "12"


def counted(done: Any) -> bool:
    """The fork counter printed its count: it exited, or the pids hit ended it after."""
    return bool(done.stdout.strip()) and (
        done.rc == 0 or (done.rc == 137 and "pids limit" in done.stderr)
    )


def forks(done: Any) -> int:
    """How many children the fork counter made: the last count it wrote."""
    return int(done.stdout.split()[-1])


def test_the_helper_takes_one_pid_of_the_limit(glove: Launcher) -> None:
    """Under one --pids limit the command can fork one child fewer behind the helper."""
    (glove.workspace / "forks.py").write_text(FORKS)
    os.chmod(glove.workspace / "forks.py", 0o644)
    common = ("--pids", PIDS_LIMIT, "--accept-weaker", "all")
    offline = glove.glove(
        "exec", "--profile", str(glove.world.profile), *common,
        "--", SYSTEM_PYTHON, "/workspace/forks.py",
    )  # fmt: skip
    proxied = glove.exec(f"exec {SYSTEM_PYTHON} /workspace/forks.py", *common)
    assert counted(offline), offline
    assert counted(proxied), proxied
    assert 2 < forks(proxied) == forks(offline) - 1


def test_killing_glove_ends_the_sandbox_and_its_network(as_root: Launcher) -> None:
    """The proxy lives in the glove process: SIGKILL it and the sandbox ends with it, so
    nothing is left that could reach anything (the heartbeat inside stops at once)."""
    http = as_root.world.http.port
    beat = as_root.workspace / "beat"
    script = f"""
curl -sS --max-time 10 http://web.test:{http}/hello > /workspace/first
while true; do date +%s%N > /workspace/beat; sleep 0.05; done
"""
    argv = as_root.argv(
        "exec", "--profile", str(as_root.world.profile), "--audit", str(as_root.audit_path),
        *web_rules(as_root.world), "--", "/bin/sh", "-c", script,
    )  # fmt: skip
    process = subprocess.Popen(argv, cwd=as_root.workspace, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not beat.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (as_root.workspace / "first").read_text() == "hello from the origin\n"
        # unshare execs sh, which execs glove: the pid is glove's own.
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        time.sleep(0.5)
        last = beat.read_text()
        time.sleep(0.5)
        assert beat.read_text() == last, "the sandbox outlived the proxy"
    finally:
        process.kill()
        process.wait(10)
