#!/usr/bin/python3
"""glove-egress: the sandbox's network helper; hands every connection to the host proxy.

Copied as a script into the sandbox at ``/opt/glove/glove-egress`` and run by the sandbox's
``/usr/bin/python3`` (standard library only)::

    glove-egress FD [--mcp] [--no-dns] -- COMMAND [ARGS...]
    glove-egress connect HOST PORT [--fdpass]
    glove-relay FD -- AGENT [ARGS...]

**Serve** (the sandbox's command). ``FD`` is the guest end of a Unix socketpair whose host
end the egress proxy reads. Inside the sandbox's route-less network namespace the helper
listens on ``127.0.0.1:3128`` (HTTP proxy, kind ``h``), ``127.0.0.1:1080`` (SOCKS5, ``s``),
``127.0.0.1:53`` UDP and TCP (the DNS stub, ``d``, unless ``--no-dns``) and, with ``--mcp``,
``@glove-mcp`` (MCP connections, ``c``, so one PID serves both).
Every accepted connection goes to the host with ``SCM_RIGHTS`` (one kind byte carrying one
descriptor); the helper keeps no copy and never reads its bytes. A UDP query travels in a
socketpair passed as ``d``, in DNS-over-TCP framing (RFC 1035 4.2.2); the framed answer
goes back to the UDP client. The helper never holds a host socket.

The command inherits neither the channel nor a listener (all close-on-exec); it runs in its
own process group (the terminal's foreground one under a pty) with
:func:`proxy_environment` added and gets the signals the init forwards (INT, QUIT and HUP
to its whole process group, as a terminal sends them); the helper exits
with its status (128 + N for a signal). When the host end closes (the proxy is gone) every
listener closes: the network ends, it never opens; the command keeps running.

**Relay** (MCP only: ``glove run`` and ``gloved`` sessions without ``--network proxy``).
Started under the name ``glove-relay`` (the guest directory holds this script under that
name too), the helper serves ``@glove-mcp`` alone: no network listener, no proxy
variables, the command's environment as given. It is the one in-sandbox helper; the former
``glove.mcp.relay`` is this mode.

**Connect** (an ``ssh`` ``ProxyCommand``): tunnel to ``HOST:PORT`` through the SOCKS5
listener and copy stdio, or with ``--fdpass`` (``ProxyUseFdpass yes``) pass the socket.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
import time
from types import FrameType

GUEST_HELPER_PATH = "/opt/glove/glove-egress"
SYSTEM_PYTHON = "/usr/bin/python3"
HTTP_PROXY_ADDRESS = ("127.0.0.1", 3128)
SOCKS_ADDRESS = ("127.0.0.1", 1080)
DNS_ADDRESS = ("127.0.0.1", 53)
MCP_NAME = "glove-mcp"
#: The name that starts the helper in its MCP-only mode (``/opt/glove/glove-relay``).
RELAY_NAME = "glove-relay"
#: Names that never go to the proxy: the sandbox's own loopback.
NO_PROXY = "localhost,127.0.0.1,::1"
KIND_HTTP = b"h"
KIND_SOCKS = b"s"
KIND_DNS = b"d"
KIND_MCP = b"c"
LISTEN_BACKLOG = 128
MAX_ACCEPTS_PER_WAKEUP = 32
#: Seconds a channel send may block before the host counts as gone.
CHANNEL_SEND_TIMEOUT_S = 5.0
#: Largest DNS message read from a UDP client or the host.
MAX_DNS_MESSAGE_BYTES = 4096
#: UDP queries waiting for the host at once; more are dropped (the client retries).
MAX_PENDING_DNS = 64
#: Seconds a UDP query waits for the host's answer.
DNS_ANSWER_TIMEOUT_S = 5.0
#: Seconds the connect mode waits for the SOCKS5 listener to answer.
CONNECT_TIMEOUT_S = 30.0
COPY_CHUNK_BYTES = 64 * 1024
_S = signal.Signals
FORWARDED_SIGNALS = (_S.SIGTERM, _S.SIGINT, _S.SIGHUP, _S.SIGQUIT, _S.SIGUSR1, _S.SIGUSR2)
#: ... of which these go to the command's process group, as the init gives them to ours.
GROUP_SIGNALS = (_S.SIGINT, _S.SIGQUIT, _S.SIGHUP)
# Exit codes: glove.exits's values (a standard-library script run by the sandbox's own Python
# cannot import it; tests/test_exits.py holds them equal). A helper started wrongly means the
# sandbox was set up wrongly: nothing ran (125).
EXIT_SETUP_FAILED = 125
EXIT_USAGE = EXIT_SETUP_FAILED  # the former name
EXIT_CANNOT_RUN = 127  # glove.exits.EXIT_NOT_FOUND: the command could not be started at all
EXIT_REFUSED = 1  # ``connect``: the egress rules refused it, or the tunnel failed
SIGNAL_EXIT_BASE = 128
RESOLV_CONF = (
    "# glove egress: the sandbox's DNS stub answers only names the egress rules allow;\n"
    "# everything else is NXDOMAIN at once, and a stub that is gone is refused at once.\n"
    "nameserver 127.0.0.1\n"
    "options timeout:2 attempts:2 ndots:1\n"
)
SOCKS_REPLIES = {
    1: "general failure",
    2: "refused by the egress rules (see the audit log, or glove network check)",
    3: "network unreachable",
    4: "host unreachable (the name did not resolve)",
    5: "connection refused",
    6: "timed out",
    7: "command not supported",
    8: "address type not supported",
}


class UsageError(Exception):
    """The helper was started with a bad command line or descriptor."""


class CannotRun(Exception):
    """The command could not be executed."""


def proxy_environment(
    helper: str = GUEST_HELPER_PATH, python: str = SYSTEM_PYTHON
) -> dict[str, str]:
    """The variables that point common tools at the helper's listeners (both cases: curl
    reads only lowercase ``http_proxy``); ``socks5h``: the proxy resolves; npm, yarn, pip and
    Node's fetch get their own keys; git over SSH a ``ProxyCommand`` through this helper.
    Nothing here is a secret: the inherited channel is the authentication."""
    http = f"http://{HTTP_PROXY_ADDRESS[0]}:{HTTP_PROXY_ADDRESS[1]}"
    socks = f"socks5h://{SOCKS_ADDRESS[0]}:{SOCKS_ADDRESS[1]}"
    env = {}
    for name, value in (
        ("http_proxy", http),
        ("https_proxy", http),
        ("all_proxy", socks),
        ("no_proxy", NO_PROXY),
    ):
        env[name] = value
        env[name.upper()] = value
    env.update(
        {
            "npm_config_proxy": http,
            "npm_config_https_proxy": http,
            "npm_config_noproxy": NO_PROXY,
            "YARN_HTTP_PROXY": http,
            "YARN_HTTPS_PROXY": http,
            "PIP_PROXY": http,
            "NODE_USE_ENV_PROXY": "1",
            "GIT_SSH_COMMAND": f"ssh -o ProxyCommand='{python} {helper} connect %h %p'",
        }
    )
    return env


def _channel(fd: int) -> socket.socket:
    try:
        channel = socket.socket(fileno=fd)
    except OSError as exc:
        raise UsageError(f"descriptor {fd} is not the host channel: {exc.strerror}") from exc
    if channel.family != socket.AF_UNIX or channel.type != socket.SOCK_STREAM:
        channel.detach()
        raise UsageError(f"descriptor {fd} is not a Unix stream socket")
    channel.set_inheritable(False)
    channel.settimeout(CHANNEL_SEND_TIMEOUT_S)
    return channel


def _listener(family: int, kind: int, address: tuple[str, int] | str) -> socket.socket:
    """A bound, non-blocking, close-on-exec listener (TCP and Unix streams also listen).

    Raises:
        UsageError: the address cannot be bound (naming the sysctl for port 53).
    """
    sock = socket.socket(family, kind)
    try:
        if family == socket.AF_INET:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        if kind == socket.SOCK_STREAM:
            sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise UsageError(_bind_failure(address, exc)) from exc
    sock.setblocking(False)
    return sock


def _bind_failure(address: tuple[str, int] | str, exc: OSError) -> str:
    if isinstance(address, str):
        return f"cannot listen on @{address[1:]}: {exc.strerror}"
    where = f"{address[0]}:{address[1]}"
    if address[1] < 1024 and exc.errno == 13:
        return (
            f"cannot listen on {where}: {exc.strerror} (the sandbox's network namespace "
            "needs net.ipv4.ip_unprivileged_port_start <= 53, or use --no-dns)"
        )
    return f"cannot listen on {where}: {exc.strerror}"


def _controls_terminal() -> bool:
    """Whether stdin is a terminal whose foreground process group is the helper's own."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _spawn_in_foreground(command: list[str], env: dict[str, str]) -> int:
    """Fork the command into its own process group, made the terminal's foreground one
    before ``execvpe``, as a shell does (a background TUI would be stopped by
    SIGTTIN/SIGTTOU). An exec failure comes back as its errno over a close-on-exec pipe.

    Raises:
        CannotRun: the command could not be executed.
    """
    failed_read, failed_write = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the command, before exec: never returns
        try:
            os.close(failed_read)
            os.setpgid(0, 0)
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            os.tcsetpgrp(0, os.getpid())
            for signum in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            os.execvpe(command[0], command, env)  # noqa: S606 - argv is a list, no shell
        except OSError as exc:
            os.write(failed_write, str(exc.errno or 0).encode())
        except BaseException:  # noqa: BLE001 - the forked child must never unwind
            os.write(failed_write, b"0")
        os._exit(EXIT_CANNOT_RUN)
    os.close(failed_write)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # EACCES once the child has exec'd: it already did it
    failure = os.read(failed_read, 64)
    os.close(failed_read)
    if failure:
        os.waitpid(pid, 0)
        err = int(failure) if failure.isdigit() else 0
        raise CannotRun(f"cannot run {command[0]!r}: {os.strerror(err)}")
    return pid


