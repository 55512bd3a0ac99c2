"""Control socket benchmark: a real gloved against a bare asyncio peer, same clients, same run.

The peer (``_peer.py``, its own process like gloved) is the floor Python's asyncio puts
under any Unix-socket JSON service: it answers the same length-prefixed frames with
``json.loads``/``json.dumps`` and no authentication, strict decoding, registry, deadlines
or caps. Three figures, each printed with its ratio to the peer:

1. **burst**: N clients (default 1,000) at once, each connect + hello + ``health``, from one
   asyncio process: p50/p99 of that whole exchange for the served ones, and how many were
   told ``busy`` (the peer has no cap, so it never says busy; the ratio compares unequal
   work). Then a burst that fits gloved's connection cap (128), where both serve everyone:
   that ratio is like for like.
2. **sequential**: ``health`` round trips on one open connection, p50/p99.
3. **strict decoding**: a 256 KiB request (the request cap) through ``decode_client_frame``
   against plain ``json.loads`` -- how long one maximal frame holds gloved's loop.

    .venv/bin/python benchmarks/control/bench.py [--clients 1000] [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from glove.control import AsyncClient, ControlError, RemoteError
from glove.control._server import MAX_CONNECTIONS
from glove.protocol import CONTROL_MAX_REQUEST_BYTES, decode_client_frame

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from benchmarks import _report  # noqa: E402

START_DEADLINE_S = 10.0


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _start(argv: list[str], socket_path: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_DEADLINE_S
    while not socket_path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{argv[2]} did not start")
        time.sleep(0.02)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _one(socket_path: Path, n: int) -> tuple[str, float]:
    started = time.perf_counter()
    client = AsyncClient(socket_path, client_name=f"bench/{n}", timeout=30.0)
    try:
        await client.connect()
        await client.call("health")
        return "served", time.perf_counter() - started
    except RemoteError as exc:
        return exc.code, time.perf_counter() - started
    except ControlError as exc:
        return type(exc).__name__, time.perf_counter() - started
    finally:
        await client.aclose()


async def burst(socket_path: Path, clients: int) -> dict[str, Any]:
    """N clients at once; latency of the served ones, and the outcome counts."""
    results = await asyncio.gather(*(_one(socket_path, n) for n in range(clients)))
    served = [t * 1000 for outcome, t in results if outcome == "served"]
    return {
        "outcomes": Counter(outcome for outcome, _ in results),
        "p50": statistics.median(served),
        "p99": _percentile(served, 0.99),
    }


async def sequential(socket_path: Path, calls: int) -> dict[str, float]:
    """``health`` round trips on one connection."""
    async with AsyncClient(socket_path) as client:
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            await client.call("health")
            samples.append((time.perf_counter() - started) * 1000)
    return {"p50": statistics.median(samples), "p99": _percentile(samples, 0.99)}


def strict_decoding() -> tuple[float, float]:
    """ms to decode one maximal request: strict then typed, and plain ``json.loads``."""
    body = {"plan": {f"k{i}": ["x" * 40, i, {"n": None}] for i in range(3000)}}
    payload = json.dumps({"id": 1, "method": "plan.validate", "params": body}).encode()
    while len(payload) > CONTROL_MAX_REQUEST_BYTES:
        body["plan"].popitem()
        payload = json.dumps({"id": 1, "method": "plan.validate", "params": body}).encode()

    def best(fn: Any) -> float:
        times = []
        for _ in range(30):
            started = time.perf_counter()
            fn(payload)
            times.append((time.perf_counter() - started) * 1000)
        return min(times)

    return best(decode_client_frame), best(json.loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.clients + 256)), hard))

    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="glove-bench-") as tmp:
        runtime = Path(tmp) / "glove"
        gloved = [sys.executable, "-m", "glove.daemon", "--runtime-dir", str(runtime)]
        peer = [sys.executable, str(HERE / "_peer.py"), str(Path(tmp) / "peer")]
        for name, argv, sock in (
            ("gloved", gloved, runtime / "gloved.sock"),
            ("peer", peer, Path(tmp) / "peer" / "gloved.sock"),
        ):
            proc = _start(argv, sock)
            try:
                # Sequential first: after a burst, gloved spends a second closing the
                # refused connections it keeps half-open (REFUSAL_LINGER_S).
                figures[name] = {"sequential": asyncio.run(sequential(sock, args.calls))}
                figures[name]["burst"] = asyncio.run(burst(sock, args.clients))
                time.sleep(2)  # gloved closes the refused connections it kept half-open
                figures[name]["fit"] = asyncio.run(burst(sock, MAX_CONNECTIONS))
            finally:
                _stop(proc)

    g, p = figures["gloved"], figures["peer"]
    gb, pb = g["burst"], p["burst"]
    print(f"burst of {args.clients} clients (connect + hello + health):")
    print(
        f"  gloved: served {gb['outcomes']['served']}, busy {gb['outcomes']['busy']}, "
        f"other {args.clients - gb['outcomes']['served'] - gb['outcomes']['busy']}; "
        f"p50 {gb['p50']:.1f} ms, p99 {gb['p99']:.1f} ms"
    )
    print(
        f"  peer:   served {pb['outcomes']['served']}; p50 {pb['p50']:.1f} ms, "
        f"p99 {pb['p99']:.1f} ms"
    )
    print(
        f"  ratio gloved/peer: p50 {gb['p50'] / pb['p50']:.2f}x, p99 {gb['p99'] / pb['p99']:.2f}x"
    )
    gf, pf = g["fit"], p["fit"]
    print(f"burst of {MAX_CONNECTIONS} clients (gloved's connection cap):")
    print(
        f"  gloved: served {gf['outcomes']['served']}; p50 {gf['p50']:.1f} ms, "
        f"p99 {gf['p99']:.1f} ms"
    )
    print(
        f"  peer:   served {pf['outcomes']['served']}; p50 {pf['p50']:.1f} ms, "
        f"p99 {pf['p99']:.1f} ms"
    )
    print(
        f"  ratio gloved/peer: p50 {gf['p50'] / pf['p50']:.2f}x, p99 {gf['p99'] / pf['p99']:.2f}x"
    )
    gs, ps = g["sequential"], p["sequential"]
    print(f"sequential health on one connection ({args.calls} calls):")
    print(f"  gloved p50 {gs['p50'] * 1000:.0f} us, p99 {gs['p99'] * 1000:.0f} us")
    print(f"  peer   p50 {ps['p50'] * 1000:.0f} us, p99 {ps['p99'] * 1000:.0f} us")
    print(
        f"  ratio gloved/peer: p50 {gs['p50'] / ps['p50']:.2f}x, p99 {gs['p99'] / ps['p99']:.2f}x"
    )
    _report.row(
        "control", "health round trip p50", gs["p50"], "minimal asyncio peer", ps["p50"], "ms"
    )
    strict, plain = strict_decoding()
    print(f"one {CONTROL_MAX_REQUEST_BYTES // 1024} KiB request decoded on the loop:")
    print(
        f"  strict + typed {strict:.2f} ms, json.loads {plain:.2f} ms, ratio {strict / plain:.2f}x"
    )


if __name__ == "__main__":
    main()
