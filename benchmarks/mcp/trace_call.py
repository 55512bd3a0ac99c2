"""Where one mediated ``tools/call`` spends its time, hop by hop (bench-only trace).

Usage::

    .venv/bin/python benchmarks/mcp/trace_call.py [--calls 2000] [--audit disk|tmpfs|none]
        [--dir PATH] [--floors]

The set-up is ``bench_call.py``'s (one process: a raw client, ``start_mediation`` over a
socketpair, the SDK echo fixture as the upstream). A few of Glove's functions are wrapped
with ``time.perf_counter_ns`` stamps (the wrappers cost about a microsecond each, paid by
the traced run only): the client's write, the endpoint decoding the agent's frame, the
mediator's ``call_tool`` (entry, the decision written, exit), the frame written to the
upstream, the upstream's reply decoded, the log's fdatasync (start, end), the answer
emitted, the client reading it. It prints the median of every hop and the CPU time of this
process and of the upstream per call.

``--floors`` also measures, in the same process, what a bare Python hop costs on this
machine: an asyncio round trip over a socketpair to an echo protocol on the same loop, the
same through a minimal relay protocol (the mediator's shape: agent socket -> relay -> pipe
of a ``cat`` subprocess -> relay -> agent socket) against the ``cat`` alone, one
``os.write`` + ``os.fdatasync`` of a 300-byte line on the disk, and one ``write(2)``.
Nothing here is a test assertion.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import os
import resource
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.mcp import bench_call

from glove.audit import AuditLog
from glove.audit import _log as audit_log
from glove.mcp import _endpoint, _kernel, _upstream, _upstream_stdio

_now = time.perf_counter_ns
#: Stamps of the call being traced, by point name (one call at a time: sequential calls).
STAMPS: dict[str, int] = {}


def _stamp(name: str) -> None:
    STAMPS.setdefault(name, _now())


def _wrap(owner: Any, attr: str, before: str | None, after: str | None = None) -> None:
    original = getattr(owner, attr)
    if asyncio.iscoroutinefunction(original):

        @functools.wraps(original)
        async def traced_async(*args: Any, **kwargs: Any) -> Any:
            if before:
                _stamp(before)
            result = await original(*args, **kwargs)
            if after:
                _stamp(after)
            return result

        setattr(owner, attr, traced_async)
        return

    @functools.wraps(original)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if before:
            _stamp(before)
        result = original(*args, **kwargs)
        if after:
            _stamp(after)
        return result

    setattr(owner, attr, traced)


def _instrument() -> None:
    _wrap(_endpoint, "decode_message", "agent frame decoded")
    _wrap(_kernel.Mediator, "call_tool", "call task runs", "call_tool returns")
    _wrap(_kernel.Mediator, "_write_decision", None, "decision written")
    sent = ("frame to upstream", "write(2) to upstream returns")
    _wrap(_upstream_stdio.StdioTransport, "send", *sent)
    _wrap(_upstream, "decode_message", "upstream reply decoded")
    _wrap(audit_log.AuditLog, "_sync_blocking", "fdatasync starts", "fdatasync ends")
    _wrap(_endpoint.AgentEndpoint, "_emit", "answer emitted")


POINTS = (
    "client writes",
    "agent frame decoded",
    "call task runs",
    "decision written",
    "frame to upstream",
    "write(2) to upstream returns",
    "fdatasync starts",
    "fdatasync ends",
    "upstream reply decoded",
    "call_tool returns",
    "answer emitted",
    "client reads",
)


class _TracedClient(bench_call._Client):
    async def _read(self) -> None:
        while line := await self.reader.readline():
            _stamp("client reads")
            reply: dict[str, Any] = bench_call.json.loads(line)
            future = self.pending.pop(reply.get("id"), None)  # type: ignore[arg-type]
            if future is not None and not future.done():
                future.set_result(reply)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        STAMPS.clear()
        _stamp("client writes")
        return await super().request(method, params)


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _trace(kind: str, calls: int, disk: Path) -> None:
    bench_call._Client = _TracedClient  # type: ignore[misc]
    folder = (disk if kind == "disk" else Path(tempfile.mkdtemp(dir="/dev/shm"))) / kind
    audit: Callable[[str], Any] = (
        bench_call._null_audit if kind == "none" else (lambda path: AuditLog(path, shared=True))
    )
    if kind == "direct":
        call, close = await bench_call._direct()
    else:
        call, close = await bench_call._glove(folder, audit)
    upstream = [p for p in _children() if "sdk_server.py" in _cmdline(p)]
    try:
        for _ in range(200):
            await call()
        hops: dict[str, list[float]] = {}
        totals: list[float] = []
        cpu0, up0 = _self_cpu(), sum(_cpu_of(p) for p in upstream)
        for _ in range(calls):
            await call()
            got = [(name, STAMPS[name]) for name in POINTS if name in STAMPS]
            got.sort(key=lambda item: item[1])
            for (a, ta), (b, tb) in itertools.pairwise(got):
                hops.setdefault(f"{a} -> {b}", []).append((tb - ta) / 1e3)
            totals.append((got[-1][1] - got[0][1]) / 1e3)
        cpu = (_self_cpu() - cpu0) / calls * 1e6
        up = (sum(_cpu_of(p) for p in upstream) - up0) / calls * 1e6
    finally:
        await close()
    print(f"\naudit={kind}: {calls} calls, p50 round trip {statistics.median(totals):.0f} us")
    print(f"  CPU per call: this process {cpu:.0f} us, the upstream {up:.0f} us")
    print("  | hop (in the order seen most often) | p50 us | calls seen |")
    print("  |---|---|---|")
    for name, samples in sorted(hops.items(), key=lambda kv: -len(kv[1])):
        if len(samples) >= calls // 20:
            print(f"  | {name} | {statistics.median(samples):.1f} | {len(samples)} |")


def _children() -> list[int]:
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            if ppid == me:
                found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


class _Relay(asyncio.Protocol):
    """Agent socket -> a subprocess's stdin; its stdout -> back (set by the caller)."""

    def __init__(self, upstream: asyncio.WriteTransport) -> None:
        self.upstream = upstream

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.upstream.write(data)