def _spawn(command: list[str], env: dict[str, str]) -> int:
    """Start the command in its own process group with default signal handling.

    On a terminal the command's group becomes the foreground one
    (:func:`_spawn_in_foreground`); otherwise ``posix_spawnp`` starts it.

    Raises:
        CannotRun: the command could not be executed.
    """
    if _controls_terminal():
        return _spawn_in_foreground(command, env)
    try:
        return os.posix_spawnp(
            command[0],
            command,
            env,
            setpgroup=0,
            setsigmask=(),
            setsigdef=signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP},
        )
    except OSError as exc:
        raise CannotRun(f"cannot run {command[0]!r}: {exc.strerror}") from exc


class _Pending:
    """One UDP query on its way to the host and back."""

    def __init__(self, client: tuple[str, int], deadline: float) -> None:
        self.client = client
        self.deadline = deadline
        self.buffer = b""


class Helper:
    """The serve loop: listeners, the channel, pending UDP queries, the command's pidfd."""

    def __init__(
        self, channel: socket.socket, *, mcp: bool, dns: bool, network: bool = True
    ) -> None:
        self.channel = channel
        self.listeners: dict[socket.socket, bytes] = {}
        self.udp: socket.socket | None = None
        self.pending: dict[socket.socket, _Pending] = {}
        self.selector = selectors.DefaultSelector()
        self.serving = True
        try:
            inet, unix, stream = socket.AF_INET, socket.AF_UNIX, socket.SOCK_STREAM
            if network:
                self.listeners[_listener(inet, stream, HTTP_PROXY_ADDRESS)] = KIND_HTTP
                self.listeners[_listener(inet, stream, SOCKS_ADDRESS)] = KIND_SOCKS
            if network and dns:
                self.listeners[_listener(inet, stream, DNS_ADDRESS)] = KIND_DNS
                self.udp = _listener(inet, socket.SOCK_DGRAM, DNS_ADDRESS)
            if mcp:
                self.listeners[_listener(unix, stream, "\0" + MCP_NAME)] = KIND_MCP
        except UsageError:
            self.close_listeners()
            raise
        for sock in self.listeners:
            self.selector.register(sock, selectors.EVENT_READ)
        if self.udp is not None:
            self.selector.register(self.udp, selectors.EVENT_READ)
        self.selector.register(channel, selectors.EVENT_READ)

    def close_listeners(self) -> None:
        """Stop serving: from now on every connection and query is refused."""
        self.serving = False
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(self.channel)  # at EOF it would be readable forever
        for sock in [*self.listeners, *([self.udp] if self.udp else []), *self.pending]:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(sock)
            sock.close()
        self.listeners.clear()
        self.pending.clear()
        self.udp = None

    def _send(self, kind: bytes, fd: int) -> bool:
        try:
            socket.send_fds(self.channel, [kind], [fd])
        except OSError:
            return False
        return True

    def _accept(self, listener: socket.socket, kind: bytes) -> bool:
        for _ in range(MAX_ACCEPTS_PER_WAKEUP):
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                return True  # reset before it was accepted
            with conn:
                if not self._send(kind, conn.fileno()):
                    return False
        return True

    def _query(self) -> bool:
        assert self.udp is not None
        for _ in range(MAX_ACCEPTS_PER_WAKEUP):
            try:
                data, client = self.udp.recvfrom(MAX_DNS_MESSAGE_BYTES)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                continue  # an ICMP error from an earlier reply
            if not data or len(self.pending) >= MAX_PENDING_DNS:
                continue
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            with theirs:
                if not self._send(KIND_DNS, theirs.fileno()):
                    ours.close()
                    return False
            try:
                ours.sendall(len(data).to_bytes(2, "big") + data)
            except OSError:
                ours.close()
                continue
            ours.setblocking(False)
            self.pending[ours] = _Pending(client, time.monotonic() + DNS_ANSWER_TIMEOUT_S)
            self.selector.register(ours, selectors.EVENT_READ)
        return True

    def _answer(self, sock: socket.socket) -> None:
        pending = self.pending[sock]
        try:
            chunk = sock.recv(MAX_DNS_MESSAGE_BYTES + 2)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        pending.buffer += chunk
        size = int.from_bytes(pending.buffer[:2], "big") if len(pending.buffer) >= 2 else -1
        if size >= 0 and len(pending.buffer) >= size + 2:
            if self.udp is not None and 0 < size <= MAX_DNS_MESSAGE_BYTES:
                with contextlib.suppress(OSError):
                    self.udp.sendto(pending.buffer[2 : size + 2], pending.client)
        elif chunk and len(pending.buffer) <= MAX_DNS_MESSAGE_BYTES + 2:
            return  # more of the answer to come
        self._forget(sock)

    def _forget(self, sock: socket.socket) -> None:
        self.pending.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(sock)
        sock.close()

    def _expire(self) -> None:
        now = time.monotonic()
        for sock, pending in list(self.pending.items()):
            if pending.deadline <= now:
                self._forget(sock)

    def step(self, timeout: float | None) -> set[object]:
        """Serve one wakeup; return the ready objects the caller watches (the pidfd)."""
        if self.pending:
            soonest = min(p.deadline for p in self.pending.values()) - time.monotonic()
            timeout = max(0.0, soonest) if timeout is None else min(timeout, max(0.0, soonest))
        ready: set[object] = {key.fileobj for key, _ in self.selector.select(timeout)}
        if self.channel in ready and self.serving:
            # The host never writes: readable means it hung up. The network ends here.
            self.close_listeners()
        for obj in ready:
            if not self.serving:
                break
            if isinstance(obj, socket.socket) and obj in self.listeners:
                if not self._accept(obj, self.listeners[obj]):
                    self.close_listeners()
            elif obj is self.udp:
                if not self._query():
                    self.close_listeners()
            elif isinstance(obj, socket.socket) and obj in self.pending:
                self._answer(obj)
        self._expire()
        return ready


