"""What projections add to a session's launch through a real gloved (root).

    .venv/bin/python benchmarks/library/gloved.py [--rounds N] [--count 16] [--size 65536]

A fresh home (``glove setup`` in a temporary directory), ``--count`` bundles of ``--size``
bytes added with ``glove library add`` and as many ``[projections.pN]`` aliases; then
sessions of ``/bin/true`` are created one at a time, alternating a plan without projections
and one with all of them, and each receipt's ``launched_us - created_us`` (validation,
prepare: resolve, verify, freeze; compose; the launch up to the command's start) is
compared. It prints p50 and p95 of both and of the difference: the issue's goal is that 16
projections add at most 10 ms. Wall times on a shared machine: read the p50s first.
"""

from __future__ import annotations

import argparse
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

LIMITS = {"wall_time_s": 30, "cpu_time_s": 10, "memory_bytes": 268435456, "pids": 64,
          "disk_bytes": 67108864, "output_bytes": 1048576}  # fmt: skip


def _env(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(base), XDG_CONFIG_HOME=str(base / "config"),
               XDG_STATE_HOME=str(base / "state"), XDG_RUNTIME_DIR=str(base / "run"))  # fmt: skip
    return env


def _glove(base: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "glove", *args], env=_env(base),
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--size", type=int, default=64 * 1024)
    args = parser.parse_args()
    from glove.control import Client

    base = Path(tempfile.mkdtemp(prefix="glove-bench-project-", dir="/var/tmp"))
    (base / "run").mkdir(mode=0o700)
    gloved = None
    try:
        _glove(base, "setup", "--json")
        toml = base / "config" / "glove" / "gloved.toml"
        refs = []
        extra = '\n[harnesses.true]\nargv = ["/bin/true"]\n'
        for index in range(args.count):
            source = base / f"b{index}"
            source.write_bytes(os.urandom(args.size))
            added = json.loads(_glove(base, "library", "add", str(source), "--json"))
            refs.append({"alias": f"p{index}", **added})
            extra += f'\n[projections.p{index}]\ntarget = "/bench/p{index}"\n'
        with toml.open("a") as handle:
            handle.write(extra)
        gloved = subprocess.Popen([sys.executable, "-m", "glove.daemon"], env=_env(base),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        runtime = base / "run" / "glove"
        while not (runtime / "gloved.sock").exists():
            time.sleep(0.05)
        plain: dict[str, Any] = {
            "version": 1,
            "harness": "true",
            "exposures": [],
            "limits": LIMITS,
            "network": "none",
            "terminal": "pipes",
        }
        projected = {**plain, "projections": refs}
        times: dict[str, list[float]] = {"none": [], "projected": []}
        with Client.for_runtime_dir(runtime, timeout=60.0) as client:
            for _ in range(args.rounds):
                for name, plan in (("none", plain), ("projected", projected)):
                    sid = client.call("session.create", {"plan": plan})["session_id"]
                    for view in client.stream("session.watch", {"session_id": sid}, timeout=60):
                        last = view
                    assert last["outcome"]["exit_code"] == 0, last
                    page = client.call("receipts.page", {"after": 0, "limit": 1000})
                    body = next(r["receipt"] for r in page["receipts"]
                                if r["receipt"]["session_id"] == sid)  # fmt: skip
                    t = body["times"]
                    times[name].append((t["launched_us"] - t["created_us"]) / 1000)
        diffs = [p - n for p, n in zip(times["projected"], times["none"], strict=True)]
        print(f"{args.rounds} rounds, {args.count} projections of {args.size} bytes (ms)")
        for name, values in (*times.items(), ("added", diffs)):
            print(f"  {name:10} p50 {statistics.median(values):7.2f}  "
                  f"p95 {_quantile(values, 0.95):7.2f}")  # fmt: skip
    finally:
        if gloved is not None:
            gloved.terminate()
            gloved.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
