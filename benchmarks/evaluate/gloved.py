"""refinement-eval-v1 in gloved: what evaluating a PTY session costs the agent.

The same agent (``seq 1 LINES``, about 14 MB on a terminal for 2,000,000 lines) runs as a
resource plan and as a refinement plan (a 16-literal fixture), alternately, in one gloved;
printed per arm: the agent's running time (the receipt's ``usage.wall_us``) and the whole
session (create to terminal), p50 over the rounds, and the ratio refinement / resource.
The peer is the resource arm itself: the evaluator is the only difference.

    .venv/bin/python benchmarks/evaluate/gloved.py [--rounds 5] [--lines 2000000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.session._gloved import LIMITS
from tests.session._refinement import add_fixture, refinement_home

LITERALS = [f"literal-{i:02d}" for i in range(16)]


def main() -> None:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lines", type=int, default=2_000_000)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="glove-evalbench-", dir="/var/tmp"))
    home = refinement_home(base, extra={"flood": f"exec /usr/bin/seq 1 {args.lines}"})
    toml = home.config / "gloved.toml"
    toml.write_text(
        toml.read_text().replace("output_bytes = 67108864", "output_bytes = 1073741824")
    )
    fixture = add_fixture(home, required=LITERALS[:8], forbidden=LITERALS[8:])
    limits = {**LIMITS, "wall_time_s": 600, "output_bytes": 1024**3}
    resource = {
        "version": 1,
        "harness": "flood",
        "exposures": [],
        "limits": limits,
        "network": "none",
        "terminal": "pty",
    }
    refined = {**resource, "evaluation": {"kind": "refinement-eval-v1", "fixture": fixture}}
    home.start()
    times: dict[str, list[tuple[float, float]]] = {"resource": [], "refinement": []}
    try:
        for _ in range(args.rounds):
            for arm, plan in (("resource", resource), ("refinement", refined)):
                start = time.monotonic()
                view = home.call("session.create", {"plan": json.dumps(plan)})
                final = home.wait_terminal(view["session_id"], timeout=600)
                whole = time.monotonic() - start
                (item,) = [r for r in home.all_receipts() if r["session_id"] == view["session_id"]]
                agent = item["receipt"]["usage"]["wall_us"] / 1e6
                if arm == "refinement":
                    assert final["evaluation"]["verdict"] == "fail", final  # literals absent
                times[arm].append((agent, whole))
    finally:
        home.stop()
        shutil.rmtree(base, ignore_errors=True)
    size = sum(len(str(i)) + 2 for i in range(1, args.lines + 1))
    p50 = {
        arm: tuple(statistics.median(x[k] for x in v) for k in (0, 1)) for arm, v in times.items()
    }
    for arm, (agent, whole) in p50.items():
        print(
            f"{arm:<11} agent {agent * 1000:8.1f} ms ({size / agent / 2**20:6.1f} MiB/s)  "
            f"session {whole * 1000:8.1f} ms"
        )
    ratio_agent = p50["refinement"][0] / p50["resource"][0]
    ratio_whole = p50["refinement"][1] / p50["resource"][1]
    print(f"refinement / resource: agent {ratio_agent:.2f}x, session {ratio_whole:.2f}x")


if __name__ == "__main__":
    main()
