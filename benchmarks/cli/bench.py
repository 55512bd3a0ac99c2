"""CLI start-up benchmark: each light ``glove`` command against ``python -c pass``, same run.

The peer is the interpreter's own start (``python -c pass``, the same interpreter as the
``glove`` console script): whatever a command costs above it is Glove's imports and work.
Every round runs each case once, in a shuffled order, so load from other processes on the
machine falls on all of them alike; the figures are the median and the minimum over the
rounds, and each command's difference to the peer's median, against the goal of issue 22:

- ``glove --version``, ``glove --help``: <= python + 40 ms;
- ``glove session status`` against no gloved (one failed connect): <= python + 40 ms;
- ``glove capabilities --json``, ``glove session status`` against a running gloved (one
  authenticated control round trip each): <= python + 60 ms.

Every process runs as an installed Glove does, with its bytecode cached: the benchmark
clears ``PYTHONDONTWRITEBYTECODE`` and runs each case once before it measures (an editable
install compiles ``src/`` on every start otherwise, which no installed copy does).

A real ``gloved`` runs in a private runtime directory (and private XDG homes) for the
round-trip cases; ``session status`` asks about an id that does not exist, which costs the
same round trip as one that does (exit 1, the daemon's refusal).

``--floors`` times instead what the CLI's start could import, each alone (typer, click,
rich, pydantic, msgspec, asyncio...): the evidence of docs/decisions/0054.

    .venv/bin/python benchmarks/cli/bench.py [--rounds 30] [--quick] [--floors] [--json]
        [--baseline SRC]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import _report

START_DEADLINE_S: Final = 20.0
QUICK_ROUNDS: Final = 8
#: A session id of the right shape that no gloved has.
NO_SUCH_SESSION: Final = "s-00000000000000000000000000"


def _glove() -> list[str]:
    """The ``glove`` console script next to this interpreter (``python -m glove`` without)."""
    script = Path(sys.executable).parent / "glove"
    return [str(script)] if script.exists() else [sys.executable, "-m", "glove"]


def _start_gloved(runtime: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "glove.daemon", "--runtime-dir", str(runtime)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + START_DEADLINE_S
    while not (runtime / "gloved.sock").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("gloved did not start")
        time.sleep(0.02)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _cases(
    runtime: Path, absent: Path, baseline: Path | None
) -> list[tuple[str, list[str], int, float | None]]:
    """``(name, argv, expected exit code, goal in ms above python)``.

    With ``baseline`` (another checkout's ``src``), each glove case runs a second time as
    ``python -m glove`` from that tree, named ``... [baseline]`` (no goal): before and after
    in the same run.
    """
    glove = _glove()
    cases = [
        ("python -c pass", [sys.executable, "-c", "pass"], 0, None),
        ("glove --version", [*glove, "--version"], 0, 40.0),
        ("glove --help", [*glove, "--help"], 0, 40.0),
        (
            "glove session status (no gloved)",
            [*glove, "session", "status", NO_SUCH_SESSION, "--runtime-dir", str(absent)],
            69,
            40.0,
        ),
        (
            "glove capabilities --json",
            [*glove, "capabilities", "--json", "--runtime-dir", str(runtime)],
            0,
            60.0,
        ),
        (
            "glove session status (gloved)",
            [*glove, "session", "status", NO_SUCH_SESSION, "--runtime-dir", str(runtime)],
            1,
            60.0,
        ),
    ]
    if baseline is None:
        return cases
    old = ["env", f"PYTHONPATH={baseline}", sys.executable, "-m", "glove"]
    return cases + [
        (f"{name} [baseline]", [*old, *argv[len(glove) :]], code, None)
        for name, argv, code, _goal in cases[1:]
    ]


def _time_one(argv: list[str], expected: int, env: dict[str, str]) -> tuple[float, float]:
    """One run's wall-clock and CPU (user + system) milliseconds."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = (time.perf_counter() - started) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != expected:
        again = subprocess.run(argv, capture_output=True, env=env, check=False)
        raise SystemExit(f"{argv[1:]} exited {proc.returncode}, not {expected}: {again.stderr!r}")
    return elapsed, (usage.ru_utime + usage.ru_stime) * 1000


def _figures(samples: list[tuple[float, float]], peer: list[tuple[float, float]]) -> dict[str, Any]:
    wall = statistics.median(s[0] for s in samples)
    cpu = statistics.median(s[1] for s in samples)
    peer_wall = statistics.median(s[0] for s in peer)
    peer_cpu = statistics.median(s[1] for s in peer)
    return {
        "p50_ms": round(wall, 1),
        "min_ms": round(min(s[0] for s in samples), 1),
        "above_python_ms": round(wall - peer_wall, 1),
        "ratio": round(wall / peer_wall, 2),
        "cpu_p50_ms": round(cpu, 1),
        "cpu_above_python_ms": round(cpu - peer_cpu, 1),
    }


def measure(rounds: int, baseline: Path | None = None) -> dict[str, Any]:
    """Run every case ``rounds`` times, interleaved; the figures by case name."""
    with tempfile.TemporaryDirectory(prefix="glove-bench-cli-") as tmp:
        base = Path(tmp)
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(base / "config"),
            "XDG_STATE_HOME": str(base / "state"),
            "COLUMNS": "80",
        }
        env.pop("GLOVE_DEBUG", None)
        # As installed: bytecode cached (a warm-up round writes it for an editable install).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        runtime = base / "run" / "glove"
        cases = _cases(runtime, base / "absent" / "glove", baseline)
        gloved = _start_gloved(runtime, env)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name, *_ in cases}
        try:
            for _name, argv, expected, _goal in cases:
                _time_one(argv, expected, env)
            for _ in range(rounds):
                order = list(cases)
                random.shuffle(order)
                for name, argv, expected, _goal in order:
                    samples[name].append(_time_one(argv, expected, env))
        finally:
            _stop(gloved)
    figures: dict[str, Any] = {}
    for name, _argv, _expected, goal in cases:
        f = _figures(samples[name], samples["python -c pass"])
        f["goal_above_python_ms"] = goal
        f["met"] = None if goal is None else f["above_python_ms"] <= goal
        figures[name] = f
    return figures


