"""End to end: real clients in a namespace the test creates, the helper, the proxy, real origins.

curl, git over HTTPS (smart HTTP, a test CA), pip download from a local index, ssh and git
over SSH through SOCKS5, Python urllib and glibc's resolver, as root and (where the tool
allows) as the unprivileged test user. Origins listen on host loopback only; the namespace
has no route anywhere, so everything they receive came through the proxy.
"""

from __future__ import annotations

import json
import shlex
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from glove.actors import running
from glove.audit import AuditLog
from glove.egress import EgressProxy, RuleSet, StaticResolver
from tests.conftest import Unpriv

from ._netns import SYSTEM_PYTHON, Inside, guest_dir, open_dir, run_inside
from ._origin import Origin, Sshd, build_repo, origin, sshd
from .conftest import LocalCA

NAMES = ("web.test", "git.test", "pypi.test", "ssh.test", "other.test", "rebind.test")


@dataclass
class World:
    """The origins of one module: HTTPS and plain HTTP on host loopback, sshd, a repo."""

    root: Path
    https: Origin
    http: Origin
    ssh: Sshd
    repo: Path
    ca: LocalCA


@pytest.fixture(scope="module")
def world(test_ca: LocalCA) -> Iterator[World]:
    """Start the origins once for the module."""
    with open_dir("egress-e2e-") as root:
        repo = build_repo(root / "git")
        with (
            origin(repo.parent, tls=test_ca.server_context()) as https,
            origin(repo.parent) as http,
            sshd(root / "ssh") as ssh,
        ):
            yield World(root, https, http, ssh, repo, test_ca)


@dataclass
class Egress:
    """A proxy with a real audit log, its channel, and a guest directory for the helper."""

    proxy: EgressProxy
    guest_end: socket.socket
    guest: Path
    audit_path: Path

    async def run(
        self, script: str, *, unpriv: Unpriv | None = None, env: dict[str, str] | None = None
    ) -> Inside:
        """Run ``script`` inside a fresh namespace behind the helper."""
        return await run_inside(self.guest, self.guest_end, script, unpriv=unpriv, env=env)

    def records(self) -> list[dict[str, object]]:
        """Every audit record so far, parsed from the durable log."""
        return [json.loads(line) for line in self.audit_path.read_text().splitlines()]

    def decisions(self) -> list[tuple[object, ...]]:
        """``(proto, host, port, decision)`` of every decision record."""
        return [
            (r["proto"], r["host"], r["port"], r["decision"])
            for r in self.records()
            if r["kind"] == "egress"
        ]


@asynccontextmanager
async def egress(
    world: World, allow: list[str], deny: list[str] | None = None
) -> AsyncIterator[Egress]:
    """A proxy for one test, its audit log on disk, every test name at 127.0.0.1."""
    with open_dir("egress-run-") as root:
        host_end, guest_end = socket.socketpair()
        audit_path = root / "audit.jsonl"
        resolver = StaticResolver({name: ["127.0.0.1"] for name in NAMES})
        async with running(AuditLog(audit_path)) as audit:
            proxy = EgressProxy(
                host_end, RuleSet.load(allow, deny or []), audit, session="e2e", resolver=resolver
            )
            try:
                async with running(proxy):
                    yield Egress(proxy, guest_end, guest_dir(root), audit_path)
            finally:
                guest_end.close()
            assert proxy.exit_reason is None


def _web(world: World) -> list[str]:
    """Rules that open web.test on both origins (and their loopback address)."""
    ports = f"{world.https.port},{world.http.port}"
    return [f"web.test:{ports}", f"127.0.0.1:{ports}"]


def _ca_env(world: World) -> dict[str, str]:
    ca = str(world.ca.ca_file)
    return {"CURL_CA_BUNDLE": ca, "SSL_CERT_FILE": ca, "GIT_SSL_CAINFO": ca}


WHO = ["root", "unprivileged"]


def _as(who: str, unpriv: Unpriv) -> Unpriv | None:
    return unpriv if who == "unprivileged" else None


@pytest.mark.parametrize("who", WHO)
async def test_curl_allowed_https_and_http_denied_403(
    world: World, unpriv: Unpriv, who: str
) -> None:
    """curl reaches allowed origins over CONNECT and plain HTTP; a denied host gets 403."""
    https, http = world.https.port, world.http.port
    script = f"""
curl -sS --max-time 10 https://web.test:{https}/hello
curl -sS --max-time 10 http://web.test:{http}/hello
curl -sS --max-time 10 -i http://other.test:{http}/hello | tr -d '\\r'
curl -sS --max-time 10 https://other.test:{https}/hello; echo "https-denied rc=$?"
"""
    async with egress(world, _web(world)) as run:
        result = await run.run(script, unpriv=_as(who, unpriv), env=_ca_env(world))
        decisions = run.decisions()
    lines = result.stdout.splitlines()
    assert lines[:2] == ["hello from the origin", "hello from the origin"], result
    assert "HTTP/1.1 403 Forbidden" in lines
    assert "X-Glove-Egress: denied" in lines
    assert (
        f"glove egress: GET other.test:{http} refused: no rule allows this host and port" in lines
    )
    assert "https-denied rc=56" in lines
    assert "CONNECT tunnel failed, response 403" in result.stderr
    assert decisions == [
        ("connect", "web.test", https, "allow"),
        ("http", "web.test", http, "allow"),
        ("http", "other.test", http, "deny"),
        ("connect", "other.test", https, "deny"),
    ]


