"""gloved sessions against bubblewrap, in one run: latency, throughput, status under load.

Run with the project interpreter (as root or as any user with namespaces)::

    .venv/bin/python benchmarks/sessions/bench.py [--sessions 100] [--held 100] [--json out.json]

It makes a private Glove home (``glove setup``) with two harnesses, ``true`` (``/bin/true``)
and ``hold`` (``/bin/sleep 600``), starts a real ``gloved`` and measures through the real
socket with the async client, interleaving the bubblewrap peer so drift hits both alike:

``create->running``   ``session.create`` sent until the watch shows ``running``
``create->terminal``  ``session.create`` sent until the watch shows ``terminal`` (the
                      receipt is durable and checkpointed by then)
``bwrap``             ``bwrap --unshare-all --die-with-parent`` (the default profile's
                      binds) running ``/bin/true``, spawned and reaped from the same loop
``sessions/s``        at 1, 10 and 50 concurrent, against bwrap launches/s at the same
                      concurrency
``status p99``        with ``--held`` sandboxes running at once (``hold``), the latency of
                      ``session.status`` calls made while they run
``CPU per session``   gloved's and its launcher process's CPU time (``/proc/PID/stat``) over
                      the one-at-a-time sessions, per session (clock ticks: about 10 ms
                      each, so a mean over many sessions)

It prints p50/p99 per case and the ratios the issue sets as goals: create->terminal within
2x of a bubblewrap launch, and status p99 under 50 ms with 100 sandboxes held.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2]))

from benchmarks import _report  # noqa: E402
from benchmarks.launch.bench import bwrap_argv, ensure_bwrap  # noqa: E402

LIMITS = {
    "wall_time_s": 900,
    "cpu_time_s": 60,
    "memory_bytes": 268435456,
    "pids": 64,
    "disk_bytes": 67108864,
    "output_bytes": 1048576,
}
#: ``session.status`` p99 with ``--held`` sandboxes running must stay under this (issue 22).
STATUS_GOAL_MS = 50.0
HARNESSES = """
[harnesses.true]
argv = ["/bin/true"]

[harnesses.hold]
argv = ["/bin/sleep", "600"]
"""


def plan(harness: str) -> str:
    """A plan v1 for ``harness``."""
    return json.dumps(
        {
            "version": 1,
            "harness": harness,
            "exposures": [],
            "limits": LIMITS,
            "network": "none",
            "terminal": "pipes",
        }
    )


def cpu_ms(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far, in milliseconds (0 if gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (gloved's: its launcher process)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def pct(samples: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``samples`` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class Home:
    """A private Glove home with a running gloved."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="glove-bench-sessions-", dir="/var/tmp"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        self.env.update(
            HOME=str(self.base),
            XDG_CONFIG_HOME=str(self.base / "config"),
            XDG_STATE_HOME=str(self.base / "state"),
            XDG_RUNTIME_DIR=str(self.base / "run"),
        )
        (self.base / "run").mkdir(mode=0o700)
        subprocess.run(
            [sys.executable, "-m", "glove", "setup"],
            env=self.env,
            check=True,
            capture_output=True,
        )
        text = (self.base / "config" / "glove" / "gloved.toml").read_text()
        text = text.replace("max_running = 64", "max_running = 256")
        (self.base / "config" / "glove" / "gloved.toml").write_text(text + HARNESSES)
        self.runtime = self.base / "run" / "glove"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "glove.daemon"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.base / "gloved.log", "wb"),  # noqa: SIM115 - lives with the daemon
        )
        deadline = time.monotonic() + 30
        while not (self.runtime / "gloved.sock").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit((self.base / "gloved.log").read_text())
            time.sleep(0.02)
        time.sleep(0.2)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.base, ignore_errors=True)


async def one_session(client: Any, harness: str) -> tuple[float, float, str]:
    """Create a session and watch it; (ms to running, ms to terminal, outcome kind)."""
    t0 = time.perf_counter()
    view = await client.call("session.create", {"plan": plan(harness)})
    running = terminal = None
    last = view
    async with client.stream("session.watch", {"session_id": view["session_id"]}) as changes:
        async for change in changes:
            now = time.perf_counter()
            if change["state"] == "running" and running is None:
                running = now
            if change["state"] == "terminal":
                terminal = now
            last = change
    assert terminal is not None, last
    kind = (last.get("outcome") or {}).get("kind", "?")
    return ((running or terminal) - t0) * 1000, (terminal - t0) * 1000, kind


async def one_bwrap(argv: list[str], ws: str) -> float:
    """One bubblewrap launch of /bin/true from the loop; ms."""
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=ws, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    if await proc.wait() != 0:
        raise RuntimeError("bwrap failed")
    return (time.perf_counter() - t0) * 1000