def _status(wait_status: int) -> int:
    code = os.waitstatus_to_exitcode(wait_status)
    return code if code >= 0 else SIGNAL_EXIT_BASE - code


def _pass_on(pid: int, signum: int) -> None:
    """INT, QUIT and HUP to ``pid``'s process group (its own: the whole job, as a terminal
    sends them), any other forwarded signal to ``pid`` alone."""
    with contextlib.suppress(ProcessLookupError):
        if signum in GROUP_SIGNALS:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)


def serve(
    fd: int, command: list[str], *, mcp: bool = False, dns: bool = True, network: bool = True
) -> int:
    """Serve the listeners until ``command`` exits; return its status.

    Without ``network`` only the MCP socket is served (with ``mcp``) and the command's
    environment is left as it is (the relay mode).

    Raises:
        UsageError: ``fd`` is not a Unix stream socket, or a listener cannot be bound.
        CannotRun: the command could not be executed.
    """
    channel = _channel(fd)
    helper = Helper(channel, mcp=mcp, dns=dns, network=network)
    env = dict(os.environ)
    if network:
        me = os.path.realpath(__file__)
        env.update(proxy_environment(helper=me, python=sys.executable or SYSTEM_PYTHON))
    child = 0
    early: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child:
            _pass_on(child, signum)
        else:
            early.append(signum)

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    try:
        child = _spawn(command, env)
    except CannotRun:
        helper.close_listeners()
        raise
    for pending_signal in early:
        _pass_on(child, pending_signal)
    try:
        exited = os.pidfd_open(child)
    except OSError as exc:  # a kernel older than 5.3: refuse rather than run unwatched
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        raise UsageError(f"cannot watch the command (pidfd_open): {exc.strerror}") from exc
    helper.selector.register(exited, selectors.EVENT_READ)
    while exited not in helper.step(None):
        pass
    helper.close_listeners()
    channel.close()
    os.close(exited)
    _, wait_status = os.waitpid(child, 0)
    return _status(wait_status)