class _Back(asyncio.SubprocessProtocol):
    """The ``cat`` subprocess's protocol: its stdout goes to the relay, or ends a round trip."""

    def __init__(self) -> None:
        self.relay: _Relay | None = None
        self.reply: asyncio.Future[bytes] | None = None

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if self.relay is not None:
            self.relay.transport.write(data)
        elif self.reply is not None and not self.reply.done():
            self.reply.set_result(data)


class _Client(asyncio.Protocol):
    def __init__(self) -> None:
        self.reply: asyncio.Future[bytes] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.reply is not None and not self.reply.done():
            self.reply.set_result(data)


async def _round_trips(send: Callable[[bytes], None], peer: Any, count: int) -> list[float]:
    loop = asyncio.get_running_loop()
    samples = []
    line = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}\n'
    for _ in range(count):
        peer.reply = loop.create_future()
        started = _now()
        send(line)
        await peer.reply
        samples.append((_now() - started) / 1e3)
    return samples


async def _floors(disk: Path, count: int) -> None:
    loop = asyncio.get_running_loop()
    # 1. A socketpair round trip to an echo protocol on the same loop.
    a, b = socket.socketpair()
    await loop.connect_accepted_socket(_Echo, b)
    _t, client = await loop.connect_accepted_socket(_Client, a)
    echo = await _round_trips(client.transport.write, client, count)
    # 2. A cat subprocess over pipes (the "direct" shape) and 3. through a relay protocol.
    transport, back = await loop.subprocess_exec(_Back, "cat", stderr=None)
    stdin = transport.get_pipe_transport(0)
    assert isinstance(stdin, asyncio.WriteTransport)
    direct = await _round_trips(stdin.write, back, count)
    c, d = socket.socketpair()
    _r, relay = await loop.connect_accepted_socket(lambda: _Relay(stdin), d)
    _c, client2 = await loop.connect_accepted_socket(_Client, c)
    back.relay = relay
    relayed = await _round_trips(client2.transport.write, client2, count)
    back.relay = None
    transport.close()
    # 4. fdatasync of a 300-byte line on the disk, and a plain write.
    fd = os.open(disk / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    syncs, writes = [], []
    line = b"x" * 299 + b"\n"
    for _ in range(count // 4):
        started = _now()
        os.write(fd, line)
        mid = _now()
        os.fdatasync(fd)
        writes.append((mid - started) / 1e3)
        syncs.append((_now() - mid) / 1e3)
    os.close(fd)
    rows = (
        ("socketpair round trip, echo protocol on the same loop", statistics.median(echo)),
        ("cat over pipes (the direct shape)", statistics.median(direct)),
        ("the same through a bare relay protocol (socketpair)", statistics.median(relayed)),
        ("relay hop added", statistics.median(relayed) - statistics.median(direct)),
        ("write(2) of a 300-byte line (O_APPEND, disk)", statistics.median(writes)),
        ("fdatasync of it", statistics.median(syncs)),
    )
    print("\nfloors (p50 us):")
    for name, value in rows:
        print(f"  {name + ':':56s} {value:8.1f}")


async def main() -> None:
    """Trace the chosen rows, then the floors."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--audit", choices=("direct", "disk", "tmpfs", "none"), action="append")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--floors", action="store_true")
    args = parser.parse_args()
    _instrument()
    disk = Path(tempfile.mkdtemp(prefix="glove-trace-call-", dir=args.dir))
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    try:
        for kind in args.audit or ["disk"]:
            await _trace(kind, args.calls, disk)
        if args.floors:
            await _floors(disk, args.calls)
    finally:
        shutil.rmtree(disk, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
