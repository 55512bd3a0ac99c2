"""glove-remote-executor over stdio: arguments, umask, methods, framing faults and deadlines."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from glove.protocol import decode_response
from glove.remote import (
    MEASURED_MODULES,
    ResponseDeadlineExceeded,
    TtlExhausted,
    request_deadline,
    serve_channel,
)
from glove.remote._wire import ExecutorRequest
from tests.remote.conftest import (
    CONSOLE_SCRIPT,
    ExecutorProcess,
    IdentityFiles,
    _clean_env,
    launcher_argv,
    request_bytes,
)

EXIT_USAGE, EXIT_IO, EXIT_DEADLINE, EXIT_PROTOCOL, EXIT_IDENTITY = 64, 74, 75, 76, 78


def test_remote_health_answers_not_operational(executor: ExecutorProcess) -> None:
    """remote_health is the one method, and it says not_operational."""
    response = executor.call("remote_health", request_id=41)
    assert response.id == 41
    assert response.error is None
    assert response.result == {"status": "not_operational"}
    assert executor.finish() == (0, "")


@pytest.mark.parametrize(
    "method",
    ["session.create", "session.start", "launch", "capabilities", "health", "REMOTE_HEALTH",
     "remote_health ", "x" * 128],
)  # fmt: skip
def test_every_other_method_is_method_not_found(executor: ExecutorProcess, method: str) -> None:
    """Lifecycle and any other names answer method_not_found and the channel stays open."""
    response = executor.call(method, request_id=7)
    assert response.id == 7
    assert response.error is not None
    assert response.error.code == "method_not_found"
    assert executor.call("remote_health", request_id=8).result == {"status": "not_operational"}
    assert executor.finish()[0] == 0


def test_pipelined_requests_are_answered_in_order(executor: ExecutorProcess) -> None:
    """Several frames written at once are answered one by one, in order."""
    executor.send(b"".join(request_bytes("remote_health", request_id=i) for i in range(1, 6)))
    ids = []
    for _ in range(5):
        frame = executor.next_frame()
        assert frame is not None
        ids.append(decode_response(frame).id)
    assert ids == [1, 2, 3, 4, 5]
    assert executor.finish()[0] == 0


@pytest.mark.parametrize(
    "argv",
    [[], ["--stdio", "--stdio"], ["--stdio=1"], ["--help"], ["stdio"], ["--stdio", "x"],
     ["-c", "import os"], ["--STDIO"]],
)  # fmt: skip
def test_anything_but_exactly_stdio_is_refused(identities: IdentityFiles, argv: list[str]) -> None:
    """Only the argument vector ['--stdio'] is served; everything else exits 64 unserved."""
    process = ExecutorProcess(launcher_argv(identities.write(), *argv))
    process.send(request_bytes("remote_health"))
    assert process.next_frame() is None
    code, err = process.finish()
    assert code == EXIT_USAGE
    assert "usage: glove-remote-executor --stdio" in err


@pytest.mark.parametrize("argv", [[], ["--stdio", "--x"], ["--version"]])
def test_console_script_refuses_other_arguments(argv: list[str]) -> None:
    """The installed console script applies the same rule."""
    out = subprocess.run(
        [str(CONSOLE_SCRIPT), *argv], capture_output=True, text=True, timeout=30, env=_clean_env()
    )
    assert out.returncode == EXIT_USAGE
    assert "usage: glove-remote-executor --stdio" in out.stderr
    assert out.stdout == ""


def test_console_script_fails_closed_on_the_real_identity_path() -> None:
    """The console script reads /etc/glove/remote-executor.identity and nothing else."""
    out = subprocess.run(
        [str(CONSOLE_SCRIPT), "--stdio"],
        capture_output=True,
        text=True,
        timeout=30,
        env=_clean_env(),
        input="",
    )
    assert out.returncode == EXIT_IDENTITY
    assert "/etc/glove" in out.stderr
    if not Path("/etc/glove/remote-executor.identity").exists():
        assert "does not exist" in out.stderr


@pytest.mark.parametrize(
    "variable", ["PYTHONPATH", "PYTHONUSERBASE", "PYTHONWARNINGS", "PYTHONINSPECT"]
)
def test_interpreter_variables_are_refused(identities: IdentityFiles, variable: str) -> None:
    """A PYTHON* variable that could change the code that runs is refused before serving."""
    env = _clean_env() | {variable: "/nonexistent" if variable != "PYTHONINSPECT" else "1"}
    if variable == "PYTHONWARNINGS":
        env[variable] = "default"
    process = ExecutorProcess(launcher_argv(identities.write(), "--stdio"), env=env)
    process.send(request_bytes("remote_health"))
    assert process.next_frame() is None
    code, err = process.finish()
    assert code == EXIT_USAGE
    assert variable in err


def test_umask_is_077_while_serving(executor: ExecutorProcess) -> None:
    """The serving executor's umask is 0077 whatever it inherited (0022 here)."""
    assert executor.call("remote_health").error is None
    status = Path(f"/proc/{executor.proc.pid}/status").read_text()
    assert "Umask:\t0077" in status
    assert executor.finish()[0] == 0