def relay(fd: int, command: list[str]) -> int:
    """The MCP-only mode (``glove-relay``): serve ``@glove-mcp`` until ``command`` (the
    agent) exits; return its status.

    Raises:
        UsageError: ``fd`` is not a Unix stream socket, or the name is taken.
        CannotRun: the agent could not be executed.
    """
    return serve(fd, command, mcp=True, network=False)


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the SOCKS5 proxy closed the connection")
        data += chunk
    return data


def _socks_request(host: str, port: int) -> bytes:
    try:
        import ipaddress

        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        name = host.encode("idna")
        if not 1 <= len(name) <= 255:
            raise UsageError(f"bad host name {host!r}") from None
        target = bytes((3, len(name))) + name
    else:
        target = bytes((1 if address.version == 4 else 4,)) + address.packed
    return bytes((5, 1, 0)) + target + port.to_bytes(2, "big")


def _handshake(sock: socket.socket, host: str, port: int) -> None:
    sock.sendall(b"\x05\x01\x00")
    if _recv_exactly(sock, 2) != b"\x05\x00":
        raise ConnectionRefusedError("the SOCKS5 proxy refused the no-auth method")
    sock.sendall(_socks_request(host, port))
    head = _recv_exactly(sock, 4)
    if head[1] != 0:
        why = SOCKS_REPLIES.get(head[1], f"error {head[1]}")
        raise ConnectionRefusedError(f"{host}:{port}: {why}")
    skip = {1: 4, 4: 16}.get(head[3])
    if skip is None:
        skip = _recv_exactly(sock, 1)[0]
    _recv_exactly(sock, skip + 2)


