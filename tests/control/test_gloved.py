"""gloved as a real process: socket and secret safety, hello, single instance, framing and
authentication errors, slowloris, another uid, shutdown."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from glove.control import Client, DaemonUnavailable, RemoteError, call
from glove.protocol import (
    CONTROL_MAX_REQUEST_BYTES,
    CONTROL_READ_DEADLINE_S,
    LIMIT_NAMES,
    encode_frame,
)
from tests.conftest import Unpriv

START_DEADLINE_S = 10.0
CAP = CONTROL_MAX_REQUEST_BYTES


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_DEADLINE_S
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(
                f"gloved exited early: {proc.stderr.read() if proc.stderr else ''!r}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"gloved did not create {path.name} in time")
        time.sleep(0.02)


def _start(runtime: Path, argv: list[str] | None = None) -> subprocess.Popen[bytes]:
    # A home of its own: the daemon must not read the real user's gloved.toml or keys.
    base = runtime.parent.parent
    env = {**os.environ, "XDG_CONFIG_HOME": str(base / "config")}
    env["XDG_STATE_HOME"] = str(base / "state")
    proc = subprocess.Popen(
        argv or [sys.executable, "-m", "glove.daemon", "--runtime-dir", str(runtime)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    _wait_for(runtime / "gloved.sock", proc)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_the_socket_accepts_as_soon_as_it_appears(tmp_path: Path) -> None:
    """A client that connects the moment gloved.sock exists is accepted (the socket is bound
    and listening under another name, then renamed into place), over several starts."""
    for attempt in range(5):
        runtime = tmp_path / f"r{attempt}" / "run" / "glove"
        proc = _start(runtime)
        try:
            with _raw(runtime / "gloved.sock") as s:  # no ECONNREFUSED between bind and listen
                s.sendall(_frame(_hello(runtime)))
                assert _read_reply(s)["result"]["protocol"] == 1
            assert not list(runtime.glob(".gloved.sock.*"))  # the staging name is gone
        finally:
            _stop(proc)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A running gloved in a private runtime directory."""
    runtime = tmp_path / "run" / "glove"
    proc = _start(runtime)
    try:
        yield runtime, proc
    finally:
        if proc.poll() is None:
            _stop(proc)


def _raw(sock_path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(sock_path))
    return s


def _frame(message: dict[str, Any] | bytes) -> bytes:
    payload = message if isinstance(message, bytes) else json.dumps(message).encode()
    return encode_frame(payload, max_frame_bytes=CAP)


def _read_reply(s: socket.socket) -> dict[str, Any]:
    header = b""
    while len(header) < 4:
        chunk = s.recv(4 - len(header))
        assert chunk, "connection closed before a reply"
        header += chunk
    need = int.from_bytes(header, "big")
    body = b""
    while len(body) < need:
        chunk = s.recv(need - len(body))
        assert chunk
        body += chunk
    return json.loads(body)  # type: ignore[no-any-return]


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def _hello(runtime: Path, secret: str | None = None) -> dict[str, Any]:
    return {
        "id": 1,
        "method": "hello",
        "params": {
            "secret": (runtime / "bootstrap-secret").read_text() if secret is None else secret,
            "client": "test/1",
            "protocol": 1,
        },
    }


def _authenticated(runtime: Path) -> socket.socket:
    s = _raw(runtime / "gloved.sock")
    s.sendall(_frame(_hello(runtime)))
    assert "result" in _read_reply(s)
    return s


