"""Shared helpers: valid remote sections, identity files, and a framed executor client."""

from __future__ import annotations

import base64
import contextlib
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from glove.protocol import FrameDecoder, Response, decode_response
from glove.remote import (
    EXECUTOR_MAX_FRAME_BYTES,
    ExecutorRequest,
    RemoteBackendConfig,
    encode_request,
    measure_executable,
    render_identity,
)

HERE = Path(__file__).resolve().parent
LAUNCHER = HERE / "executor_launcher.py"
CONSOLE_SCRIPT = Path(sys.executable).parent / "glove-remote-executor"
IMAGE_HEX = "a" * 16 + "0123456789abcdef" * 3
IMAGE_DIGEST = f"sha256:{IMAGE_HEX}"
IMAGE = f"registry.example.net/agents/base@{IMAGE_DIGEST}"


def ed25519_public_line(seed: int = 1) -> str:
    """An ``ssh-ed25519 AAAA...`` public key line from a deterministic private key."""
    key = Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)
    raw = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return raw.decode()


def section(**changes: object) -> RemoteBackendConfig:
    """A valid ``[remote_backend]`` section, with ``changes`` applied."""
    base = RemoteBackendConfig(
        host="builder.example.net",
        port=2222,
        user="glove",
        host_key=ed25519_public_line(),
        container_image=IMAGE,
        container_image_digest=IMAGE_DIGEST,
    )
    return msgspec.structs.replace(base, **changes)


def owner_only_dir(path: Path) -> Path:
    """Create ``path`` as a 0700 directory of ours and return it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Path:
    """An owner-only runtime directory like the one gloved verifies."""
    return owner_only_dir(tmp_path / "run")


@dataclass
class IdentityFiles:
    """Writes identity files the executor will accept (root-owned, 0644) or fault on."""

    directory: Path

    def write(self, data: bytes | None = None, *, name: str = "remote-executor.identity") -> Path:
        """Write ``data`` (default: a valid identity for this interpreter) and return the path."""
        if os.geteuid() != 0:
            pytest.fail("the executor's identity file must be root-owned: run the tests as root")
        path = self.directory / name
        if data is None:
            data = render_identity(measure_executable(), IMAGE_DIGEST)
        path.write_bytes(data)
        path.chmod(0o644)
        return path


@pytest.fixture
def identities(tmp_path: Path) -> IdentityFiles:
    """A root-owned 0755 directory (under root-owned or sticky parents) for identity files."""
    directory = tmp_path / "etc-glove"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    return IdentityFiles(directory)


def read_frame(
    fd: int, timeout_s: float = 10.0, decoder: FrameDecoder | None = None
) -> bytes | None:
    """Read one frame from ``fd`` (keeping extra bytes in ``decoder``); None at end of stream."""
    decoder = decoder or FrameDecoder(max_frame_bytes=EXECUTOR_MAX_FRAME_BYTES)
    deadline = time.monotonic() + timeout_s
    while True:
        frame = decoder.next_frame()
        if frame is not None:
            return frame
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise AssertionError("no frame from the executor in time")
        chunk = os.read(fd, 65536)
        if not chunk:
            assert not decoder.pending, "stream ended inside a frame"
            return None
        decoder.feed(chunk)


def request_bytes(method: str, *, request_id: int = 1, ttl_ms: int = 5000) -> bytes:
    """One framed request."""
    return encode_request(ExecutorRequest(id=request_id, method=method, ttl_ms=ttl_ms))


class ExecutorProcess:
    """A running executor (launcher or console script) with pipes on stdin/stdout/stderr."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env if env is not None else _clean_env(),
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.decoder = FrameDecoder(max_frame_bytes=EXECUTOR_MAX_FRAME_BYTES)

    def send(self, data: bytes) -> None:
        """Write bytes to the executor's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def call(self, method: str, *, request_id: int = 1, ttl_ms: int = 5000) -> Response:
        """Send one request and decode the response frame."""
        self.send(request_bytes(method, request_id=request_id, ttl_ms=ttl_ms))
        frame = self.next_frame()
        assert frame is not None, "the executor closed the channel instead of answering"
        return decode_response(frame)

    def next_frame(self, timeout_s: float = 10.0) -> bytes | None:
        """Read one response frame, or None at end of stream."""
        assert self.proc.stdout is not None
        return read_frame(self.proc.stdout.fileno(), timeout_s, self.decoder)

    def finish(self, timeout_s: float = 20.0) -> tuple[int, str]:
        """Close stdin, wait, and return (exit status, stderr text)."""
        assert self.proc.stdin is not None
        assert self.proc.stderr is not None
        if not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        code = self.proc.wait(timeout_s)
        err = self.proc.stderr.read().decode()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc.stderr.close()
        return code, err

    def close(self) -> None:
        """Kill the executor if it still runs and release every pipe."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(20)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


def _clean_env() -> dict[str, str]:
    """The environment without interpreter variables (the executor refuses those)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


def launcher_argv(identity: Path, *argv: str, idle: float = 30.0, frame: float = 10.0) -> list[str]:
    """The command line of the test launcher with ``argv`` for the executor."""
    return [
        sys.executable,
        str(LAUNCHER),
        str(identity),
        "--idle",
        str(idle),
        "--frame",
        str(frame),
        "--",
        *argv,
    ]


@pytest.fixture
def executor(identities: IdentityFiles) -> Iterator[ExecutorProcess]:
    """A launcher-started executor with a valid identity, serving on its pipes."""
    process = ExecutorProcess(launcher_argv(identities.write(), "--stdio"))
    yield process
    process.close()


def b64(data: bytes) -> str:
    """Standard base64 text."""
    return base64.b64encode(data).decode()
