"""Every benchmark's quick mode in one run, and one table of ratios against each peer.

    .venv/bin/python -m benchmarks                 # all of them, quick (about 10-15 min)
    .venv/bin/python -m benchmarks launch mcp-call # some of them
    .venv/bin/python -m benchmarks --list
    .venv/bin/python -m benchmarks --write-docs    # also put the table in docs/performance.md

Each benchmark runs as its own process with its quick arguments, prints its own table (kept
in the log this prints at the end), and records its headline rows through
``benchmarks._report`` (``GLOVE_BENCH_REPORT``). The table gives, per row, Glove's figure,
the peer's from the same run, the ratio glove/peer and the goal where an issue sets one.
Benchmarks are never test assertions: a row over its goal is reported, not failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._report import REPORT_ENV

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"
TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    quick: tuple[str, ...]


BENCHES = (
    Bench("cli", "benchmarks/cli/bench.py", ("--quick",)),
    Bench("launch", "benchmarks/launch/bench.py", ("--runs", "15", "--warmup", "3")),
    Bench(
        "sessions",
        "benchmarks/sessions/bench.py",
        ("--sessions", "20", "--warmup", "3", "--held", "100", "--status-calls", "200"),
    ),
    Bench("mcp-call", "benchmarks/mcp/bench_call.py", ("--calls", "300", "--rounds", "2")),
    Bench("mcp", "benchmarks/mcp/bench_mcp.py", ("--calls", "200", "--rounds", "2")),
    Bench("mcp-startup", "benchmarks/mcp/bench_startup.py", ("--rounds", "5")),
    Bench("journal", "benchmarks/journal/bench.py", ("--seconds", "0.5")),
    Bench(
        "receipts",
        "benchmarks/receipts/bench.py",
        ("--seconds", "0.5", "--rounds", "1", "--leaves", "2000", "--repeat", "50"),
    ),
    Bench(
        "egress",
        "benchmarks/egress/bench.py",
        ("--requests", "300", "--bytes", "16777216", "--rounds", "1"),
    ),
    Bench("control", "benchmarks/control/bench.py", ("--clients", "100", "--calls", "300")),
    Bench("attach", "benchmarks/attach/bench.py", ("--keys", "300")),
    Bench("terminal", "benchmarks/terminal/bench.py", ("--quick",)),
    Bench("library", "benchmarks/library/bench.py", ("--quick",)),
    Bench("evaluate", "benchmarks/evaluate/bench.py", ("--quick",)),
    Bench(
        "actors",
        "benchmarks/actors/bench.py",
        ("--actors", "200", "--asks", "4000", "--repeat", "1"),
    ),
    Bench("cgroup", "benchmarks/cgroup/bench.py", ("--runs", "10", "--warmup", "2")),
    Bench("plan", "benchmarks/plan/bench.py", ("--seconds", "0.3")),
    Bench("policy", "benchmarks/policy/bench.py", ("--seconds", "0.3")),
    Bench("wallet", "benchmarks/wallet/bench.py", ("--seconds", "0.3")),
    Bench("remote", "benchmarks/remote/bench.py", ("--runs", "10")),
    Bench(
        "agents-offline",
        "benchmarks/agents/bench_offline_start.py",
        ("--rounds", "1", "--seconds", "4"),
    ),
)


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{mem_kib / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        memory = "unknown"
    fs = subprocess.run(
        ["stat", "-f", "-c", "%T", str(ROOT)], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "cpu": f"{model} x {os.cpu_count()}",
        "memory": memory,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "filesystem": fs or "unknown",
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "user": "root" if os.geteuid() == 0 else str(os.geteuid()),
    }


def run_one(bench: Bench, report: Path, log: list[str]) -> tuple[str, list[str]]:
    """Run one benchmark; its status and the ratio lines of its own output."""
    script = ROOT / bench.script
    if not script.exists():
        return "absent", []
    env = dict(os.environ, **{REPORT_ENV: str(report)})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, str(script), *bench.quick],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT_S:.0f} s", []
    took = time.monotonic() - start
    log.append(
        f"## {bench.name} ({took:.1f} s, exit {done.returncode})\n{done.stdout}{done.stderr}"
    )
    ratios = [line.strip() for line in done.stdout.splitlines() if re.search(r"ratio|\dx\b", line)]
    status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
    return f"{status}, {took:.0f} s", ratios


def fmt(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of recorded rows."""
    lines = [
        "| benchmark | path | glove | peer | peer figure | ratio glove/peer | goal | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["glove"] / r["peer"] if r["peer"] else float("inf")
        goal = r.get("goal")
        if goal is None:
            want, met = "", ""
        elif r["better"] == "lower":
            want, met = f"<= {goal:.2f}x", "yes" if ratio <= goal else "no"
        else:
            want, met = f">= {goal:.2f}x", "yes" if ratio >= goal else "no"
        lines.append(
            f"| {r['bench']} | {r['path']} | {fmt(r['glove'])} {r['unit']} | {r['peer_name']} "
            f"| {fmt(r['peer'])} {r['unit']} | {ratio:.2f}x | {want} | {met} |"
        )
    return lines


def write_docs(text: str) -> None:
    """Replace the table between the markers of docs/performance.md (or append it)."""
    doc = DOC.read_text() if DOC.exists() else "# Performance\n"
    block = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + block + rest.split(END, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(doc)


def main() -> None:
    """Run the chosen benchmarks' quick modes; print the machine, the table and the log."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--write-docs", action="store_true", help="update docs/performance.md")
    parser.add_argument("--json", type=Path, help="also write machine, rows and status here")
    args = parser.parse_args()
    known = {b.name: b for b in BENCHES}
    if args.list:
        for b in BENCHES:
            print(f"{b.name:<16} {b.script} {' '.join(b.quick)}")
        return
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; see --list")
    chosen = [known[n] for n in args.names] if args.names else list(BENCHES)
    about = machine()
    log: list[str] = []
    status: dict[str, str] = {}
    text_ratios: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="glove-bench-") as tmp:
        report = Path(tmp) / "rows.jsonl"
        report.touch()
        for bench in chosen:
            print(f"benchmarks: {bench.name} ...", file=sys.stderr, flush=True)
            status[bench.name], text_ratios[bench.name] = run_one(bench, report, log)
        rows = [json.loads(line) for line in report.read_text().splitlines() if line]
    out = [
        "Machine: " + "; ".join(f"{k} {v}" for k, v in about.items()),
        "",
        *table(rows),
        "",
        "| benchmark | run | its own ratio lines (quick mode) |",
        "|---|---|---|",
    ]
    for bench in chosen:
        lines = "<br>".join(text_ratios[bench.name][:8]).replace("|", "/")
        out.append(f"| {bench.name} | {status[bench.name]} | {lines} |")
    text = "\n".join(out)
    print("\n\n".join(log))
    print(text)
    if args.write_docs:
        write_docs(text)
    if args.json:
        args.json.write_text(
            json.dumps({"machine": about, "rows": rows, "status": status}, indent=2)
        )


if __name__ == "__main__":
    main()
