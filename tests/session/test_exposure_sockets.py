"""A host service behind an exposure is never a way out of ``"network": "none"``: a real
gloved session tries every way to a host Unix socket in its exposure, as root and as the
unprivileged owner, and reaches none, while its own sockets work (issue 20, item 3)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from collections.abc import Iterator

import pytest

from glove.container import probe_unix_gate
from tests.conftest import Unpriv

from ._exposures import Owner, owner_home

ATTACK = """
[harnesses.attack]
argv = ["/usr/bin/python3", "/workspace/work/attack.py", "/workspace/work"]
"""
#: How long the listener and the sandbox wait for each other's marker file.
HANDSHAKE_S = 60.0

#: Run inside the sandbox: every way to the host's socket, then the sandbox's own sockets.
ATTACK_SCRIPT = textwrap.dedent(
    """
    import errno, json, os, socket, sys, time
    d = sys.argv[1]
    res = {}
    def attempt(name, addr, family=socket.AF_UNIX, kind=socket.SOCK_STREAM):
        try:
            s = socket.socket(family, kind)
        except OSError as exc:
            res[name] = errno.errorcode.get(exc.errno, str(exc.errno))
            return
        try:
            s.connect(addr)
            res[name] = "connected"
        except OSError as exc:
            res[name] = errno.errorcode.get(exc.errno, str(exc.errno))
        finally:
            s.close()
    host = d + "/host.sock"
    attempt("direct", host)
    os.symlink(host, "/tmp/link.sock")
    attempt("symlink", "/tmp/link.sock")
    os.link(host, d + "/hard.sock")
    attempt("hard_link", d + "/hard.sock")
    fd = os.open(host, os.O_PATH)
    attempt("proc_self_fd", "/proc/self/fd/%d" % fd)
    attempt("proc_pid_fd", "/proc/%d/fd/%d" % (os.getpid(), fd))
    attempt("dev_fd", "/dev/fd/%d" % fd)
    os.chdir(d)
    attempt("relative", "host.sock")
    os.chdir("/tmp")
    attempt("seqpacket", host, kind=socket.SOCK_SEQPACKET)
    attempt("datagram", d + "/host.dgram", kind=socket.SOCK_DGRAM)
    try:
        a, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.sendto(b"x", d + "/host.dgram")
        res["datagram_pair"] = "sent"
    except OSError as exc:
        res["datagram_pair"] = errno.errorcode.get(exc.errno, str(exc.errno))
    open(d + "/started", "w").close()
    deadline = time.monotonic() + HANDSHAKE_S
    while not os.path.exists(d + "/later.ready"):
        if time.monotonic() > deadline:
            raise SystemExit("the host never made its later socket")
        time.sleep(0.01)
    attempt("created_after_launch", d + "/later.sock")
    own = socket.socket(socket.AF_UNIX)
    own.bind("/tmp/own.sock")
    own.listen(8)
    attempt("own_tmp", "/tmp/own.sock")
    attempt("own_relative", "own.sock")
    shm = socket.socket(socket.AF_UNIX)
    shm.bind("/dev/shm/own.sock")
    shm.listen(1)
    attempt("own_shm", "/dev/shm/own.sock")
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(b"\\0glove-gate-test")
    abstract.listen(1)
    attempt("abstract", b"\\0glove-gate-test")
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    attempt("tcp_loopback", tcp.getsockname(), socket.AF_INET)
    x, y = socket.socketpair()
    x.sendall(b"ok")
    res["socketpair"] = y.recv(2).decode()
    mine = socket.socket(socket.AF_UNIX)
    mine.bind(d + "/mine.sock")
    mine.listen(1)
    attempt("own_in_exposure", d + "/mine.sock")
    print(json.dumps(res))
    """
).replace("HANDSHAKE_S", repr(HANDSHAKE_S))

#: Run on the host as the owner: the service behind the exposure, logging every client.
LISTENER_SCRIPT = textwrap.dedent(
    """
    import os, select, socket, sys, time
    d, log = sys.argv[1], sys.argv[2]
    def listen(path, kind=socket.SOCK_STREAM):
        s = socket.socket(socket.AF_UNIX, kind)
        s.bind(path)
        os.chmod(path, 0o777)
        if kind == socket.SOCK_STREAM:
            s.listen(16)
        return s
    stream, dgram = listen(d + "/host.sock"), listen(d + "/host.dgram", socket.SOCK_DGRAM)
    watched = [stream, dgram]
    print("listening", flush=True)
    later = None
    while True:
        if later is None and os.path.exists(d + "/started"):
            later = listen(d + "/later.sock")
            watched.append(later)
            open(d + "/later.ready", "w").close()
        for s in select.select(watched, [], [], 0.01)[0]:
            with open(log, "a") as out:
                if s is dgram:
                    out.write("datagram %r\\n" % (s.recv(64),))
                else:
                    s.accept()
                    out.write("connection on %s\\n" % s.getsockname())
    """
)

#: The owner's own connect from outside any sandbox: the listener is reachable at all.
CONTROL_SCRIPT = "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])"


@pytest.fixture(params=["root", "unpriv"])
def owner(request: pytest.FixtureRequest, unpriv: Unpriv) -> Iterator[Owner]:
    """A running gloved with the attack harness, as root or as the unprivileged owner."""
    yield from owner_home(request.param, unpriv, ATTACK)


def _as_owner(owner: Owner, *argv: str) -> list[str]:
    return [owner.home.python, *argv]


def test_no_way_to_a_host_socket_in_the_exposure(owner: Owner) -> None:
    """Direct, through a symlink, a hard link, an O_PATH descriptor's /proc and /dev/fd
    names, a relative path, seqpacket, datagrams, and a socket made after the launch: the
    host listener hears nothing from the session, then hears the same owner's direct
    connect from outside; the session's own /tmp, /dev/shm, abstract, TCP and socketpair
    sockets all work."""
    assert probe_unix_gate().mechanism is not None, "this host must have the gate"
    work = owner.mkdir("work")
    (work / "attack.py").write_text(ATTACK_SCRIPT)
    log = owner.home.base / "accepted.log"
    for path in (work / "attack.py",):
        os.chown(path, owner.uid, owner.gid)
    listener = subprocess.Popen(
        _as_owner(owner, "-c", LISTENER_SCRIPT, str(work), str(log)),
        **owner.home.creds,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline() == "listening\n"
        made = owner.init("work", str(work), "--mode", "rw")
        assert made.returncode == 0, made.stderr
        final = owner.run("attack", ["work"])
        out = owner.home.state / "sessions-data" / final["session_id"] / "stdout"
        result = json.loads(out.read_text())
        assert not log.exists(), log.read_text()
        control = subprocess.run(
            _as_owner(owner, "-c", CONTROL_SCRIPT, str(work / "host.sock")),
            **owner.home.creds,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert control.returncode == 0, control.stderr
        deadline = time.monotonic() + HANDSHAKE_S
        while not log.exists():
            assert time.monotonic() < deadline, "the control connection was never heard"
            time.sleep(0.01)
    finally:
        listener.kill()
        listener.wait(timeout=30)
        if listener.stdout is not None:
            listener.stdout.close()
    assert log.read_text().count("connection on") == 1
    for name in ("direct", "symlink", "hard_link", "relative", "seqpacket",
                 "created_after_launch", "proc_pid_fd", "own_in_exposure"):  # fmt: skip
        assert result[name] == "EACCES", (name, result)
    for name in ("proc_self_fd", "dev_fd"):  # "self" names no process the launcher has
        assert result[name] in ("EACCES", "ENOENT"), (name, result)
    assert result["datagram"] == result["datagram_pair"] == "EPERM", result
    for name in ("own_tmp", "own_relative", "own_shm", "abstract", "tcp_loopback"):
        assert result[name] == "connected", (name, result)
    assert result["socketpair"] == "ok"
    assert final["outcome"]["exit_code"] == 0, final
