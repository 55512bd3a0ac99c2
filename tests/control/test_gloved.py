"""gloved as a real process: socket safety, single instance, framing errors, shutdown."""

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

import pytest

from glove.control import RemoteError, call
from glove.protocol import CONTROL_MAX_FRAME_BYTES, decode_response, encode_frame
from tests.conftest import Unpriv

START_DEADLINE_S = 10.0


def _wait_for_socket(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_DEADLINE_S
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(
                f"gloved exited early: {proc.stderr.read() if proc.stderr else ''}"
            )
        if time.monotonic() > deadline:
            raise AssertionError("gloved did not create its socket in time")
        time.sleep(0.02)


def _start(
    runtime: Path, python: str = sys.executable, **credentials: object
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(  # type: ignore[call-overload]
        [python, "-m", "glove.control.daemon_main", "--runtime-dir", str(runtime)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        **credentials,
    )
    _wait_for_socket(runtime / "gloved.sock", proc)
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
    s.settimeout(5)
    s.connect(str(sock_path))
    return s


def _read_reply(s: socket.socket) -> dict[str, object]:
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


def test_health_and_tree_over_an_owner_only_socket(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """The socket is 0600 in a 0700 directory; health and diag.tree answer."""
    runtime, proc = daemon
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    assert stat.S_IMODE((runtime / "gloved.sock").stat().st_mode) == 0o600
    health = call(runtime / "gloved.sock", "health")
    assert health["status"] == "ok"
    assert health["pid"] == proc.pid
    tree = call(runtime / "gloved.sock", "diag.tree")
    root = tree["root"]
    assert root["name"] == "gloved"
    assert root["strategy"] == "rest_for_one"
    assert [c["name"] for c in root["children"]] == ["loop-lag", "sessions", "control"]
    assert all(c["state"] == "running" for c in root["children"])


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
    """A second gloved on the same runtime directory exits non-zero, naming the holder."""
    runtime, proc = daemon
    second = subprocess.run(
        [sys.executable, "-m", "glove.control.daemon_main", "--runtime-dir", str(runtime)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 2
    assert f"pid {proc.pid}" in second.stderr
    assert call(runtime / "gloved.sock", "health")["status"] == "ok"


def test_sigterm_stops_cleanly_and_removes_the_socket(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """SIGTERM tears the tree down, removes the socket and exits 0."""
    runtime, proc = daemon
    assert _stop(proc) == 0
    assert not (runtime / "gloved.sock").exists()


def test_unknown_method_keeps_the_connection_open(
    daemon: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """method_not_found is an answer, not a protocol error: the next request works."""
    runtime, _ = daemon
    with _raw(runtime / "gloved.sock") as s:
        s.sendall(encode_frame(b'{"id": 1, "method": "launch.rocket"}', max_frame_bytes=1024))
        reply = _read_reply(s)
        assert reply["error"]["code"] == "method_not_found"  # type: ignore[index]
        s.sendall(encode_frame(b'{"id": 2, "method": "health"}', max_frame_bytes=1024))
        assert _read_reply(s)["id"] == 2
    with pytest.raises(RemoteError, match="method_not_found"):
        call(runtime / "gloved.sock", "nope")


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        ((CONTROL_MAX_FRAME_BYTES + 1).to_bytes(4, "big"), "frame_too_large"),
        (encode_frame(b"{not json", max_frame_bytes=64), "malformed_frame"),
        (
            encode_frame(b'{"id": 1, "method": "health", "x": 1}', max_frame_bytes=64),
            "malformed_frame",
        ),
        (b'\x00\x00\x00\x10{"id"', "truncated_frame"),
    ],
)
def test_bad_frames_get_a_typed_error_and_close_only_that_connection(
    daemon: tuple[Path, subprocess.Popen[bytes]], wire: bytes, code: str
) -> None:
    """Oversized, malformed and truncated frames are answered, closed, and others go on."""
    runtime, _ = daemon
    with _raw(runtime / "gloved.sock") as bystander, _raw(runtime / "gloved.sock") as s:
        s.sendall(wire)
        if code == "truncated_frame":
            s.shutdown(socket.SHUT_WR)
        reply = _read_reply(s)
        assert reply["error"]["code"] == code  # type: ignore[index]
        assert _closed(s)
        bystander.sendall(encode_frame(b'{"id": 9, "method": "health"}', max_frame_bytes=64))
        assert _read_reply(bystander)["id"] == 9


def test_refuses_a_runtime_dir_open_to_others(tmp_path: Path) -> None:
    """An existing runtime directory with group/other access is refused, not fixed."""
    runtime = tmp_path / "glove"
    runtime.mkdir(mode=0o755)
    runtime.chmod(0o755)
    out = subprocess.run(
        [sys.executable, "-m", "glove.control.daemon_main", "--runtime-dir", str(runtime)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "0755" in out.stderr
    assert not (runtime / "gloved.sock").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another uid")
def test_client_of_another_uid_is_refused_before_any_frame_is_read(unpriv: Unpriv) -> None:
    """A gloved run by the test user rejects root's connection by SO_PEERCRED, unread."""
    base = Path(tempfile.mkdtemp(prefix="gloved-peer-"))
    try:
        os.chown(base, unpriv.uid, unpriv.gid)
        runtime = base / "glove"
        proc = _start(runtime, unpriv.python, **unpriv.credentials())
        try:
            with _raw(runtime / "gloved.sock") as s:
                # Root can open the 0600 socket (DAC override), so only SO_PEERCRED stands
                # between it and the daemon. The refusal arrives without us sending a byte.
                reply = decode_response(_read_frame_bytes(s))
                assert reply.error is not None
                assert reply.error.code == "peer_rejected"
                assert _closed(s)
            with _raw(runtime / "gloved.sock") as s:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    s.sendall(encode_frame(b'{"id": 1, "method": "health"}', max_frame_bytes=64))
                reply = decode_response(_read_frame_bytes(s))
                assert reply.error is not None
                assert reply.error.code == "peer_rejected"
        finally:
            assert _stop(proc) == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _read_frame_bytes(s: socket.socket) -> bytes:
    reply = _read_reply(s)
    return json.dumps(reply).encode()