def test_health_and_tree_over_an_owner_only_socket(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """The socket and the secret are 0600 in a 0700 directory; health and diag.tree answer."""
    runtime, proc = daemon
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    assert stat.S_IMODE((runtime / "gloved.sock").stat().st_mode) == 0o600
    secret = runtime / "bootstrap-secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert secret.stat().st_uid == os.getuid()
    assert len(secret.read_text()) == 64
    int(secret.read_text(), 16)
    health = call(runtime / "gloved.sock", "health")
    assert health["status"] == "ok"
    assert health["pid"] == proc.pid
    tree = call(runtime / "gloved.sock", "diag.tree")
    root = tree["root"]
    assert root["name"] == "gloved"
    assert root["strategy"] == "rest_for_one"
    assert [c["name"] for c in root["children"]] == ["launcher", "loop-lag", "sessions", "control"]
    assert all(c["state"] == "running" for c in root["children"])


def test_hello_and_capabilities_report_what_this_daemon_can_do(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """hello names the server, protocol 1, its pid and methods; capabilities has the shape
    a controller reads, and says honestly that no runtime is constructed."""
    runtime, proc = daemon
    with Client(runtime / "gloved.sock", client_name="sage/0.1") as client:
        assert client.server is not None
        assert client.server.server == "gloved"
        assert client.server.protocol == 1
        assert client.server.pid == proc.pid
        assert client.server.methods == ["capabilities", "diag.tree", "health", "hello"]
        caps = client.call("capabilities")
        assert caps == {
            "schema_version": 0,
            "protocol": 1,
            "lifecycle_operational": False,
            "runtimes": [],
            "limits": dict.fromkeys(LIMIT_NAMES, "unavailable"),
            "networks": [],
            "terminals": [],
            "reason": caps["reason"],
            "backend": "linux",
        }
        assert "run `glove setup`" in caps["reason"]
        with pytest.raises(RemoteError) as info:
            client.call("health", {"verbose": True})
        assert info.value.code == "invalid_params"
        assert info.value.data == {"path": "$.params.verbose"}
        assert client.call("health")["status"] == "ok"


def test_the_secret_is_new_at_every_start_and_gone_at_stop(tmp_path: Path) -> None:
    """Each start writes a fresh secret; stop removes it with the socket; a client holding
    the old one is refused."""
    runtime = tmp_path / "run" / "glove"
    proc = _start(runtime)
    first = (runtime / "bootstrap-secret").read_text()
    assert _stop(proc) == 0
    assert not (runtime / "bootstrap-secret").exists()
    assert not (runtime / "gloved.sock").exists()
    with pytest.raises(DaemonUnavailable, match="No such file"):
        call(runtime / "gloved.sock", "health")
    proc = _start(runtime)
    try:
        second = (runtime / "bootstrap-secret").read_text()
        assert second != first
        assert [p.name for p in runtime.iterdir() if p.name.startswith(".")] == []
        with _raw(runtime / "gloved.sock") as s:
            s.sendall(_frame(_hello(runtime, secret=first)))
            assert _read_reply(s)["error"]["code"] == "unauthenticated"
            assert _closed(s)
        assert call(runtime / "gloved.sock", "health")["status"] == "ok"
    finally:
        assert _stop(proc) == 0


def test_glove_diag_tree_prints_the_live_tree(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """The CLI renders the daemon's tree for a person and as JSON for a program."""
    runtime, _ = daemon
    cli = [sys.executable, "-m", "glove", "diag", "tree", "--runtime-dir", str(runtime)]
    text = subprocess.run(cli, capture_output=True, text=True, check=True, timeout=30).stdout
    assert text.splitlines()[0].startswith("gloved  [rest_for_one 0/")
    assert "control  ControlServer  running" in text
    assert "loop lag:" in text
    as_json = json.loads(
        subprocess.run(
            [*cli, "--json"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
    )
    assert as_json["root"]["name"] == "gloved"


def test_second_instance_refuses_to_start(daemon: tuple[Path, subprocess.Popen[bytes]]) -> None:
    """A second gloved on the same runtime directory exits non-zero, naming the holder, and
    leaves the first one's secret alone."""
    runtime, proc = daemon
    secret = (runtime / "bootstrap-secret").read_text()
    second = subprocess.run(
        [sys.executable, "-m", "glove.daemon", "--runtime-dir", str(runtime)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 2
    assert f"pid {proc.pid}" in second.stderr
    assert (runtime / "bootstrap-secret").read_text() == secret
    assert call(runtime / "gloved.sock", "health")["status"] == "ok"


def test_sigterm_stops_cleanly_and_removes_the_socket(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """SIGTERM tears the tree down, removes the socket and the secret, and exits 0."""
    runtime, proc = daemon
    assert _stop(proc) == 0
    assert not (runtime / "gloved.sock").exists()
    assert not (runtime / "bootstrap-secret").exists()


def test_unknown_method_keeps_the_connection_open(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """method_not_found is an answer, not a protocol error: the next request works."""
    runtime, _ = daemon
    with _authenticated(runtime) as s:
        s.sendall(_frame({"id": 2, "method": "launch.rocket"}))
        reply = _read_reply(s)
        assert reply["id"] == 2
        assert reply["error"]["code"] == "method_not_found"
        s.sendall(_frame({"id": 3, "method": "health"}))
        assert _read_reply(s)["id"] == 3
    with pytest.raises(RemoteError, match="method_not_found"):
        call(runtime / "gloved.sock", "nope")


@pytest.mark.parametrize(
    ("first", "code"),
    [
        ({"id": 1, "method": "health"}, "unauthenticated"),
        ({"id": 1, "cancel": True}, "unauthenticated"),
        ("wrong", "unauthenticated"),
        (
            {"id": 1, "method": "hello", "params": {"client": "x/1", "protocol": 1}},
            "unauthenticated",
        ),
        ({"id": 1, "method": "hello"}, "unauthenticated"),
        ("protocol-2", "unsupported_protocol"),
        (b'{"id": 1, "method": "hello", "method": "health"}', "duplicate_key"),
        (b"\xff\xfe", "malformed_frame"),
    ],
    ids=[
        "request-before-hello",
        "cancel-before-hello",
        "wrong-secret",
        "missing-secret",
        "no-params",
        "unsupported-protocol",
        "duplicate-key-hello",
        "not-utf8",
    ],
)
def test_authentication_failures_get_one_typed_error_and_close(
    daemon: tuple[Path, subprocess.Popen[bytes]], first: object, code: str
) -> None:
    """Anything but a correct hello as the first frame: one error frame, the connection
    closes, and an authenticated bystander is not affected."""
    runtime, _ = daemon
    if first == "wrong":
        first = _hello(runtime, secret="0" * 64)
    elif first == "protocol-2":
        first = _hello(runtime)
        first["params"]["protocol"] = 2
    with _authenticated(runtime) as bystander, _raw(runtime / "gloved.sock") as s:
        s.sendall(_frame(first))  # type: ignore[arg-type]
        reply = _read_reply(s)
        assert reply["error"]["code"] == code
        assert "0" * 64 not in reply["error"]["message"]
        assert _closed(s)
        bystander.sendall(_frame({"id": 9, "method": "health"}))
        assert _read_reply(bystander)["id"] == 9


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        ((CAP + 1).to_bytes(4, "big"), "frame_too_large"),
        (_frame(b"{not json"), "malformed_frame"),
        (_frame(b'{"id": 2, "method": "health", "x": 1}'), "malformed_frame"),
        (_frame(b'{"id": 2, "method": "health", "id": 3}'), "duplicate_key"),
        (
            _frame(b'{"id": 2, "method": "health", "params": {"a": 1, "\\u0061": 2}}'),
            "duplicate_key",
        ),
        (
            _frame(b'{"id": 2, "method": "health", "params": {"x": [{"k": 1, "k": 1}]}}'),
            "duplicate_key",
        ),
        (_frame(b"[" * 100 + b"]" * 100), "malformed_frame"),
        (b'\x00\x00\x00\x10{"id"', "truncated_frame"),
    ],
    ids=[
        "oversized",
        "not-json",
        "unknown-field",
        "duplicate-key",
        "duplicate-escaped-key",
        "duplicate-nested-key",
        "too-deep",
        "truncated",
    ],
)
def test_bad_frames_get_a_typed_error_and_close_only_that_connection(
    daemon: tuple[Path, subprocess.Popen[bytes]], wire: bytes, code: str
) -> None:
    """Oversized, malformed, duplicate-key and truncated frames after hello are answered,
    closed, and other connections go on."""
    runtime, _ = daemon
    with _authenticated(runtime) as bystander, _authenticated(runtime) as s:
        s.sendall(wire)
        if code == "truncated_frame":
            s.shutdown(socket.SHUT_WR)
        reply = _read_reply(s)
        assert reply == {"id": 0, "error": {"code": code, "message": reply["error"]["message"]}}
        assert _closed(s)
        bystander.sendall(_frame({"id": 9, "method": "health"}))
        assert _read_reply(bystander)["id"] == 9


def test_slowloris_is_cut_off_at_the_read_deadline(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """A frame dripped a byte at a time must still complete within the read deadline: the
    dripping client gets truncated_frame and is closed; others are served all along."""
    runtime, _ = daemon
    payload = json.dumps({"id": 2, "method": "health", "params": {}}).encode()
    with _authenticated(runtime) as bystander, _authenticated(runtime) as s:
        s.sendall(len(payload).to_bytes(4, "big"))
        started = time.monotonic()
        sent = 0
        reply: dict[str, Any] | None = None
        while time.monotonic() - started < CONTROL_READ_DEADLINE_S + 3:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                s.sendall(payload[sent : sent + 1])
                sent += 1
            bystander.sendall(_frame({"id": sent + 10, "method": "health"}))
            assert _read_reply(bystander)["result"]["status"] == "ok"
            s.settimeout(0.25)
            with contextlib.suppress(TimeoutError):
                reply = _read_reply(s)
                break
        assert sent < len(payload)
        assert reply is not None
        assert reply["error"]["code"] == "truncated_frame"
        assert time.monotonic() - started >= CONTROL_READ_DEADLINE_S - 0.5
        s.settimeout(5)
        assert _closed(s)


def test_refuses_a_runtime_dir_open_to_others(tmp_path: Path) -> None:
    """An existing runtime directory with group/other access is refused, not fixed."""
    runtime = tmp_path / "glove"
    runtime.mkdir(mode=0o755)
    runtime.chmod(0o755)
    out = subprocess.run(
        [sys.executable, "-m", "glove.daemon", "--runtime-dir", str(runtime)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "0755" in out.stderr
    assert not (runtime / "gloved.sock").exists()
    assert not (runtime / "bootstrap-secret").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another uid")
def test_a_peer_of_another_uid_is_refused_before_any_frame_is_read(unpriv: Unpriv) -> None:
    """A gloved run by the test user (via runuser) rejects root by SO_PEERCRED: root can
    open the 0600 socket and even read the secret (DAC override), and is still refused,
    before anything it sent is read; the daemon keeps serving its owner."""
    base = Path(tempfile.mkdtemp(prefix="gloved-peer-"))
    try:
        os.chown(base, unpriv.uid, unpriv.gid)
        runtime = base / "glove"
        argv = unpriv.command(unpriv.python, "-m", "glove.daemon", "--runtime-dir", str(runtime))
        runner = _start(runtime, argv)
        pid = int((runtime / "gloved.lock").read_text())
        try:
            with _raw(runtime / "gloved.sock") as s:
                # The refusal arrives without us sending a byte.
                reply = _read_reply(s)
                assert reply["error"]["code"] == "peer_rejected"
                assert _closed(s)
            with _raw(runtime / "gloved.sock") as s:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    s.sendall(_frame(_hello(runtime)))  # the right secret, the wrong uid
                assert _read_reply(s)["error"]["code"] == "peer_rejected"
            with pytest.raises(DaemonUnavailable, match="not a regular file owned by uid 0"):
                call(runtime / "gloved.sock", "health")  # our client will not use their secret
            probe = (
                "from pathlib import Path; from glove.control import call; "
                f"print(call(Path({str(runtime / 'gloved.sock')!r}), 'health')['status'])"
            )
            owner = subprocess.run(
                unpriv.command(unpriv.python, "-c", probe),
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert owner.stdout.strip() == "ok", owner.stderr
        finally:
            os.kill(pid, signal.SIGTERM)
            runner.wait(timeout=10)
            if runner.stderr is not None:
                runner.stderr.close()
        assert not (runtime / "bootstrap-secret").exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another uid")
def test_another_users_client_cannot_reach_the_socket(
    daemon: tuple[Path, subprocess.Popen[bytes]], unpriv: Unpriv
) -> None:
    """The test user's client (via runuser) cannot even reach root's socket or secret: it
    gets DaemonUnavailable, one line, no traceback."""
    runtime, _ = daemon
    probe = (
        "import sys; from pathlib import Path; from glove.control import ControlError, call\n"
        f"try: call(Path({str(runtime / 'gloved.sock')!r}), 'health')\n"
        "except ControlError as e: print(type(e).__name__, e); sys.exit(1)\n"
    )
    out = subprocess.run(
        unpriv.command(unpriv.python, "-c", probe), capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 1
    assert out.stdout.startswith("DaemonUnavailable")
    assert "Traceback" not in out.stderr
