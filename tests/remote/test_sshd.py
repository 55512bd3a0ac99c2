"""The executor as the ForceCommand of a real sshd on loopback, reached with the generated config.

Each test starts its own ``/usr/sbin/sshd -D`` (Debian's openssh-server) on a free
127.0.0.1 port with a throwaway host key, a throwaway user key and its own config; the
system sshd is never used. The client is the real ``ssh`` with the config
:func:`compose_remote_runtime` wrote, so the pinned known_hosts is what lets it in.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from glove.protocol import decode_response
from glove.remote import RemoteRuntime, compose_remote_runtime
from tests.remote.conftest import (
    CONSOLE_SCRIPT,
    LAUNCHER,
    ExecutorProcess,
    IdentityFiles,
    owner_only_dir,
    request_bytes,
    section,
)

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")
SSHD_START_DEADLINE_S = 15.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _keygen(path: Path) -> str:
    """Make an ed25519 key pair at ``path``; return the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "throwaway", "-f", str(path)],
        check=True,
        timeout=30,
    )
    return path.with_suffix(".pub").read_text().strip()


@dataclass
class Sshd:
    """A test-owned sshd and the client pieces to log in to it."""

    port: int
    host_key: str
    user_key: Path
    home: Path
    log: Path
    proc: subprocess.Popen[bytes]

    def ssh(self, runtime: RemoteRuntime, *command: str) -> list[str]:
        """The client command line: the generated config, our user key, the alias."""
        return [
            "ssh", "-F", str(runtime.ssh_config_path), "-i", str(self.user_key),
            runtime.ssh_destination, *command,
        ]  # fmt: skip


def _start_sshd(directory: Path, force_command: str) -> Sshd:
    if not Path(SSHD).exists():
        pytest.fail("openssh-server is not installed: run scripts/setup")
    if Path("/etc/shadow").read_text().startswith("root:!"):
        pytest.fail("root's account is locked; the test sshd logs in as root with UsePAM no")
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)  # sshd's compiled-in privilege separation dir
    host_key = _keygen(directory / "host_ed25519")
    user_key = directory / "user_ed25519"
    (directory / "authorized_keys").write_text(_keygen(user_key) + "\n")
    port = _free_port()
    config = directory / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {directory / 'host_ed25519'}",
                f"PidFile {directory / 'sshd.pid'}",
                f"AuthorizedKeysFile {directory / 'authorized_keys'}",
                "AuthenticationMethods publickey",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",  # the key files live under /tmp (sticky, world-writable)
                "PermitTTY no",
                "X11Forwarding no",
                "AllowTcpForwarding no",
                "AllowAgentForwarding no",
                "PermitUserEnvironment no",
                "PermitUserRC no",
                "LogLevel VERBOSE",
                f"ForceCommand {force_command}",
                "",
            ]
        )
    )
    subprocess.run([SSHD, "-t", "-f", str(config)], check=True, timeout=30)
    log = directory / "sshd.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=log_file)
    deadline = time.monotonic() + SSHD_START_DEADLINE_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait(10)
                pytest.fail(f"sshd did not start: {log.read_text()}")
            time.sleep(0.05)
    return Sshd(port, host_key, user_key, owner_only_dir(directory / "home"), log, proc)


@pytest.fixture
def sshd_factory(tmp_path: Path) -> Iterator[list[Sshd]]:
    """Started sshds, stopped (by their own pid) after the test."""
    started: list[Sshd] = []
    yield started
    for server in started:
        server.proc.terminate()
        try:
            server.proc.wait(10)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(10)


def _client(server: Sshd, runtime: RemoteRuntime, *command: str) -> ExecutorProcess:
    env = {"HOME": str(server.home), "PATH": os.environ["PATH"]}
    return ExecutorProcess(server.ssh(runtime, *command), env=env)


def _runtime(tmp_path: Path, server: Sshd, host_key: str | None = None) -> RemoteRuntime:
    return compose_remote_runtime(
        section(
            host="127.0.0.1", port=server.port, user="root", host_key=host_key or server.host_key
        ),
        owner_only_dir(tmp_path / "run"),
        local_materialization=False,
        apple_container=False,
    )