def test_measured_modules_are_every_glove_module_the_executor_loads() -> None:
    """A fresh process importing the console script's entry loads exactly MEASURED_MODULES."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys; from glove.remote._executor import main; "
                "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] == 'glove')))"
            ),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env=_clean_env(),
    )
    assert out.stdout.split() == sorted(MEASURED_MODULES)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\x00\x10\x00\x00" + b"x" * 16, "exceeds"),  # 1 MiB declared, cap 64 KiB
        (b'\x00\x00\x00\x0a{"id"', "stream ended inside a frame"),
        (b"\x00\x00\x00\x02[]", "malformed request"),
        (b"\x00\x00\x00\x00", "malformed request"),
        (b"\x00\x00\x00\x0dnot json here", "malformed request"),
    ],
    ids=["oversized", "truncated", "not-object", "empty", "not-json"],
)
def test_protocol_faults_close_the_channel_unanswered(
    executor: ExecutorProcess, data: bytes, words: str
) -> None:
    """Oversized, truncated or malformed frames end the channel with 76 and no frame."""
    executor.send(data)
    assert executor.proc.stdin is not None
    executor.proc.stdin.close()
    assert executor.next_frame() is None
    code, err = executor.finish()
    assert code == EXIT_PROTOCOL
    assert words in err


@pytest.mark.parametrize(
    "payload",
    [
        b'{"id": 1, "method": "remote_health"}',
        b'{"id": 1, "method": "remote_health", "ttl_ms": 0}',
        b'{"id": 1, "method": "remote_health", "ttl_ms": 60001}',
        b'{"id": -1, "method": "remote_health", "ttl_ms": 100}',
        b'{"id": 1, "method": "", "ttl_ms": 100}',
        b'{"id": 1, "method": "remote_health", "ttl_ms": 100, "extra": 1}',
        b'{"id": 1.5, "method": "remote_health", "ttl_ms": 100}',
    ],
)
def test_requests_with_bad_fields_are_malformed(executor: ExecutorProcess, payload: bytes) -> None:
    """Missing or out-of-range id, method or ttl_ms are protocol faults, never answered."""
    executor.send(len(payload).to_bytes(4, "big") + payload)
    assert executor.next_frame() is None
    code, err = executor.finish()
    assert code == EXIT_PROTOCOL
    assert "malformed request" in err


def test_slow_sender_that_exhausts_its_ttl_is_rejected_unrun(executor: ExecutorProcess) -> None:
    """A request dribbled in over longer than its TTL is not run: no response, exit 75."""
    assert executor.call("remote_health", request_id=1).error is None
    frame = request_bytes("remote_health", request_id=2, ttl_ms=400)
    for i in range(0, len(frame), 8):  # about 8 pieces, 0.1 s apart: ~0.8 s for a 0.4 s TTL
        executor.send(frame[i : i + 8])
        time.sleep(0.1)
    assert executor.next_frame() is None
    code, err = executor.finish()
    assert code == EXIT_DEADLINE
    assert "request 2 consumed its 400 ms TTL" in err


def test_slow_sender_within_its_ttl_is_answered(executor: ExecutorProcess) -> None:
    """The same dribble with a TTL longer than the receipt is answered."""
    frame = request_bytes("remote_health", request_id=3, ttl_ms=5000)
    for i in range(0, len(frame), 16):
        executor.send(frame[i : i + 16])
        time.sleep(0.05)
    response_frame = executor.next_frame()
    assert response_frame is not None
    assert decode_response(response_frame).id == 3
    assert executor.finish()[0] == 0


def test_idle_time_before_a_frame_is_not_charged_to_its_ttl(executor: ExecutorProcess) -> None:
    """Waiting between frames is idle time: a short-TTL request sent after a pause is served."""
    assert executor.call("remote_health", request_id=1).error is None
    time.sleep(0.6)
    response = executor.call("remote_health", request_id=2, ttl_ms=300)
    assert response.result == {"status": "not_operational"}
    assert executor.finish()[0] == 0


def test_frame_never_completed_hits_the_channel_deadline(identities: IdentityFiles) -> None:
    """A sender that starts a frame and stops is cut off at the channel deadline (75)."""
    process = ExecutorProcess(launcher_argv(identities.write(), "--stdio", frame=0.5))
    started = time.monotonic()
    process.send(request_bytes("remote_health")[:6])
    assert process.next_frame(timeout_s=30) is None
    elapsed = time.monotonic() - started
    code, err = process.finish()
    assert code == EXIT_DEADLINE
    assert "channel deadline" in err
    # Ended by the 0.5 s channel deadline, not by the 30 s idle one (nor the 30 s wait).
    assert elapsed < 15


def test_idle_channel_ends_quietly(identities: IdentityFiles) -> None:
    """With no frame started, the idle deadline ends the executor with status 0."""
    process = ExecutorProcess(launcher_argv(identities.write(), "--stdio", idle=0.3))
    assert process.next_frame(timeout_s=10) is None
    assert process.finish() == (0, "")


def test_request_deadline_subtracts_all_receive_time() -> None:
    """The deadline is receive start + TTL; a receipt as long as the TTL is rejected."""
    request = ExecutorRequest(id=9, method="remote_health", ttl_ms=1000)
    assert request_deadline(request, 100.0, 100.25) == pytest.approx(101.0)
    with pytest.raises(TtlExhausted) as info:
        request_deadline(request, 100.0, 101.0)
    assert info.value.request_id == 9
    with pytest.raises(TtlExhausted):
        request_deadline(request, 100.0, 107.5)


def test_response_write_is_bounded_by_the_request_deadline() -> None:
    """A peer that never drains stdout makes the write miss the request deadline (raised)."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    try:
        os.set_blocking(out_write, False)
        try:
            while True:  # fill the response pipe so nothing more fits
                os.write(out_write, b"\0" * 65536)
        except BlockingIOError:
            pass
        os.write(in_write, request_bytes("remote_health", ttl_ms=300))
        errors: list[BaseException] = []

        def serve() -> None:
            try:
                serve_channel(in_read, out_write, idle_deadline_s=5.0)
            except BaseException as exc:
                errors.append(exc)

        started = time.monotonic()
        worker = threading.Thread(target=serve)
        worker.start()
        worker.join(10)
        assert not worker.is_alive()
        assert len(errors) == 1
        # The request's 300 ms deadline ended the write (it waited that long at least; no
        # upper bound: the error's type, not a clock, says which deadline it was).
        assert isinstance(errors[0], ResponseDeadlineExceeded)
        assert time.monotonic() - started > 0.2
    finally:
        for fd in (in_read, in_write, out_read, out_write):
            os.close(fd)


def test_peer_reading_nothing_more_ends_the_channel_with_74(identities: IdentityFiles) -> None:
    """A peer that closed stdout gets EPIPE mapped to exit 74, never a traceback."""
    process = ExecutorProcess(launcher_argv(identities.write(), "--stdio"))
    assert process.proc.stdout is not None
    process.proc.stdout.close()
    process.send(request_bytes("remote_health"))
    code, err = process.finish()
    assert code == EXIT_IO
    assert "Traceback" not in err