#: What a command's start may import, each alone: the floors the decision record weighs
#: (docs/decisions/0054-the-hot-commands-parse-without-typer.md).
FLOOR_IMPORTS: Final = (
    "typer",
    "typer.main",
    "click",
    "rich",
    "pydantic",
    "msgspec",
    "asyncio",
    "json",
    "socket",
)


def measure_floors(rounds: int) -> dict[str, Any]:
    """``python -c 'import X'`` for each of :data:`FLOOR_IMPORTS`, interleaved with the peer."""
    cases = [("pass", [sys.executable, "-c", "pass"])]
    cases += [
        (f"import {name}", [sys.executable, "-c", f"import {name}"]) for name in FLOOR_IMPORTS
    ]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in cases}
    for _ in range(rounds):
        order = list(cases)
        random.shuffle(order)
        for name, argv in order:
            samples[name].append(_time_one(argv, 0, dict(os.environ)))
    return {name: _figures(s, samples["pass"]) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="SRC",
        help="also run each command from this src/ (e.g. a checkout of main) for comparison",
    )
    parser.add_argument(
        "--floors", action="store_true", help="time importing typer, click, rich... alone"
    )
    args = parser.parse_args()
    rounds = QUICK_ROUNDS if args.quick else args.rounds
    if args.floors:
        floors = measure_floors(rounds)
        if args.json:
            print(json.dumps({"rounds": rounds, "imports": floors}, indent=2))
            return
        print(f"one import alone, {rounds} interleaved rounds, {os.cpu_count()} CPUs")
        print(f"{'python -c':24} {'p50 ms':>8} {'+python':>8} {'cpu ms':>8} {'+python':>8}")
        for name, f in floors.items():
            print(
                f"{name:24} {f['p50_ms']:8.1f} {f['above_python_ms']:+8.1f} "
                f"{f['cpu_p50_ms']:8.1f} {f['cpu_above_python_ms']:+8.1f}"
            )
        return
    figures = measure(rounds, args.baseline)
    if args.json:
        print(json.dumps({"rounds": rounds, "cases": figures}, indent=2))
        return
    print(f"CLI start-up, {rounds} interleaved rounds, {os.cpu_count()} CPUs")
    print(
        f"{'case':45} {'p50 ms':>8} {'min ms':>8} {'+python':>8} {'ratio':>6} "
        f"{'cpu ms':>7} {'+python':>8}  goal (wall p50)"
    )
    for name, f in figures.items():
        goal = f["goal_above_python_ms"]
        verdict = "" if goal is None else f"<= +{goal:.0f} ms: {'met' if f['met'] else 'NOT met'}"
        print(
            f"{name:45} {f['p50_ms']:8.1f} {f['min_ms']:8.1f} {f['above_python_ms']:+8.1f} "
            f"{f['ratio']:6.2f} {f['cpu_p50_ms']:7.1f} {f['cpu_above_python_ms']:+8.1f}  {verdict}"
        )
        python_ms = f["p50_ms"] - f["above_python_ms"]
        if goal is not None and python_ms > 0:
            # The goal is additive (python + N ms): as a ratio to this run's python.
            _report.row(
                "cli", name, f["p50_ms"], "python -c pass", python_ms, "ms",
                goal=(python_ms + goal) / python_ms,
            )  # fmt: skip


if __name__ == "__main__":
    main()
