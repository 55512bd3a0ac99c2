"""One row of the benchmark table: a Glove figure, its peer's from the same run, and a goal.

Each benchmark prints its own table as before; when it runs under ``python -m benchmarks``
(which sets ``GLOVE_BENCH_REPORT`` to a file), it also appends its headline rows here as
JSON lines, so the runner can print one table of ratios for the whole machine.
"""

from __future__ import annotations

import json
import os
from typing import Literal

REPORT_ENV = "GLOVE_BENCH_REPORT"

#: Whether a larger figure is better (a rate) or worse (a latency, a cost).
Better = Literal["lower", "higher"]


def row(
    bench: str,
    path: str,
    glove: float,
    peer_name: str,
    peer: float,
    unit: str,
    *,
    better: Better = "lower",
    goal: float | None = None,
) -> None:
    """Record one row: ``glove`` against ``peer`` (same unit); ``goal`` is the ratio wanted.

    The ratio is always glove / peer; ``goal`` is an upper bound on it for a ``lower``
    figure and a lower bound for a ``higher`` one. Nothing happens outside the runner.
    """
    target = os.environ.get(REPORT_ENV)
    if not target:
        return
    record = {
        "bench": bench,
        "path": path,
        "glove": glove,
        "peer_name": peer_name,
        "peer": peer,
        "unit": unit,
        "better": better,
        "goal": goal,
    }
    with open(target, "a", encoding="utf-8") as out:
        out.write(json.dumps(record, sort_keys=True) + "\n")
