"""Launch cost of a sandbox's cgroup v2 group, against the same launch without it.

Run as root with the project interpreter::

    .venv/bin/python benchmarks/cgroup/bench.py [--runs 40] [--warmup 5]

Every case is ``glove.container.run`` of ``/bin/true`` (default profile, no workspace) in this
process, interleaved round by round so drift hits each case alike:

``v1``          memory and pids limits on cgroup v1, no v2 group (the v2 probe is told
                there is no site): what the launcher did before cgroup v2
``v1+v2``       the same limits, plus the sandbox's v2 group (teardown by ``cgroup.kill``)
``v2-cpu``      a CPU-time limit on the v2 group's ``cpu.stat`` (plus memory and pids on v1)
``v1-cpu``      the same CPU-time limit on the v1 cpuacct hierarchy instead
``nolimits``    no limit at all: no group of either kind
``rate``        ``v1+v2`` plus a CPU rate (``cpus``), which adds a group in the v1 ``cpu``
                hierarchy here (``cgroup-v1-cpu-cfs``; ``cpu.max`` on a pure v2 host)

It prints median and p90 per case and the ratios v1+v2/v1, v2-cpu/v1-cpu and rate/v1+v2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Iterator

import msgspec

from glove.container import build_spec, load_profile, run
from glove.container._limits import Limits
from glove.container.linux import _cgroups, _launch
from glove.container.linux._cgroup_v2 import V2Probe

LIMITS = {
    "v1": Limits(memory=256 << 20, pids=64),
    "v1+v2": Limits(memory=256 << 20, pids=64),
    "v2-cpu": Limits(memory=256 << 20, pids=64, cpu_time=60.0),
    "v1-cpu": Limits(memory=256 << 20, pids=64, cpu_time=60.0),
    "nolimits": Limits(),
    # 2 CPUs: a quota /bin/true never reaches, so only the group's cost is measured.
    "rate": Limits(memory=256 << 20, pids=64, cpus=2.0),
}
WITHOUT_V2 = frozenset({"v1", "v1-cpu"})


@contextlib.contextmanager
def _no_v2_site() -> Iterator[None]:
    """Make the probe (and so the planner and the group set) see no cgroup v2 site.

    A launch probes once (``_launch``) and hands the probe to the planner and the group
    set; ``_cgroups`` probes itself only when called without one. Both are told.
    """
    real_cgroups, real_launch = _cgroups.probe_v2, _launch.probe_v2

    def absent() -> V2Probe:
        return V2Probe(None, {"cgroup-v2": "disabled by the benchmark"})

    _cgroups.probe_v2 = _launch.probe_v2 = absent
    try:
        yield
    finally:
        _cgroups.probe_v2, _launch.probe_v2 = real_cgroups, real_launch


def _once(case: str, null: int) -> float:
    spec = build_spec(load_profile(None), ["true"], cwd="/", host_env={})
    spec = msgspec.structs.replace(spec, workspace=None, limits=LIMITS[case])
    guard = _no_v2_site() if case in WITHOUT_V2 else contextlib.nullcontext()
    with guard:
        started = time.perf_counter()
        result = run(spec, stdin=null, stdout=null, stderr=null)
        elapsed = time.perf_counter() - started
    assert result.outcome == "exited", result
    mechanisms = {name: report.mechanism for name, report in result.limits.items()}
    if case == "v2-cpu":
        assert mechanisms["cpu_time"] == "cgroup-v2-cpu-watchdog", mechanisms
    if case == "v1-cpu":
        assert mechanisms["cpu_time"] == "cgroup-v1-cpuacct-watchdog", mechanisms
    if case == "rate":
        assert mechanisms["cpus"].startswith("cgroup-"), mechanisms
    return elapsed * 1000


def main() -> None:
    """Measure every case and print the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: cgroup v1 limits and the top-level v2 group need it")
    null = os.open(os.devnull, os.O_RDWR)
    samples: dict[str, list[float]] = {case: [] for case in LIMITS}
    for round_no in range(args.warmup + args.runs):
        for case in LIMITS:
            ms = _once(case, null)
            if round_no >= args.warmup:
                samples[case].append(ms)
    print(f"{'case':10} {'median ms':>10} {'p90 ms':>8}")
    medians = {}
    for case, values in samples.items():
        values.sort()
        medians[case] = statistics.median(values)
        p90 = values[int(len(values) * 0.9) - 1]
        print(f"{case:10} {medians[case]:10.2f} {p90:8.2f}")
    print(f"ratio v1+v2 / v1:         {medians['v1+v2'] / medians['v1']:.2f}x")
    print(f"ratio v2-cpu / v1-cpu:    {medians['v2-cpu'] / medians['v1-cpu']:.2f}x")
    print(f"ratio v1+v2 / nolimits:   {medians['v1+v2'] / medians['nolimits']:.2f}x")
    print(f"ratio rate / v1+v2:       {medians['rate'] / medians['v1+v2']:.2f}x")


if __name__ == "__main__":
    main()