def socks_connect(host: str, port: int) -> socket.socket:
    """A socket tunnelled to ``host:port`` through the sandbox's SOCKS5 listener.

    Raises:
        UsageError: a bad host or port.
        ConnectionRefusedError: the proxy refused (the message names why).
        OSError: the listener is gone or the exchange failed.
    """
    if not 1 <= port <= 65535:
        raise UsageError(f"bad port {port}")
    _socks_request(host, port)  # a bad host fails before anything connects
    sock = socket.create_connection(SOCKS_ADDRESS, timeout=CONNECT_TIMEOUT_S)
    try:
        _handshake(sock, host, port)
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return sock


def _copy(sock: socket.socket) -> int:
    """Copy stdin to the tunnel and the tunnel to stdout until the tunnel ends."""
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(stdin, selectors.EVENT_READ)
        selector.register(sock, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj == stdin:
                    data = os.read(stdin, COPY_CHUNK_BYTES)
                    if data:
                        sock.sendall(data)
                    else:
                        selector.unregister(stdin)
                        sock.shutdown(socket.SHUT_WR)
                else:
                    data = sock.recv(COPY_CHUNK_BYTES)
                    if not data:
                        return 0
                    view = memoryview(data)
                    while view:
                        view = view[os.write(stdout, view) :]


def connect(host: str, port: int, *, fdpass: bool) -> int:
    """The ProxyCommand: tunnel to ``host:port``, then copy stdio or pass the socket.

    Raises:
        UsageError: a bad host or port.
    """
    try:
        sock = socks_connect(host, port)
    except (OSError, ConnectionError) as exc:
        sys.stderr.write(f"glove-egress: {exc}\n")
        return EXIT_REFUSED
    with sock:
        if fdpass:
            with socket.socket(fileno=os.dup(sys.stdout.fileno())) as out:
                socket.send_fds(out, [b"\0"], [sock.fileno()])
            return 0
        try:
            return _copy(sock)
        except OSError as exc:
            sys.stderr.write(f"glove-egress: the tunnel failed: {exc}\n")
            return EXIT_REFUSED


def _parse_serve(argv: list[str]) -> tuple[int, list[str], bool, bool]:
    if "--" not in argv:
        raise UsageError("usage: glove-egress FD [--mcp] [--no-dns] -- COMMAND [ARGS...]")
    split = argv.index("--")
    options, command = argv[1:split], argv[split + 1 :]
    if not options or not options[0].isdigit() or not command:
        raise UsageError("usage: glove-egress FD [--mcp] [--no-dns] -- COMMAND [ARGS...]")
    unknown = [opt for opt in options[1:] if opt not in ("--mcp", "--no-dns")]
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r}")
    return int(options[0]), command, "--mcp" in options, "--no-dns" not in options


