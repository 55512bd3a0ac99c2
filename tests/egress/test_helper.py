"""The in-sandbox helper (glove-egress) in a namespace the test creates, with a real host end."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.egress import helper as helper_module
from glove.egress import proxy_environment, resolv_conf
from glove.egress._channel import INET_FAMILIES, UNIX_FAMILIES, ChannelReceiver, Kind
from glove.egress._dns import TYPE_A, encode_answer, encode_query, frame, parse_query
from tests.conftest import Unpriv

from ._netns import SYSTEM_PYTHON, guest_dir, open_dir, run_inside
from .conftest import until

HELPER = str(Path(helper_module.__file__))


@pytest.fixture
def guest() -> Iterator[Path]:
    """A world-readable guest directory with the helper and resolv.conf."""
    with open_dir("egress-helper-") as root:
        yield guest_dir(root)


class Host:
    """The host end as a plain receiver: records which kinds arrive, answers DNS streams."""

    def __init__(self) -> None:
        self.host_end, self.guest_end = socket.socketpair()
        self.kinds: list[tuple[bytes, int]] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.receiver = ChannelReceiver(
            self.host_end,
            {
                b"h": Kind(INET_FAMILIES, self._take),
                b"s": Kind(INET_FAMILIES, self._take),
                b"d": Kind(INET_FAMILIES | UNIX_FAMILIES, self._take),
                b"c": Kind(UNIX_FAMILIES, self._take),
            },
            live=lambda: 0,
            max_live=16,
        )

    def _take(self, kind: bytes, sock: socket.socket) -> None:
        self.kinds.append((kind, sock.family))
        task = asyncio.get_running_loop().create_task(self._serve(kind, sock))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _serve(self, kind: bytes, sock: socket.socket) -> None:
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            if kind == b"d" and sock.family == socket.AF_UNIX:  # a relayed UDP query
                length = int.from_bytes(await reader.readexactly(2), "big")
                query = parse_query(await reader.readexactly(length))
                import ipaddress

                writer.write(frame(encode_answer(query, [ipaddress.ip_address("192.0.2.7")])))
            else:
                writer.write(kind * 3)
            await writer.drain()
        finally:
            writer.close()

    def close(self) -> None:
        self.receiver.close()
        self.guest_end.close()


@pytest.fixture
async def host() -> object:
    """A started host end."""
    end = Host()
    end.receiver.start()
    yield end
    end.close()


CLIENT = r"""
import socket, sys
out = []
for port in (3128, 1080, 53):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    out.append(s.recv(3).decode())
    s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(5)
u.sendto(bytes.fromhex(sys.argv[1]), ("127.0.0.1", 53))
answer = u.recv(512)
out.append(answer.hex())
print(" ".join(out))
"""


async def test_listeners_hand_connections_over_by_kind(guest: Path, host: Host) -> None:
    """3128 arrives as h, 1080 as s, TCP 53 as d, a UDP query as a d socketpair, answered."""
    query = encode_query(0x0707, "a.example.org", TYPE_A)
    result = await run_inside(guest, host.guest_end, f"{SYSTEM_PYTHON} -c '{CLIENT}' {query.hex()}")
    assert result.rc == 0, result
    hh, ss, dd, answer = result.stdout.split()
    assert (hh, ss, dd) == ("hhh", "sss", "ddd")
    assert bytes.fromhex(answer)[:2] == b"\x07\x07"
    assert b"\xc0\x00\x02\x07" in bytes.fromhex(answer)
    assert [k for k, _ in host.kinds] == [b"h", b"s", b"d", b"d"]
    assert host.kinds[3][1] == socket.AF_UNIX


async def test_the_command_gets_the_proxy_environment_and_its_status_is_returned(
    guest: Path, host: Host
) -> None:
    """Every variable of proxy_environment() is set; the exit status passes through."""
    result = await run_inside(guest, host.guest_end, "env; exit 7")
    assert result.rc == 7
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    expected = proxy_environment(helper=str(guest / "glove-egress"), python=SYSTEM_PYTHON)
    for key, value in expected.items():
        assert seen.get(key) == value, key
    assert seen["https_proxy"] == "http://127.0.0.1:3128"
    assert seen["ALL_PROXY"] == "socks5h://127.0.0.1:1080"
    assert seen["NO_PROXY"] == "localhost,127.0.0.1,::1"


async def test_the_channel_and_listeners_are_not_inherited(guest: Path, host: Host) -> None:
    """The command holds no socket: only its stdio descriptors are open."""
    result = await run_inside(
        guest, host.guest_end, "for f in /proc/$$/fd/*; do readlink $f || true; done"
    )
    assert result.rc == 0
    assert "socket:" not in result.stdout, result.stdout


async def test_when_the_host_goes_the_network_ends_and_the_command_runs_on(
    guest: Path, host: Host
) -> None:
    """After the host end closes, every listener refuses at once; the command finishes."""
    script = r"""