@pytest.mark.parametrize("who", WHO)
async def test_urllib_and_the_resolver(world: World, unpriv: Unpriv, who: str) -> None:
    """urllib uses the proxy variables; glibc resolves allowed names, others NXDOMAIN at once."""
    https = world.https.port
    script = f"""
{SYSTEM_PYTHON} -c "import urllib.request as u
print(u.urlopen('https://web.test:{https}/hello', timeout=10).read().decode().strip())"
getent hosts web.test
start=$(date +%s%N); getent hosts other.test; rc=$?; end=$(date +%s%N)
echo "denied rc=$rc ms=$(( (end - start) / 1000000 ))"
"""
    async with egress(world, _web(world)) as run:
        result = await run.run(script, unpriv=_as(who, unpriv), env=_ca_env(world))
        records = run.records()
    lines = result.stdout.splitlines()
    assert lines[0] == "hello from the origin", result
    assert lines[1].split() == ["127.0.0.1", "web.test"]
    rc, ms = lines[2].split()[1:]
    assert rc == "rc=2"
    assert int(ms.removeprefix("ms=")) < 1000  # NXDOMAIN at once, no timeout, no retries loop
    dns = [(r["method"], r["host"], r["decision"]) for r in records if r["proto"] == "dns"]
    assert ("A", "web.test", "allow") in dns
    assert ("A", "other.test", "deny") in dns


async def test_direct_connections_fail_without_the_proxy(world: World) -> None:
    """No route, no host loopback: connect() to the origin's port fails; the origin saw nothing."""
    before = list(world.http.requests)
    script = f"""
ip -4 route; ip -6 route; echo routes-end
{SYSTEM_PYTHON} - <<'EOF'
import errno, socket
for host in ("127.0.0.1", "::1"):
    try:
        socket.create_connection((host, {world.http.port}), timeout=3)
        print("connected", host)
    except OSError as exc:
        print(host, errno.errorcode[exc.errno])
EOF
curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{world.http.port}/hello; echo "curl rc=$?"
"""
    async with egress(world, _web(world)) as run:
        result = await run.run(script)
        assert run.records() == []
    lines = result.stdout.splitlines()
    assert lines[0] == "routes-end", "the namespace has no route at all"
    assert lines[1:3] == ["127.0.0.1 ECONNREFUSED", "::1 ECONNREFUSED"]
    assert "curl rc=7" in lines
    assert world.http.requests == before


async def test_a_name_resolving_to_loopback_is_refused_unless_listed(world: World) -> None:
    """rebind.test resolves to 127.0.0.1: listed as a name only, it is refused with the reason."""
    http = world.http.port
    async with egress(world, [f"rebind.test:{http}"]) as run:
        result = await run.run(f"curl -sS --max-time 10 http://rebind.test:{http}/hello")
        records = run.records()
    assert result.stdout == (
        f"glove egress: GET rebind.test:{http} refused: "
        "the name resolves to a loopback address that no rule lists\n"
    )
    assert records[-1]["decision"] == "deny"


async def test_connect_with_a_different_sni_is_refused(world: World) -> None:
    """CONNECT other.test with SNI web.test (fronting) fails on an +sni rule; a match passes."""
    https = world.https.port
    rules = [f"other.test:{https}+sni", f"web.test:{https}+sni", f"127.0.0.1:{https}"]
    script = f"""
curl -sS --max-time 10 https://web.test:{https}/hello
curl -sS --max-time 10 --connect-to web.test:{https}:other.test:{https} https://web.test:{https}/hello
echo "fronted rc=$?"
"""
    async with egress(world, rules) as run:
        result = await run.run(script, env=_ca_env(world))
        records = [r for r in run.records() if r["kind"] == "egress"]
    assert result.stdout.splitlines() == ["hello from the origin", "fronted rc=35"], result
    assert "alert access denied" in result.stderr
    assert records[-1]["host"] == "other.test"
    assert records[-1]["sni"] == "web.test"
    assert records[-1]["reason"] == "the TLS server name does not match the requested host"


async def test_git_clone_over_https(world: World) -> None:
    """git clone over smart HTTP through CONNECT, trusting the test CA."""
    url = f"https://git.test:{world.https.port}/git/repo.git"
    script = f"cd /tmp && git clone -q {url} clone-$$ && cat clone-$$/README && rm -rf clone-$$"
    rules = [f"git.test:{world.https.port}", f"127.0.0.1:{world.https.port}"]
    async with egress(world, rules) as run:
        result = await run.run(script, env=_ca_env(world))
        decisions = run.decisions()
    assert result.stdout == "hello through the proxy\n", result
    assert decisions
    assert all(d == ("connect", "git.test", world.https.port, "allow") for d in decisions)