def test_ssh_login_reaches_exactly_stdio_and_remote_health(
    tmp_path: Path, identities: IdentityFiles, sshd_factory: list[Sshd]
) -> None:
    """Whatever command the client asks for, the login runs the executor with ['--stdio']."""
    record = tmp_path / "argv.json"
    force = shlex.join(
        [sys.executable, str(LAUNCHER), str(identities.write()), "--record", str(record),
         "--", "--stdio"]
    )  # fmt: skip
    server = _start_sshd(owner_only_dir(tmp_path / "sshd"), force)
    sshd_factory.append(server)
    runtime = _runtime(tmp_path, server)
    client = _client(server, runtime, "rm", "-rf", "/", "--no-stdio")
    health = client.call("remote_health", request_id=11)
    assert health.id == 11
    assert health.result == {"status": "not_operational"}
    lifecycle = client.call("session.create", request_id=12)
    assert lifecycle.error is not None
    assert lifecycle.error.code == "method_not_found"
    code, err = client.finish()
    assert code == 0, err
    seen = json.loads(record.read_text())
    assert seen == {"argv": ["--stdio"], "original": "rm -rf / --no-stdio"}


def test_ttl_exhausted_over_ssh_closes_the_session_with_75(
    tmp_path: Path, identities: IdentityFiles, sshd_factory: list[Sshd]
) -> None:
    """A request dribbled through SSH slower than its TTL is rejected; ssh exits 75."""
    force = shlex.join([sys.executable, str(LAUNCHER), str(identities.write()), "--", "--stdio"])
    server = _start_sshd(owner_only_dir(tmp_path / "sshd"), force)
    sshd_factory.append(server)
    client = _client(server, _runtime(tmp_path, server))
    assert client.call("remote_health").error is None  # the session is up
    frame = request_bytes("remote_health", request_id=2, ttl_ms=300)
    for i in range(0, len(frame), 10):
        client.send(frame[i : i + 10])
        time.sleep(0.1)
    assert client.next_frame() is None
    code, err = client.finish()
    assert code == 75
    assert "consumed its 300 ms TTL" in err


def test_real_console_script_as_force_command_fails_closed(
    tmp_path: Path, sshd_factory: list[Sshd]
) -> None:
    """The installed glove-remote-executor, forced by sshd, refuses to serve without identity."""
    server = _start_sshd(owner_only_dir(tmp_path / "sshd"), f"{CONSOLE_SCRIPT} --stdio")
    sshd_factory.append(server)
    client = _client(server, _runtime(tmp_path, server))
    client.send(request_bytes("remote_health"))
    assert client.next_frame() is None
    code, err = client.finish()
    assert code == 78
    assert "/etc/glove" in err


def test_wrong_pinned_host_key_never_reaches_the_executor(
    tmp_path: Path, identities: IdentityFiles, sshd_factory: list[Sshd]
) -> None:
    """With another ed25519 key pinned, host key verification fails before any login."""
    record = tmp_path / "argv.json"
    force = shlex.join(
        [sys.executable, str(LAUNCHER), str(identities.write()), "--record", str(record),
         "--", "--stdio"]
    )  # fmt: skip
    server = _start_sshd(owner_only_dir(tmp_path / "sshd"), force)
    sshd_factory.append(server)
    other = _keygen(tmp_path / "other_ed25519")
    client = _client(server, _runtime(tmp_path, server, host_key=other))
    client.send(request_bytes("remote_health"))
    assert client.next_frame() is None
    code, err = client.finish()
    assert code == 255
    assert "Host key verification failed" in err
    assert not record.exists()


def test_response_frames_are_decodable_after_ssh(
    tmp_path: Path, identities: IdentityFiles, sshd_factory: list[Sshd]
) -> None:
    """Pipelined requests through SSH come back as whole frames, in order."""
    force = shlex.join([sys.executable, str(LAUNCHER), str(identities.write()), "--", "--stdio"])
    server = _start_sshd(owner_only_dir(tmp_path / "sshd"), force)
    sshd_factory.append(server)
    client = _client(server, _runtime(tmp_path, server))
    client.send(b"".join(request_bytes("remote_health", request_id=i) for i in (5, 6, 7)))
    ids = []
    for _ in range(3):
        frame = client.next_frame()
        assert frame is not None
        ids.append(decode_response(frame).id)
    assert ids == [5, 6, 7]
    assert client.finish()[0] == 0