python3=/usr/bin/python3
$python3 - <<'EOF'
import socket, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", 3128), timeout=1).close()
    except ConnectionRefusedError:
        break
    time.sleep(0.05)
for port in (3128, 1080, 53):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1)
        print("open", port)
    except ConnectionRefusedError:
        print("refused", port)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect(("127.0.0.1", 53)); u.settimeout(2); u.send(b"x")
try:
    u.recv(10); print("udp answered")
except ConnectionRefusedError:
    print("udp refused")
EOF
echo still-running
"""
    run = asyncio.ensure_future(run_inside(guest, host.guest_end, script))
    await until(lambda: bool(host.kinds), timeout=30)  # the first probe connected
    host.close()
    result = await run
    assert result.rc == 0, result
    assert result.stdout.split("\n")[:5] == [
        "refused 3128",
        "refused 1080",
        "refused 53",
        "udp refused",
        "still-running",
    ]


async def test_signals_reach_the_command(guest: Path, host: Host) -> None:
    """TERM sent to the helper is forwarded; the status is 128 + 15."""
    script = "trap 'exit 143' TERM; kill -TERM $PPID; sleep 5 & wait"
    result = await run_inside(guest, host.guest_end, script)
    assert result.rc == 143


async def test_with_mcp_one_helper_also_serves_the_mcp_socket(guest: Path, host: Host) -> None:
    """``--mcp``: a connection to @glove-mcp arrives as kind c, next to the egress kinds."""
    script = (
        f'{SYSTEM_PYTHON} -c "import socket; s = socket.socket(socket.AF_UNIX); '
        "s.connect('\\0glove-mcp'); print(s.recv(3).decode())\""
    )
    result = await run_inside(guest, host.guest_end, script, flags=("--mcp",))
    assert (result.rc, result.stdout) == (0, "ccc\n"), result
    assert host.kinds == [(b"c", socket.AF_UNIX)]


def test_usage_errors_exit_125() -> None:
    """A bad command line is 125 with a message; a missing command is 127."""
    bad = subprocess.run([SYSTEM_PYTHON, HELPER, "x", "--", "true"], capture_output=True, text=True)
    assert bad.returncode == 125
    assert "usage: glove-egress FD" in bad.stderr
    left, right = socket.socketpair()
    with left, right:
        fd = right.fileno()
        missing = subprocess.run(
            ["unshare", "--net", SYSTEM_PYTHON, HELPER, str(fd), "--no-dns", "--", "/nonexistent"],
            capture_output=True, text=True, pass_fds=[fd],
        )  # fmt: skip
    assert missing.returncode == 127
    assert "cannot run '/nonexistent'" in missing.stderr
    unknown = subprocess.run(
        [SYSTEM_PYTHON, HELPER, "3", "--fast", "--", "true"], capture_output=True, text=True
    )
    assert (unknown.returncode, "unknown option '--fast'" in unknown.stderr) == (125, True)


def test_port_53_without_the_privilege_is_a_clear_error() -> None:
    """Without CAP_NET_BIND_SERVICE (and the sysctl) the helper names the fix and exits 125."""
    # uid 65534 runs a copy it can read (the checkout may sit in a directory only we enter).
    readable = Path(tempfile.mkdtemp(prefix="glove-helper-", dir="/var/tmp"))
    readable.chmod(0o755)
    helper = readable / "helper.py"
    shutil.copy2(HELPER, helper)
    helper.chmod(0o644)
    left, right = socket.socketpair()
    try:
        with left, right:
            fd = right.fileno()
            result = subprocess.run(
                ["unshare", "--net", "setpriv", "--reuid=65534", "--regid=65534",
                 "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                 SYSTEM_PYTHON, str(helper), str(fd), "--", "true"],
                capture_output=True, text=True, pass_fds=[fd],
            )  # fmt: skip
    finally:
        shutil.rmtree(readable, ignore_errors=True)
    assert result.returncode == 125, result
    assert "cannot listen on 127.0.0.1:53" in result.stderr
    assert "ip_unprivileged_port_start" in result.stderr


async def test_the_helper_runs_unprivileged_in_its_own_user_namespace(
    guest: Path, host: Host, unpriv: Unpriv
) -> None:
    """As the test user (unshare -rn) the helper binds its listeners and hands connections over."""
    query = encode_query(9, "a.example.org", TYPE_A)
    result = await run_inside(
        guest, host.guest_end, f"{SYSTEM_PYTHON} -c '{CLIENT}' {query.hex()}", unpriv=unpriv
    )
    assert result.rc == 0, result
    assert result.stdout.split()[:3] == ["hhh", "sss", "ddd"]


def test_resolv_conf_fails_fast_and_names_the_stub() -> None:
    """The sandbox resolver: the stub only, short timeouts, no search list."""
    text = resolv_conf()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["nameserver 127.0.0.1", "options timeout:2 attempts:2 ndots:1"]
