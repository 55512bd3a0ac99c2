"""`glove eval verify` of an A/B bundle: how long a third party's offline check takes.

One root-owned gloved runs `glove eval ab` (the skill-reading harness of
tests/session/test_eval_ab.py, two fixtures, K runs per fixture per arm: 4 K sessions),
with `--bundle`; then `glove eval verify` of that bundle runs ROUNDS times and the wall
time of each (the whole CLI process: interpreter start, every envelope, proof and verdict
re-run) is printed with its p50, beside one `glove receipts verify` of a single envelope,
the peer: verifying the bundle costs about that per run plus the report.

    .venv/bin/python benchmarks/evaluate/ab_verify.py [--runs 25] [--rounds 3]
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

from tests.session._gloved import Gloved
from tests.session.test_eval_ab import AB_HARNESSES, FIXTURES


def _timed(home: Gloved, *args: str) -> float:
    start = time.monotonic()
    done = home.glove(*args, timeout=3600)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed: {done.stderr}")
    return elapsed


def main() -> None:
    """Run the A/B once, then time verify."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="glove-abbench-", dir="/var/tmp"))
    home = Gloved(base)
    home.setup(AB_HARNESSES)
    (base / "base.md").write_text("a skill: SKILL-BAD\n")
    (base / "candidate.md").write_text("a skill: SKILL-GOOD\n")
    fixtures: list[str] = []
    for index, fixture in enumerate(FIXTURES):
        path = base / f"fixture-{index}.json"
        path.write_text(json.dumps(fixture))
        fixtures.extend(["--fixture", str(path)])
    home.start()
    try:
        bundle = base / "bundle"
        ab = _timed(
            home, "eval", "ab", "--harness", "skilled", "--alias", "skill",
            "--base", str(base / "base.md"), "--candidate", str(base / "candidate.md"),
            *fixtures, "--runs", str(args.runs), "--json", "--bundle", str(bundle),
            "--runtime-dir", str(home.runtime),
        )  # fmt: skip
        key = home.glove("receipts", "public-key")
        public = base / "log.pub"
        public.write_text(key.stdout)
        sessions = len(json.loads((bundle / "runs.json").read_text()))
        one = sorted((bundle / "runs").glob("*.receipt.json"))[0]
        peer = [_timed(home, "receipts", "verify", str(one), "--public-key", str(public))
                for _ in range(args.rounds)]  # fmt: skip
        times = [_timed(home, "eval", "verify", str(bundle), "--public-key", str(public))
                 for _ in range(args.rounds)]  # fmt: skip
    finally:
        home.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"glove eval ab: {sessions} sessions in {ab:.1f} s ({ab / sessions:.2f} s each)")
    print(
        f"glove eval verify of {sessions} runs: "
        + ", ".join(f"{t:.2f}" for t in times)
        + f" s; p50 {statistics.median(times):.2f} s"
    )
    print(f"glove receipts verify of one envelope: p50 {statistics.median(peer):.2f} s")
    ratio = statistics.median(times) / (sessions * statistics.median(peer))
    print(f"ratio verify-all / (runs x verify-one): {ratio:.3f}")


if __name__ == "__main__":
    main()
