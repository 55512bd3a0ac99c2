"""Plan v1 benchmark: the price of strict decoding, and Glove's RFC 8785 against a peer's.

Measures, in one process, on the issue-9 example plan (and one with 32 exposures and 16
labels, the largest a plan gets):

* ``decode_plan`` against msgspec's own typed decode of the same bytes into the same Structs
  (``msgspec.json.decode(data, type=Plan)``: no duplicate-key, depth, surrogate, by-name or
  structural checks): the price of strictness;
* ``jcs_dumps`` against the ``rfc8785`` package (Trail of Bits' pure-Python RFC 8785) on the
  same value: the same job done by a peer;
* ``validate_plan`` (which re-decodes the canonical bytes and digests them) against
  ``decode_plan``, to show where a ``plan.validate`` request spends its time.

    .venv/bin/python benchmarks/plan/bench.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec
import rfc8785

from glove.plan import (
    PLAN_LIMIT_NAMES,
    ExposurePolicy,
    HarnessPolicy,
    LocalPolicy,
    Plan,
    decode_plan,
    jcs_dumps,
    validate_plan,
)

LIMITS = {
    "wall_time_s": 30,
    "cpu_time_s": 10,
    "memory_bytes": 268435456,
    "pids": 64,
    "disk_bytes": 67108864,
    "output_bytes": 1048576,
}
SMALL: dict[str, Any] = {
    "version": 1,
    "harness": "demo",
    "exposures": ["work"],
    "limits": LIMITS,
    "network": "none",
    "terminal": "pipes",
}
LARGE: dict[str, Any] = {
    **SMALL,
    "exposures": [f"exposure-{i}" for i in range(32)],
    "terminal": "pty",
    "rows": 50,
    "cols": 200,
    "labels": {f"sage.key-{i}": f"value {i} caf\u00e9" for i in range(16)},
}


def _local(doc: dict[str, Any]) -> LocalPolicy:
    return LocalPolicy(
        harnesses={"demo": HarnessPolicy(argv=("/bin/true",))},
        exposures={
            alias: ExposurePolicy(generation=1, mode="rw", target=f"/w/{alias}")
            for alias in doc["exposures"]
        },
        limits_max=dict.fromkeys(PLAN_LIMIT_NAMES, 2**40),
        mechanisms={
            "wall_time_s": "watchdog",
            "cpu_time_s": "cgroup-v1-cpuacct-watchdog",
            "memory_bytes": "cgroup-v1-memory",
            "pids": "cgroup-v1-pids",
            "disk_bytes": "tmpfs-size",
            "output_bytes": "pipe-accounting",
        },
        terminals=frozenset({"pipes", "pty"}),
    )


def per_call_us(fn: Callable[[], object], seconds: float) -> float:
    """Mean microseconds per call of ``fn`` over about ``seconds``, best of three rounds."""
    best = float("inf")
    for _ in range(3):
        calls = 0
        start = time.perf_counter()
        deadline = start + seconds / 3
        while True:
            for _ in range(100):
                fn()
            calls += 100
            now = time.perf_counter()
            if now >= deadline:
                break
        best = min(best, (now - start) / calls * 1e6)
    return best


def main() -> None:
    """Print per-call times and the ratios."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.0)
    seconds = parser.parse_args().seconds
    for name, doc in (("example plan", SMALL), ("largest plan", LARGE)):
        data = json.dumps(doc).encode()
        plan = decode_plan(data)
        assert msgspec.json.decode(data, type=Plan) == plan
        builtins = msgspec.to_builtins(plan)
        assert jcs_dumps(builtins) == rfc8785.dumps(builtins)
        local = _local(doc)
        ours = per_call_us(partial(decode_plan, data), seconds)
        peer = per_call_us(partial(msgspec.json.decode, data, type=Plan), seconds)
        jcs = per_call_us(partial(jcs_dumps, builtins), seconds)
        jcs_peer = per_call_us(partial(rfc8785.dumps, builtins), seconds)
        valid = per_call_us(partial(validate_plan, plan, local), seconds)
        print(f"{name} ({len(data)} bytes)")
        print(
            f"  decode_plan      {ours:8.1f} us   msgspec typed decode {peer:7.1f} us   "
            f"ratio {ours / peer:5.1f}x"
        )
        print(
            f"  jcs_dumps        {jcs:8.1f} us   rfc8785.dumps        {jcs_peer:7.1f} us   "
            f"ratio {jcs / jcs_peer:5.2f}x"
        )
        print(
            f"  validate_plan    {valid:8.1f} us   decode_plan          {ours:7.1f} us   "
            f"ratio {valid / ours:5.2f}x"
        )


if __name__ == "__main__":
    main()