async def test_pip_download_from_a_local_index(world: World) -> None:
    """pip download fetches a wheel from an HTTPS index through the proxy (PIP_PROXY)."""
    index = f"https://pypi.test:{world.https.port}/simple/"
    script = (
        f"cd /tmp && {SYSTEM_PYTHON} -m pip download -q --no-deps --no-cache-dir "
        f"--disable-pip-version-check --index-url {index} --cert {world.ca.ca_file} "
        "-d dl-$$ demo-pkg && ls dl-$$ && rm -rf dl-$$"
    )
    rules = [f"pypi.test:{world.https.port}", f"127.0.0.1:{world.https.port}"]
    async with egress(world, rules) as run:
        result = await run.run(script, env={"PIP_CONFIG_FILE": "/dev/null"})
    assert result.stdout.strip() == "demo_pkg-1.0-py3-none-any.whl", result


def _ssh_options(world: World) -> str:
    return (
        f"-F /dev/null -i {world.ssh.client_key} -o UserKnownHostsFile={world.ssh.known_hosts} "
        "-o StrictHostKeyChecking=yes -o BatchMode=yes"
    )


async def test_ssh_and_git_over_ssh_through_socks5(world: World) -> None:
    """ssh via the helper's ProxyCommand (and fd passing); git clone with GIT_SSH_COMMAND."""
    port = world.ssh.port
    options = _ssh_options(world)
    async with egress(world, [f"ssh.test:{port}", f"127.0.0.1:{port}"]) as run:
        helper = f"{SYSTEM_PYTHON} {run.guest}/glove-egress"
        script = f"""
ssh {options} -o ProxyCommand="{helper} connect %h %p" -p {port} root@ssh.test echo ssh-ok
ssh {options} -o ProxyUseFdpass=yes -o ProxyCommand="{helper} connect %h %p --fdpass" \\
    -p {port} root@ssh.test echo fdpass-ok
export GIT_SSH_COMMAND="$GIT_SSH_COMMAND {options}"
cd /tmp && git clone -q ssh://root@ssh.test:{port}{world.repo} ssh-clone-$$ \\
    && cat ssh-clone-$$/README && rm -rf ssh-clone-$$
ssh {options} -o ProxyCommand="{helper} connect %h %p" -p 22 root@other.test true
echo "denied rc=$?"
"""
        result = await run.run(script)
        decisions = run.decisions()
    assert result.stdout.splitlines() == [
        "ssh-ok",
        "fdpass-ok",
        "hello through the proxy",
        "denied rc=255",
    ], result
    assert "refused by the egress rules" in result.stderr
    assert decisions[-1] == ("socks5", "other.test", 22, "deny")
    assert decisions.count(("socks5", "ssh.test", port, "allow")) == 3


async def test_no_udp_leaves_the_namespace(world: World) -> None:
    """A UDP datagram to a host loopback service never arrives; only the DNS stub answers."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.setblocking(False)
    port = server.getsockname()[1]
    script = f"""
{SYSTEM_PYTHON} - <<'EOF'
import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(5):
    u.sendto(b"leak", ("127.0.0.1", {port}))
print("sent")
EOF
"""
    with server:
        async with egress(world, _web(world)) as run:
            result = await run.run(script)
        assert result.stdout == "sent\n"
        with pytest.raises(BlockingIOError):
            server.recv(16)


async def test_killing_the_proxy_ends_the_network_and_never_opens_it(world: World) -> None:
    """With the proxy process killed, the listeners refuse and the origin is still unreachable."""
    import asyncio
    import os
    import signal
    import sys

    http = world.http.port
    with open_dir("egress-kill-") as root:
        host_end, guest_end = socket.socketpair()
        rules = json.dumps(
            {
                "allow": [f"web.test:{http}", f"127.0.0.1:{http}"],
                "names": {"web.test": ["127.0.0.1"]},
            }
        )
        child = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).with_name("_proxy_child.py")),
            str(host_end.fileno()), str(root / "audit.jsonl"), rules,
            pass_fds=[host_end.fileno()], stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        host_end.close()
        assert child.stdout is not None
        assert await child.stdout.readline() == b"ready\n"
        marker = root / "killed"
        script = f"""
curl -sS --max-time 10 http://web.test:{http}/hello
touch {root}/kill-now
while [ ! -e {marker} ]; do sleep 0.05; done
curl -sS --max-time 10 http://web.test:{http}/hello; echo "after rc=$?"
curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{http}/hello; echo "direct rc=$?"
"""
        inside = asyncio.ensure_future(run_inside(guest_dir(root), guest_end, script))
        while not (root / "kill-now").exists():
            await asyncio.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        await child.wait()
        marker.touch()
        result = await inside
        guest_end.close()
    assert result.stdout.splitlines() == ["hello from the origin", "after rc=7", "direct rc=7"], (
        result
    )
    assert "Failed to connect to 127.0.0.1 port 3128" in result.stderr


def test_the_harness_targets_only_loopback() -> None:
    """Every origin of these tests listens on 127.0.0.1 (a guard on the harness itself)."""
    source = Path(__file__).with_name("_origin.py").read_text()
    assert "0.0.0.0" not in source
    assert shlex.quote("127.0.0.1") in source
