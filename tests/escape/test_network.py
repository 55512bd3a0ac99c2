"""Escape attempts over the network: routes, DNS, the host's loopback services."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.escape._harness import Sandbox


@pytest.fixture
def host_service() -> Iterator[int]:
    """A TCP service listening on the host's loopback."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv.getsockname()[1]
    srv.close()


def test_network_is_loopback_only(sb: Sandbox, host_service: int) -> None:
    """Only lo exists and works; no routes, no outbound TCP/UDP, no DNS, no host loopback."""
    with socket.create_connection(("127.0.0.1", host_service), timeout=3):
        pass  # control: the host service accepts connections on the host
    report = sb.probe("net", {"host_port": host_service})
    assert report["loopback"] == {"ok": "ping"}, "control: loopback must be up and usable"
    assert report["ifaces"] == ["lo"], report["ifaces"]
    assert report["routes_v4"] == [], report["routes_v4"]
    assert report["routes_v6"] == [], report["routes_v6"]
    for key in ("tcp_1.1.1.1:80", "tcp_gateway", "udp_8.8.8.8:53", "tcp6"):
        assert report[key].get("errno") in {"ENETUNREACH", "EHOSTUNREACH", "EADDRNOTAVAIL"}, (
            key,
            report[key],
        )
    assert "ok" not in report["dns"], report["dns"]
    assert report["tcp_host_loopback"].get("errno") == "ECONNREFUSED", report


def test_network_none_flag_is_accepted(sb: Sandbox) -> None:
    """An explicit --network none gives the same loopback-only namespace."""
    report = sb.probe("net", flags=["--network", "none"])
    assert report["loopback"] == {"ok": "ping"}
    assert report["ifaces"] == ["lo"]
    assert report["tcp_1.1.1.1:80"].get("errno") == "ENETUNREACH"


NETWORK_TOOLS = {
    "curl": ["curl", "-sS", "--max-time", "3", "http://1.1.1.1/"],
    "wget": ["wget", "-q", "-T", "3", "-O", "/dev/null", "http://1.1.1.1/"],
    "ping": ["ping", "-c", "1", "-W", "2", "1.1.1.1"],
    "nc": ["nc", "-z", "-w", "2", "1.1.1.1", "80"],
    "getent": ["getent", "hosts", "example.com"],
    "ssh": ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "git@github.com"],
    "bash_dev_tcp": ["bash", "-c", "exec 3<>/dev/tcp/1.1.1.1/80"],
}


def test_network_tools_cannot_reach_out(sb: Sandbox) -> None:
    """curl, wget, ping, nc, getent, ssh and bash's /dev/tcp all fail (127 = tool absent)."""
    report = sb.probe("run", {"argvs": NETWORK_TOOLS})
    ran = {k: v for k, v in report.items() if v.get("rc") not in (None, 127)}
    assert "bash_dev_tcp" in ran, f"control: bash runs inside: {report}"
    reached = {k: v for k, v in ran.items() if v["rc"] == 0}
    assert reached == {}, f"network tools succeeded: {reached}"
