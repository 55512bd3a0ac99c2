"""Receipts benchmark: what signed checkpoints and proofs cost, against the HMAC-only journal.

Two parts, both in one run on one disk, printed as ratios:

1. **Throughput** of durable receipts for 1 and 32 concurrent appenders, alternating short
   rounds of three modes so the disk's drift hits all alike:

   * ``hmac``: ``Journal.append`` on a receipts journal (the HMAC chain only; the peer);
   * ``tree``: ``TransparencyLog.append_receipt`` (the same, plus the Merkle tree upkeep);
   * ``sealed``: ``append_receipt`` then ``checkpoint()`` for every receipt, as the daemon
     does at a terminal receipt (sign, store the checkpoint: temp, fsync, rename, fsync dir).

2. **Per-receipt costs** in a log of N receipts, each as a ratio to one durable ``hmac``
   append measured in the same run: signing a checkpoint (Ed25519 over the note), generating
   an inclusion proof from ``tree-hashes``, building a whole bundle (``export_bundle``), and
   verifying one (``verify_bundle``).

    .venv/bin/python benchmarks/receipts/bench.py [--seconds 3] [--rounds 4] [--leaves 20000]
        [--dir PATH] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from glove.journal import (
    Checkpoint,
    JournalKind,
    JournalLimits,
    RecordKind,
    SigningKey,
    open_journal,
    open_transparency_log,
    sign_checkpoint,
    verify_bundle,
)

KEY = os.urandom(32)
SIGNING_KEY = SigningKey("bench.example/receipts", os.urandom(32))
LIMITS = JournalLimits(max_segment_bytes=256 * 1024 * 1024, max_segment_records=10_000_000)
PAYLOAD_PAD = 200  # bytes of padding in each ~256-byte receipt


def _payload(n: int) -> bytes:
    return json.dumps({"session_id": f"s{n % 1000}", "n": n, "pad": "x" * PAYLOAD_PAD}).encode()


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _drive(
    writers: int, seconds: float, one: Callable[[int], Awaitable[None]]
) -> tuple[int, float]:
    stop = time.perf_counter() + seconds
    count = 0

    async def appender(offset: int) -> None:
        nonlocal count
        n = offset
        while time.perf_counter() < stop:
            await one(n)
            n += writers
            count += 1

    began = time.perf_counter()
    await asyncio.gather(*(appender(i) for i in range(writers)))
    return count, time.perf_counter() - began


async def _round(root: Path, mode: str, writers: int, seconds: float) -> tuple[int, float]:
    path = root / f"{mode}-{writers}"
    if mode == "hmac":
        journal = await open_journal(path, KEY, kind=JournalKind.RECEIPTS, limits=LIMITS)

        async def append(n: int) -> None:
            await journal.append(_payload(n), kind=RecordKind.RECEIPT)

        try:
            return await _drive(writers, seconds, append)
        finally:
            await journal.close()
    log = await open_transparency_log(path, KEY, SIGNING_KEY, limits=LIMITS)

    async def receipt(n: int) -> None:
        await log.append_receipt(_payload(n))
        if mode == "sealed":
            await log.checkpoint()

    try:
        return await _drive(writers, seconds, receipt)
    finally:
        await log.close(seal=False)


def throughput(root: Path, seconds: float, rounds: int) -> dict[str, dict[str, float]]:
    """Receipts per second of each mode, for 1 and 32 appenders, alternating rounds."""
    out: dict[str, dict[str, float]] = {}
    for writers in (1, 32):
        totals = {mode: [0, 0.0] for mode in ("hmac", "tree", "sealed")}
        for _ in range(rounds):
            for mode, total in totals.items():
                count, elapsed = asyncio.run(_round(root, mode, writers, seconds / rounds))
                total[0] += count
                total[1] += elapsed
                shutil.rmtree(root / f"{mode}-{writers}")
        rates = {mode: count / elapsed for mode, (count, elapsed) in totals.items()}
        out[str(writers)] = {
            **{f"{mode}_per_s": rate for mode, rate in rates.items()},
            "tree_vs_hmac": rates["tree"] / rates["hmac"],
            "sealed_vs_hmac": rates["sealed"] / rates["hmac"],
        }
    return out


async def _once(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def costs(root: Path, leaves: int, repeat: int) -> dict[str, float]:
    """Per-receipt costs in a log of ``leaves`` receipts, as ratios to one durable append.

    Samples are interleaved (one peer append, then one of each cost, repeated) so the disk's
    drift hits the peer and the costs alike.
    """
    journal = await open_journal(root / "peer", KEY, kind=JournalKind.RECEIPTS, limits=LIMITS)
    log = await open_transparency_log(root / "costs", KEY, SIGNING_KEY, limits=LIMITS)
    for start in range(0, leaves, 256):
        await asyncio.gather(*(log.append_receipt(_payload(n)) for n in range(start, start + 256)))
    sealed = await log.checkpoint()
    head = Checkpoint(SIGNING_KEY.name, sealed.size, sealed.root)
    counter = iter(range(leaves, 10**9))
    bundle = await log.export_bundle("s7")
    tree = log._tree  # the proof alone, without the bundle around it
    assert tree is not None

    async def append() -> None:
        await journal.append(_payload(0), kind=RecordKind.RECEIPT)

    async def sign() -> None:
        sign_checkpoint(head, SIGNING_KEY)

    async def checkpoint() -> None:
        await log.append_receipt(_payload(next(counter)))
        await log.checkpoint()

    async def proof() -> None:
        await log._run(tree.inclusion_proof, leaves // 3, sealed.size)

    async def export() -> None:
        await log.export_bundle("s7")

    async def verify() -> None:
        verify_bundle(bundle, SIGNING_KEY.verifier)

    cases = {
        "sign": sign,
        "append+checkpoint": checkpoint,
        "inclusion_proof": proof,
        "export_bundle": export,
        "verify_bundle": verify,
    }
    peer: list[float] = []
    measured: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            peer.append(await _once(append))
            measured[name].append(await _once(fn))
    await log.close(seal=False)
    await journal.close()
    base = _pct(peer, 0.5)
    out = {"leaves": float(leaves), "hmac_append_p50_ms": base * 1e3}
    for name, samples in measured.items():
        out[f"{name}_p50_ms"] = _pct(samples, 0.5) * 1e3
        out[f"{name}_vs_append"] = _pct(samples, 0.5) / base
    return out


def main() -> None:
    """Run both parts and print them (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per mode and cell")
    parser.add_argument("--rounds", type=int, default=4, help="alternations per cell")
    parser.add_argument("--leaves", type=int, default=20_000, help="log size for the costs")
    parser.add_argument("--repeat", type=int, default=200, help="samples per cost")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (same disk)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="glove-receipts-bench-", dir=args.dir))
    try:
        result = {
            "throughput": throughput(root, args.seconds, args.rounds),
            "costs": asyncio.run(costs(root, args.leaves, args.repeat)),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print("receipts/s (durable), same run, alternating rounds")
    heads = ("appenders", "hmac/s", "tree/s", "sealed/s", "tree/hmac", "sealed/hmac")
    print(" ".join(f"{h:>11}" for h in heads))
    for writers, row in result["throughput"].items():
        print(
            f"{writers:>11} {row['hmac_per_s']:11.0f} {row['tree_per_s']:11.0f} "
            f"{row['sealed_per_s']:11.0f} {row['tree_vs_hmac']:10.2f}x "
            f"{row['sealed_vs_hmac']:10.2f}x"
        )
    c = result["costs"]
    print(
        f"\ncosts per receipt in a log of {int(c['leaves'])} receipts (p50), "
        f"against one durable HMAC-journal append ({c['hmac_append_p50_ms']:.3f} ms)"
    )
    for name in ("sign", "append+checkpoint", "inclusion_proof", "export_bundle", "verify_bundle"):
        print(f"  {name:<18} {c[f'{name}_p50_ms']:8.3f} ms  {c[f'{name}_vs_append']:7.2f}x")


if __name__ == "__main__":
    main()
