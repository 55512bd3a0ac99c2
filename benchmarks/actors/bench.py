"""Actor runtime benchmark: glove.actors (asyncio) versus pykka (threads), same machine, same run.

Spawns N actors of each kind, then measures sequential ask round trips spread over all of
them (p50/p99), spawn cost, and memory per actor (RSS and virtual size deltas). Each
runtime runs in its own fresh interpreter so their memory does not mix. Prints the two
side by side with ratios.

    .venv/bin/python benchmarks/actors/bench.py [--actors 1000] [--asks 20000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path


def _mem() -> tuple[int, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmSize"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmSize"]


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_glove(n: int, asks: int) -> dict[str, float]:
    import asyncio

    from glove.actors import Actor

    class Echo(Actor):
        async def handle(self, msg: object) -> object:
            return msg

    async def main() -> dict[str, float]:
        rss0, vm0 = _mem()
        t0 = time.perf_counter()
        actors = [Echo(f"echo-{i}", mailbox_size=16) for i in range(n)]
        tasks = [asyncio.ensure_future(a.run()) for a in actors]
        await asyncio.gather(*(a.started.wait() for a in actors))
        spawn_s = time.perf_counter() - t0
        rss1, vm1 = _mem()
        lat: list[float] = []
        for i in range(asks):
            a = actors[i % n]
            s = time.perf_counter()
            await a.ask(i, timeout=5.0)
            lat.append(time.perf_counter() - s)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return {
            "spawn_ms_per_actor": spawn_s * 1000 / n,
            "rss_kib_per_actor": (rss1 - rss0) / 1024 / n,
            "vm_kib_per_actor": (vm1 - vm0) / 1024 / n,
            "threads": threading.active_count(),
            "ask_p50_us": _pct(lat, 0.50) * 1e6,
            "ask_p99_us": _pct(lat, 0.99) * 1e6,
        }

    return asyncio.run(main())


def run_pykka(n: int, asks: int) -> dict[str, float]:
    import pykka

    class Echo(pykka.ThreadingActor):  # type: ignore[misc]
        def on_receive(self, message: object) -> object:
            return message

    rss0, vm0 = _mem()
    t0 = time.perf_counter()
    refs = [Echo.start() for _ in range(n)]
    spawn_s = time.perf_counter() - t0
    rss1, vm1 = _mem()
    threads = threading.active_count()
    lat: list[float] = []
    for i in range(asks):
        s = time.perf_counter()
        refs[i % n].ask(i, timeout=5.0)
        lat.append(time.perf_counter() - s)
    pykka.ActorRegistry.stop_all()
    return {
        "spawn_ms_per_actor": spawn_s * 1000 / n,
        "rss_kib_per_actor": (rss1 - rss0) / 1024 / n,
        "vm_kib_per_actor": (vm1 - vm0) / 1024 / n,
        "threads": threads,
        "ask_p50_us": _pct(lat, 0.50) * 1e6,
        "ask_p99_us": _pct(lat, 0.99) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=1000)
    parser.add_argument("--asks", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per runtime; medians shown")
    parser.add_argument("--only", choices=["glove", "pykka"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        fn = run_glove if args.only == "glove" else run_pykka
        print(json.dumps(fn(args.actors, args.asks)))
        return
    results: dict[str, dict[str, float]] = {}
    for name in ("glove", "pykka"):
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--only", name, "--actors", str(args.actors),
                 "--asks", str(args.asks)],
                capture_output=True, text=True, check=True, timeout=600,
            )  # fmt: skip
            runs.append(json.loads(out.stdout))
        results[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    g, p = results["glove"], results["pykka"]
    print(f"{args.actors} actors, {args.asks} sequential asks, median of {args.repeat} runs")
    print(f"{'metric':<22}{'glove.actors':>14}{'pykka':>14}{'pykka/glove':>14}")
    for key in ("ask_p50_us", "ask_p99_us", "spawn_ms_per_actor", "rss_kib_per_actor",
                "vm_kib_per_actor", "threads"):  # fmt: skip
        ratio = p[key] / g[key] if g[key] else float("inf")
        print(f"{key:<22}{g[key]:>14.2f}{p[key]:>14.2f}{ratio:>13.1f}x")


if __name__ == "__main__":
    main()
