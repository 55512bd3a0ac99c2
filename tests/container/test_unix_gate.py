"""The Unix socket gate in ``glove exec``: a host socket in the workspace, a ``--bind`` or a
``--use`` directory is refused at every connect, the sandbox's own sockets are not, as root
and as the unprivileged user (decision 0034)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.container import Bind, SandboxSpec, SpecError, probe_unix_gate, run
from glove.container.linux._unix_gate import ConnectGate, unix_path
from tests.conftest import Unpriv

from .conftest import GloveExec

#: Inside: connect to each path given, then to the sandbox's own sockets; print the errnos.
PROBE = textwrap.dedent(
    """
    import errno, json, os, socket, sys
    res = {}
    def attempt(name, addr, family=socket.AF_UNIX, kind=socket.SOCK_STREAM):
        s = socket.socket(family, kind)
        try:
            s.connect(addr)
            res[name] = "connected"
        except OSError as exc:
            res[name] = errno.errorcode.get(exc.errno, str(exc.errno))
        finally:
            s.close()
    for i, path in enumerate(sys.argv[1:]):
        attempt("host%d" % i, path)
        os.symlink(path, "/tmp/link%d" % i)
        attempt("link%d" % i, "/tmp/link%d" % i)
    own = socket.socket(socket.AF_UNIX)
    own.bind("/tmp/own.sock")
    own.listen(1)
    attempt("own", "/tmp/own.sock")
    tcp = socket.socket()
    tcp.setblocking(False)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        tcp.connect(server.getsockname())
        res["nonblocking"] = "connected"
    except BlockingIOError:
        import select
        select.select([], [tcp], [], 30)
        res["nonblocking"] = errno.errorcode.get(tcp.getsockopt(socket.SOL_SOCKET,
                                                                socket.SO_ERROR), "connected")
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        res["datagram"] = "created"
    except OSError as exc:
        res["datagram"] = errno.errorcode.get(exc.errno)
    print(json.dumps(res))
    """
)


class _Listener:
    """A host service: stream sockets bound in directories the sandbox will see."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []

    def listen(self, path: Path) -> str:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        path.chmod(0o777)  # permission is not what stops the sandbox
        sock.listen(8)
        sock.setblocking(False)
        self.sockets.append(sock)
        return str(path)

    def heard(self) -> int:
        count = 0
        for sock in self.sockets:
            try:
                while True:
                    sock.accept()[0].close()
                    count += 1
            except BlockingIOError:
                continue
        return count


@pytest.fixture
def listener() -> Iterator[_Listener]:
    """Host listeners, closed after the test."""
    host = _Listener()
    try:
        yield host
    finally:
        for sock in host.sockets:
            sock.close()


def _outside(glove_exec: GloveExec, path: str) -> int:
    """Connect from outside any sandbox, as the same user: the listener is reachable."""
    code = "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])"
    return subprocess.run(
        [*glove_exec.wrap, glove_exec.python, "-c", code, path], timeout=30, check=False
    ).returncode


def test_host_sockets_in_every_bind_are_refused(glove_exec: GloveExec, listener: _Listener) -> None:
    """A host socket in the workspace, in a --bind and in a --use directory is refused
    (directly and through a symlink in /tmp), counted as denied connects; the host hears
    only the same user's connect from outside; the sandbox's own socket, a non-blocking
    TCP connect and the datagram refusal behave as documented."""
    assert probe_unix_gate().mechanism is not None
    base = glove_exec.workspace.parent
    bound, used = base / "bound", base / "used"
    for directory in (bound, used):
        directory.mkdir()
        directory.chmod(0o755)
    in_workspace = listener.listen(glove_exec.workspace / "ws.sock")
    in_bind = listener.listen(bound / "bind.sock")
    in_use = listener.listen(used / "use.sock")
    flags = ("--bind", f"{bound}:/mnt/bound", "--use", str(used))
    paths = ("/workspace/ws.sock", "/mnt/bound/bind.sock", in_use)
    result = glove_exec("/usr/bin/python3", "-c", PROBE, *paths, flags=flags)
    assert result.rc == 0, result.stderr
    report = json.loads(result.stdout)
    assert listener.heard() == 0
    for index in range(len(paths)):
        assert report[f"host{index}"] == report[f"link{index}"] == "EACCES", report
    assert (report["own"], report["nonblocking"]) == ("connected", "connected"), report
    assert report["datagram"] == "EPERM"
    assert result.status["denied_syscalls"] == {"connect": 6}
    assert result.status["violation"] == "seccomp"
    assert result.status["expected_denials"] == {"unix_datagram": 1}
    assert "seccomp refused connect x6" in result.stderr
    for path in (in_workspace, in_bind, in_use):
        assert _outside(glove_exec, path) == 0
    assert listener.heard() == 3


def test_a_datagram_unix_socket_never_enters(tmp_path: Path) -> None:
    """A datagram Unix socket as stdin is pumped (the command sees a pipe), and one in
    pass_fds is refused before anything starts: each send could name any host path."""
    binds = (Bind("/usr"), *(Bind(p, optional=True) for p in ("/bin", "/lib", "/lib64")))
    code = "import os, stat; print(stat.S_ISFIFO(os.fstat(0).st_mode))"
    spec = SandboxSpec(argv=("/usr/bin/python3", "-c", code), binds=binds, env={"PATH": "/usr/bin"})
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    out = tmp_path / "out"
    with ours, theirs, out.open("wb") as sink:
        theirs.close()
        assert run(spec, stdin=ours.fileno(), stdout=sink.fileno()).exit_code == 0
        assert out.read_text() == "True\n"
        passing = SandboxSpec(argv=("/bin/true",), binds=binds, pass_fds={3: ours.fileno()})
        with pytest.raises(SpecError, match="datagram Unix socket"):
            run(passing)


def test_unix_path_reads_sun_path_as_the_kernel_does() -> None:
    """Pathname, abstract, autobind, another family, and a path without its NUL."""
    unix = (socket.AF_UNIX).to_bytes(2, "little")
    assert unix_path(unix + b"/tmp/x\0junk") == b"/tmp/x"
    assert unix_path(unix + b"rel") == b"rel"
    assert unix_path(unix + b"\0abstract") is None
    assert unix_path(unix) is None
    assert unix_path((socket.AF_INET).to_bytes(2, "little") + b"/tmp/x") is None


def test_the_unprivileged_user_has_the_gate_too(unpriv: Unpriv) -> None:
    """probe_unix_gate finds every part for the unprivileged user as well."""
    code = "from glove.container import probe_unix_gate; print(probe_unix_gate().mechanism)"
    done = subprocess.run(
        unpriv.command(unpriv.python, "-c", code),
        capture_output=True, text=True, timeout=60, cwd="/", check=False,
    )  # fmt: skip
    assert done.stdout.strip() == "seccomp-notify-connect", done.stderr


def test_queued_connects_hold_no_descriptor() -> None:
    """However many connects wait for a worker, the gate holds one duplicate of the
    listener, and closing it releases that (a sandbox cannot exhaust the launcher's
    descriptors by blocking all its threads in connect)."""
    read_end, write_end = os.pipe()  # any descriptor stands in for the listener here
    before = len(os.listdir("/proc/self/fd"))
    gate = ConnectGate(workers=0)  # no worker: every job stays queued
    try:
        for ident in range(500):
            gate.submit(read_end, ident, os.getpid(), (0, 0, 0, 0, 0, 0))
        assert len(os.listdir("/proc/self/fd")) == before + 1
    finally:
        gate.close()
        os.close(read_end)
        os.close(write_end)
    assert len(os.listdir("/proc/self/fd")) == before - 2