def _parse_relay(argv: list[str]) -> tuple[int, list[str]]:
    if len(argv) < 4 or argv[2] != "--" or not argv[1].isdigit():
        raise UsageError(f"usage: {RELAY_NAME} FD -- AGENT [ARGS...]")
    return int(argv[1]), argv[3:]


def _parse_connect(argv: list[str]) -> tuple[str, int, bool]:
    ok = len(argv) in (4, 5) and argv[3].isdigit() and argv[4:] in ([], ["--fdpass"])
    if not ok:
        raise UsageError("usage: glove-egress connect HOST PORT [--fdpass]")
    return argv[2], int(argv[3]), argv[4:] == ["--fdpass"]


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and serve, relay or connect; return the exit status.

    Started as ``glove-relay`` (the name of ``argv[0]``), the helper runs in its MCP-only
    relay mode.
    """
    args = sys.argv if argv is None else argv
    name = "glove-egress"
    try:
        if args and args[0].rsplit("/", 1)[-1] == RELAY_NAME:
            name = RELAY_NAME
            fd, command = _parse_relay(args)
            return relay(fd, command)
        if len(args) >= 2 and args[1] == "connect":
            host, port, fdpass = _parse_connect(args)
            return connect(host, port, fdpass=fdpass)
        fd, command, mcp, dns = _parse_serve(args)
        return serve(fd, command, mcp=mcp, dns=dns)
    except UsageError as exc:
        sys.stderr.write(f"{name}: {exc}\n")
        return EXIT_SETUP_FAILED
    except CannotRun as exc:
        sys.stderr.write(f"{name}: {exc}\n")
        return EXIT_CANNOT_RUN


if __name__ == "__main__":
    sys.exit(main())