async def measure(args: argparse.Namespace, home: Home) -> dict[str, Any]:
    from glove.control import AsyncClient

    ws = tempfile.mkdtemp(prefix="glove-bench-ws-")
    bwrap = bwrap_argv(ensure_bwrap(), ws)
    clients = [AsyncClient.for_runtime_dir(home.runtime) for _ in range(8)]
    for client in clients:
        await client.connect()
    out: dict[str, Any] = {}
    try:
        # -- latency, one at a time, interleaved with bwrap -----------------------------------
        to_running: list[float] = []
        to_terminal: list[float] = []
        bw: list[float] = []
        launchers = children(home.proc.pid)
        cpu = {"gloved": 0.0, "launcher": 0.0}
        for i in range(args.warmup + args.sessions):
            before = cpu_ms(home.proc.pid), sum(map(cpu_ms, launchers))
            r, t, kind = await one_session(clients[0], "true")
            after = cpu_ms(home.proc.pid), sum(map(cpu_ms, launchers))
            b = await one_bwrap(bwrap, ws)
            if kind != "exited":
                raise RuntimeError(f"a session ended {kind}")
            if i >= args.warmup:
                to_running.append(r)
                to_terminal.append(t)
                bw.append(b)
                cpu["gloved"] += (after[0] - before[0]) / args.sessions
                cpu["launcher"] += (after[1] - before[1]) / args.sessions
        out["cpu_ms_per_session"] = cpu
        out["latency_ms"] = {
            name: {"p50": pct(s, 0.5), "p99": pct(s, 0.99), "mean": statistics.fmean(s)}
            for name, s in (
                ("create->running", to_running),
                ("create->terminal", to_terminal),
                ("bwrap", bw),
            )
        }
        # -- throughput at 1, 10, 50 concurrent -------------------------------------------------
        rates: dict[str, dict[str, float]] = {}
        for concurrency in (1, 10, 50):
            total = max(concurrency * 4, 20)
            sem = asyncio.Semaphore(concurrency)

            async def gated_session(i: int, sem: asyncio.Semaphore = sem) -> None:
                async with sem:
                    await one_session(clients[i % len(clients)], "true")

            async def gated_bwrap(sem: asyncio.Semaphore = sem) -> None:
                async with sem:
                    await one_bwrap(bwrap, ws)

            t0 = time.perf_counter()
            await asyncio.gather(*(gated_session(i) for i in range(total)))
            sessions_s = total / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            await asyncio.gather(*(gated_bwrap() for _ in range(total)))
            bwrap_s = total / (time.perf_counter() - t0)
            rates[str(concurrency)] = {"sessions_per_s": sessions_s, "bwrap_per_s": bwrap_s}
        out["throughput"] = rates
        # -- status latency with many sandboxes held --------------------------------------------
        held = []
        for i in range(args.held):
            view = await clients[i % len(clients)].call("session.create", {"plan": plan("hold")})
            held.append(view["session_id"])
        deadline = time.monotonic() + 120
        while True:
            page = await clients[0].call("session.list", {"state": "running", "limit": 500})
            if len(page["sessions"]) >= args.held or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        running_now = len(page["sessions"])
        status: list[float] = []
        for i in range(args.status_calls):
            t0 = time.perf_counter()
            await clients[i % len(clients)].call(
                "session.status", {"session_id": held[i % len(held)]}
            )
            status.append((time.perf_counter() - t0) * 1000)
        out["status_under_load"] = {
            "held_running": running_now,
            "p50_ms": pct(status, 0.5),
            "p99_ms": pct(status, 0.99),
        }
        gate = asyncio.Semaphore(16)  # below a connection's in-flight limit (32)

        async def stop(i: int, session_id: str) -> None:
            async with gate:
                await clients[i % len(clients)].call("session.stop", {"session_id": session_id})

        await asyncio.gather(*(stop(i, s) for i, s in enumerate(held)))
    finally:
        for client in clients:
            await client.aclose()
        shutil.rmtree(ws, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--held", type=int, default=100)
    parser.add_argument("--status-calls", type=int, default=500)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    home = Home()
    try:
        result = asyncio.run(measure(args, home))
    finally:
        home.close()
    lat = result["latency_ms"]
    print(f"{'case':<18} {'p50 ms':>8} {'p99 ms':>8}")
    for name, row in lat.items():
        print(f"{name:<18} {row['p50']:>8.2f} {row['p99']:>8.2f}")
    cpu = result["cpu_ms_per_session"]
    print(f"CPU per session: gloved {cpu['gloved']:.1f} ms, its launcher {cpu['launcher']:.1f} ms")
    ratio50 = lat["create->terminal"]["p50"] / lat["bwrap"]["p50"]
    ratio99 = lat["create->terminal"]["p99"] / lat["bwrap"]["p99"]
    print(f"create->terminal / bwrap: p50 {ratio50:.2f}x, p99 {ratio99:.2f}x (goal: <= 2x)")
    _report.row(
        "sessions",
        "create->terminal p50",
        lat["create->terminal"]["p50"],
        "bwrap",
        lat["bwrap"]["p50"],
        "ms",
        goal=2.0,
    )
    for concurrency, row in result["throughput"].items():
        ratio = row["sessions_per_s"] / row["bwrap_per_s"]
        print(
            f"concurrency {concurrency:>2}: {row['sessions_per_s']:7.1f} sessions/s, "
            f"bwrap {row['bwrap_per_s']:7.1f}/s ({ratio:.2f}x)"
        )
        _report.row(
            "sessions",
            f"launches/s at {concurrency} concurrent",
            row["sessions_per_s"],
            "bwrap",
            row["bwrap_per_s"],
            "/s",
            better="higher",
            goal=0.5,
        )
    load = result["status_under_load"]
    print(
        f"session.status with {load['held_running']} sandboxes running: "
        f"p50 {load['p50_ms']:.2f} ms, p99 {load['p99_ms']:.2f} ms (goal: p99 < 50 ms)"
    )
    _report.row(
        "sessions",
        f"session.status p99, {args.held} held",
        load["p99_ms"],
        "goal",
        STATUS_GOAL_MS,
        "ms",
        goal=1.0,
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
