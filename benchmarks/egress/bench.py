"""Egress: added latency per request and bulk throughput, direct vs Glove vs sandbox-runtime.

Usage (as root: the Glove path builds a network namespace)::

    .venv/bin/python benchmarks/egress/bench.py [--requests 2000] [--bytes 268435456]
                                                [--rounds 3] [--no-peer]

One origin (``origin.py``, a threaded raw-socket server on 127.0.0.1) and one client
(``client.py``, the same stdlib code for every target, one new connection per request, as
the proxy serves one request per connection) in the same run:

* ``direct``: the client in the host's namespace connects to the origin;
* ``glove``: the client runs in a fresh network namespace behind the real helper
  (``glove-egress``), which hands each connection to the proxy actor in this process over
  an inherited socketpair; the proxy decides, resolves (an IP literal here), writes its
  audit record with ``fdatasync`` to an ``AuditLog`` on disk, then connects. ``forward``
  is an absolute-form GET, ``connect`` a CONNECT tunnel;
* ``glove-tmpfs``: the same with the audit log on /dev/shm, to separate the fsync's cost;
* ``floor``: ``forwarder.py``, a blocking CONNECT-only splice forwarder with no rules, no
  audit and no namespace hop: the second TCP connection every relay needs, and nothing
  else. What Glove adds beyond it is Glove's own cost;
* ``srt``: Anthropic's sandbox-runtime HTTP proxy (npm ``@anthropic-ai/sandbox-runtime``,
  allow-all filter) on host loopback, installed on first use under
  ``/var/tmp/glove-bench/egress-peer``. The client talks to it directly, without the
  socat bridges srt puts in front of it in a sandbox: this is its proxy core only.

Latency is p50/p99 of per-request wall time seen by the client; "added" is the proxied
p50 minus the direct p50 of the same run. Throughput is the best of ``--rounds`` downloads
of ``--bytes``. Ratios only; nothing here is a test assertion.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from glove.actors import running
from glove.audit import AuditLog
from glove.egress import EgressProxy, RuleSet, write_guest_files

HERE = Path(__file__).resolve().parent
PYTHON = "/usr/bin/python3"
PEER_DIR = Path("/var/tmp/glove-bench/egress-peer")
PEER_PACKAGE = "@anthropic-ai/sandbox-runtime@0.0.83"
PROXY_PORT = 3128


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _run(argv: list[str], *, pass_fds: tuple[int, ...] = ()) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        *argv, pass_fds=pass_fds, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {err.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def _client(kind: str, mode: str, proxy: str, origin: str, amount: int) -> list[str]:
    return [PYTHON, str(HERE / "client.py"), kind, mode, proxy, origin, str(amount)]


@asynccontextmanager
async def _glove(
    origin_port: int, audit_dir: str, guest: Path
) -> AsyncIterator[tuple[socket.socket, EgressProxy]]:
    host_end, guest_end = socket.socketpair()
    async with running(AuditLog(Path(audit_dir) / "egress-bench.jsonl")) as audit:
        proxy = EgressProxy(
            host_end, RuleSet.load([f"127.0.0.1:{origin_port}"]), audit, session="bench"
        )
        async with running(proxy):
            try:
                yield guest_end, proxy
            finally:
                guest_end.close()


def _inside(guest: Path, fd: int, client: list[str]) -> list[str]:
    helper = [PYTHON, str(guest / "glove-egress"), str(fd), "--no-dns", "--", *client]
    script = "ip link set lo up && exec " + " ".join(helper)
    return ["unshare", "--net", "--", "/bin/sh", "-c", script]


def _start_peer() -> tuple[subprocess.Popen[bytes], int] | None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        print("peer: node/npm missing, skipped")
        return None
    package = PEER_DIR / "node_modules" / "@anthropic-ai" / "sandbox-runtime"
    if not package.exists():
        PEER_DIR.mkdir(parents=True, exist_ok=True)
        (PEER_DIR / "package.json").write_text(
            '{"name": "glove-egress-bench-peer", "private": true}\n'
        )
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", PEER_PACKAGE],
            cwd=PEER_DIR, check=True,
        )  # fmt: skip
    process = subprocess.Popen(
        ["node", str(HERE / "srt_proxy.mjs"), str(package)], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    return process, int(process.stdout.readline())


async def _latency(targets: dict[str, list[str] | tuple[list[str], int]]) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    for name, spec in targets.items():
        argv, fds = (spec, ()) if isinstance(spec, list) else (spec[0], (spec[1],))
        results[name] = (await _run(argv, pass_fds=fds))["us"]
    return results


async def main() -> None:
    """Run every target and print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--bytes", type=int, default=256 * 1024 * 1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args()
    if os.getuid() != 0:
        sys.exit("run as root: the glove path builds a network namespace")
    origin = subprocess.Popen([PYTHON, str(HERE / "origin.py")], stdout=subprocess.PIPE)
    assert origin.stdout is not None
    origin_port = int(origin.stdout.readline())
    floor = subprocess.Popen([PYTHON, str(HERE / "forwarder.py")], stdout=subprocess.PIPE)
    assert floor.stdout is not None
    floor_proxy = f"127.0.0.1:{int(floor.stdout.readline())}"
    peer = None if args.no_peer else _start_peer()
    target = f"127.0.0.1:{origin_port}"
    inner_proxy = f"127.0.0.1:{PROXY_PORT}"
    latency: dict[str, list[float]] = {}
    bulk: dict[str, list[float]] = {}
    try:
        with (
            tempfile.TemporaryDirectory(dir="/var/tmp") as disk,
            tempfile.TemporaryDirectory(dir="/dev/shm") as shm,
        ):
            guest = Path(disk) / "guest"
            guest.mkdir()
            write_guest_files(guest)
            n = args.requests
            latency["direct"] = (await _run(_client("latency", "direct", "-", target, n)))["us"]
            floor_run = await _run(_client("latency", "connect", floor_proxy, target, n))
            latency["floor connect"] = floor_run["us"]
            for label, audit_dir in (("glove", disk), ("glove-tmpfs", shm)):
                async with _glove(origin_port, audit_dir, guest) as (guest_end, _):
                    fd = guest_end.fileno()
                    for mode in ("forward", "connect"):
                        argv = _inside(guest, fd, _client("latency", mode, inner_proxy, target, n))
                        latency[f"{label} {mode}"] = (await _run(argv, pass_fds=(fd,)))["us"]
            if peer is not None:
                srt = f"127.0.0.1:{peer[1]}"
                for mode in ("forward", "connect"):
                    latency[f"srt {mode}"] = (await _run(_client("latency", mode, srt, target, n)))[
                        "us"
                    ]
            for _ in range(args.rounds):
                run = await _run(_client("bulk", "direct", "-", target, args.bytes))
                bulk.setdefault("direct", []).append(run["bytes"] / run["seconds"])
                run = await _run(_client("bulk", "connect", floor_proxy, target, args.bytes))
                bulk.setdefault("floor connect", []).append(run["bytes"] / run["seconds"])
                async with _glove(origin_port, disk, guest) as (guest_end, _):
                    fd = guest_end.fileno()
                    for mode in ("connect", "forward"):
                        argv = _inside(
                            guest, fd, _client("bulk", mode, inner_proxy, target, args.bytes)
                        )
                        run = await _run(argv, pass_fds=(fd,))
                        bulk.setdefault(f"glove {mode}", []).append(run["bytes"] / run["seconds"])
                if peer is not None:
                    run = await _run(
                        _client("bulk", "connect", f"127.0.0.1:{peer[1]}", target, args.bytes)
                    )
                    bulk.setdefault("srt connect", []).append(run["bytes"] / run["seconds"])
    finally:
        origin.kill()
        floor.kill()
        if peer is not None:
            peer[0].kill()
    _report(latency, bulk, args)


def _report(
    latency: dict[str, list[float]], bulk: dict[str, list[float]], args: argparse.Namespace
) -> None:
    base = statistics.median(latency["direct"])
    print(f"latency: {args.requests} requests, one connection each (microseconds)")
    print(f"{'target':<22}{'p50':>9}{'p99':>9}{'added p50':>11}{'p50 ratio':>11}")
    for name, samples in latency.items():
        p50, p99 = statistics.median(samples), _percentile(samples, 0.99)
        print(f"{name:<22}{p50:>9.0f}{p99:>9.0f}{p50 - base:>11.0f}{p50 / base:>10.2f}x")
    best = max(bulk["direct"])
    print(f"\nthroughput: best of {args.rounds} downloads of {args.bytes} bytes (MB/s)")
    print(f"{'target':<22}{'MB/s':>9}{'direct/this':>13}")
    for name, rates in bulk.items():
        rate = max(rates)
        print(f"{name:<22}{rate / 1e6:>9.0f}{best / rate:>12.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
