"""The six limits from inside: each is enforced, or refused clearly and accepted weaker.

A limit the machine cannot enforce fully must be refused (exit 125, ``setup_error``, the
limit named in the error) unless ``--accept-weaker`` names it; the result must always say
which mechanism enforced each limit.
"""

from __future__ import annotations

import resource
from typing import Any

from tests.escape._harness import ExecResult, Sandbox, host_pids_with, kill_marked, wait_until

MIB = 1024 * 1024
# Time a launch may take on a loaded 2-core machine shared by several runs, on top of a
# wall-time limit: each bound it is part of still lies far below the outcome it rules out
# (the 1000 s sleepers, the 60 s wall time), and below the harness's own 60 s guard.
LAUNCH_SLACK_S = 30.0
# A wait for processes to be gone (it returns as soon as they are).
SURVIVOR_GRACE_S = 30.0


def run_limited(
    sb: Sandbox, limit: str, flags: list[str], cmd: list[str], timeout: float = 90
) -> tuple[ExecResult, bool]:
    """Run with a limit; if refused, check the refusal and rerun accepting a weaker mechanism.

    Returns the result that ran and whether the first attempt was refused.
    """
    res = sb.run(cmd, flags, timeout=timeout)
    if res.returncode != 125:
        mechanism = (res.status or {}).get("limits", {}).get(limit, {}).get("mechanism", "")
        assert "per-process" not in mechanism, f"{limit}: weaker {mechanism} used unasked"
        return res, False
    assert res.status is not None, res.describe()
    assert res.status["outcome"] == "setup_error", res.describe()
    message = (res.status.get("error") or "") + res.stderr.decode(errors="replace")
    spelled = {limit, limit.replace("_", "-")}
    assert any(s in message for s in spelled), f"refusal does not name {limit}: {message}"
    assert "accept-weaker" in message, f"refusal does not say how to accept: {message}"
    res = sb.run(cmd, [*flags, "--accept-weaker", limit.replace("_", "-")], timeout=timeout)
    if res.returncode == 125:  # the CLI may spell limits with underscores
        res = sb.run(cmd, [*flags, "--accept-weaker", limit], timeout=timeout)
    return res, True


def limit_report(res: ExecResult, name: str) -> dict[str, Any]:
    """The json-status entry of one limit, which must name its mechanism."""
    assert res.status is not None, res.describe()
    entry: dict[str, Any] = res.status["limits"][name]
    assert entry["mechanism"], f"{name} has no mechanism: {entry}"
    return entry


def test_wall_time_kills_the_whole_tree(sb: Sandbox) -> None:
    """At the wall limit, setsid'd, double-forked and stopped descendants die with the rest."""
    marker = sb.marker("wall")
    try:
        res = sb.run(
            sb.probe_cmd("spawn", {"marker": marker, "then": "sleep"}), ["--wall-time", "2"]
        )
        assert res.elapsed_s < 2 + LAUNCH_SLACK_S, res.elapsed_s
        assert res.status is not None, res.describe()
        assert res.status["outcome"] == "limit", res.describe()
        assert limit_report(res, "wall_time")["hit"] is True
        assert res.returncode != 0
        assert wait_until(lambda: not host_pids_with(marker), SURVIVOR_GRACE_S), (
            f"survived the wall limit: {host_pids_with(marker)}"
        )
    finally:
        kill_marked(marker)


def test_cpu_time_limit(sb: Sandbox) -> None:
    """A CPU burner is stopped near the CPU limit, well before its own end."""
    res, _ = run_limited(
        sb, "cpu_time", ["--cpu-time", "1", "--wall-time", "30"], sb.probe_cmd("cpu", {"max": 20})
    )
    entry = limit_report(res, "cpu_time")
    assert b"GLOVE-PROBE" not in res.stdout, "the burner ran to its own end"
    assert res.status is not None
    assert res.status["outcome"] in {"limit", "signaled"}, res.describe()
    assert entry["hit"] is True, res.describe()
    # The CPU limit ended it, not the 30 s wall time (no wall-clock bound: a loaded host
    # stretches a CPU second into several).
    assert limit_report(res, "wall_time")["hit"] is False, res.describe()


def test_memory_limit(sb: Sandbox) -> None:
    """Touching four times the memory limit fails (killed or MemoryError)."""
    res, _ = run_limited(
        sb, "memory", ["--memory", "64M"], sb.probe_cmd("mem", {"bytes": 256 * MIB})
    )
    entry = limit_report(res, "memory")
    assert b'"allocated": true' not in res.stdout, f"256 MiB allocated under 64M: {res.stdout!r}"
    assert res.status is not None
    if res.status["outcome"] == "exited":
        assert b'"allocated": false' in res.stdout, res.describe()
    else:
        assert entry["hit"] is True, res.describe()


def test_control_memory_within_limit(sb: Sandbox) -> None:
    """Control: an allocation well under the memory limit succeeds."""
    res, _ = run_limited(sb, "memory", ["--memory", "256M"], sb.probe_cmd("mem", {"bytes": MIB}))
    assert res.returncode == 0, res.describe()
    assert res.probe()["allocated"] is True


def test_pids_limit(sb: Sandbox) -> None:
    """No more than the pid limit of tasks can exist at once."""
    res, _ = run_limited(sb, "pids", ["--pids", "16"], sb.probe_cmd("pids-limit", {"max": 64}))
    entry = limit_report(res, "pids")
    assert res.status is not None
    if entry["mechanism"].startswith("cgroup-"):
        # The group reports the refused fork; the supervisor ends the sandbox at its next
        # poll (50 ms) unless the probe, which stops at the first refusal, exited first.
        assert entry["hit"] is True, res.describe()
    if res.status["outcome"] == "limit":
        # Under rlimit-nproc-userns the supervisor's count of the tree found it at the limit.
        assert entry["hit"] is True, res.describe()
        assert res.returncode == 137, res.describe()
        return
    assert res.returncode == 0, res.describe()
    report = res.probe()
    assert 0 < report["forked"] < 16, report
    assert report["errno"] == "EAGAIN", report


def test_disk_limit_is_reported(sb: Sandbox) -> None:
    """--disk bounds scratch writes and the result names its mechanism."""
    res, _ = run_limited(
        sb, "disk", ["--disk", "4M"], sb.probe_cmd("fill", {"paths": ["/tmp/f"], "max": 32 * MIB})
    )
    assert res.returncode == 0, res.describe()
    fill = res.probe()["/tmp/f"]
    assert fill["errno"] == "ENOSPC", fill
    assert 0 < fill["written"] <= 5 * MIB, fill
    limit_report(res, "disk")


def test_output_is_truncated_at_the_cap(sb: Sandbox) -> None:
    """Output past --output is cut; the result reports the truncation and the byte count."""
    res, _ = run_limited(
        sb, "output", ["--output", "1M"], sb.probe_cmd("output", {"bytes": 8 * MIB})
    )
    assert len(res.stdout) + len(res.stderr) <= MIB + 4096, len(res.stdout)
    assert len(res.stdout) >= MIB // 2, "control: output flows up to the cap"
    assert res.status is not None
    assert res.status["output"]["truncated"] is True, res.status
    assert res.status["output"]["bytes"] <= MIB + 4096, res.status
    limit_report(res, "output")


def test_orphan_holding_the_output_pipe_does_not_hang(sb: Sandbox) -> None:
    """An orphan that keeps stdout open neither delays glove's return nor survives it."""
    marker = sb.marker("pipe")
    try:
        res = sb.run(
            sb.probe_cmd("output", {"orphan": True, "marker": marker, "bytes": 100}),
            ["--wall-time", "60"],
        )
        assert res.returncode == 0, res.describe()
        assert res.elapsed_s < LAUNCH_SLACK_S, f"glove waited {res.elapsed_s:.1f}s for the orphan"
        assert res.stdout.count(b"o") >= 100, "control: the output arrived"
        assert wait_until(lambda: not host_pids_with(marker), SURVIVOR_GRACE_S)
    finally:
        kill_marked(marker)


def test_fork_bomb_is_contained(sb: Sandbox) -> None:
    """A fork bomb under --pids ends at the wall limit; glove stays responsive; nothing survives."""
    marker = sb.marker("bomb")
    cmd = sb.probe_cmd("forkbomb", {"width": 4, "depth": 5, "marker": marker})
    try:
        res, _ = run_limited(sb, "pids", ["--pids", "64", "--wall-time", "6"], cmd)
        assert res.elapsed_s < 6 + LAUNCH_SLACK_S, f"glove took {res.elapsed_s:.1f}s"
        assert res.status is not None, res.describe()
        assert res.status["outcome"] == "limit", res.describe()
        # A cgroup pids limit ends it at the first refused fork, the user-namespace rlimit
        # once the supervisor's count finds the tree at the limit; otherwise the wall limit.
        mechanism = limit_report(res, "pids")["mechanism"]
        watched = mechanism.startswith("cgroup-") or mechanism == "rlimit-nproc-userns"
        ended_by = "pids" if watched else "wall_time"
        assert limit_report(res, ended_by)["hit"] is True, res.describe()
        assert wait_until(lambda: not host_pids_with(marker), SURVIVOR_GRACE_S), (
            f"{len(host_pids_with(marker))} bomb processes survived"
        )
    finally:
        kill_marked(marker)


def test_cpu_time_counts_the_whole_tree(sb: Sandbox) -> None:
    """Twelve burners share one CPU budget, or the per-process fallback is refused unasked."""
    flags = ["--cpu-time", "2", "--wall-time", "60"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = sb.run(sb.probe_cmd("cpu", {"max": 20, "procs": 12}), flags, timeout=90)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode == 125:
        # Refused: check the refusal names the limit, and accepting the weaker one works.
        weak, refused = run_limited(sb, "cpu_time", flags, sb.probe_cmd("cpu", {"max": 20}))
        assert refused, res.describe()
        assert limit_report(weak, "cpu_time")["hit"] is True, weak.describe()
        return
    entry = limit_report(res, "cpu_time")
    assert "per-process" not in entry["mechanism"], f"weaker mechanism used unasked: {entry}"
    # 12 x 2 CPU-seconds per process would burn 24 s of CPU; a tree budget ends near 2 s.
    # Counted in CPU (every descendant is reaped, so RUSAGE_CHILDREN holds the sandbox's
    # whole tree), not wall time: a loaded host stretches the wall clock, not the budget.
    burned = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert burned < 8, f"tree CPU budget not enforced: {burned:.1f} CPU-s {entry}"
    assert entry["hit"] is True, res.describe()


def test_memory_counts_the_whole_tree(sb: Sandbox) -> None:
    """Eight processes cannot each hold 48 MiB under --memory 64M, unless refused first."""
    res, refused = run_limited(
        sb, "memory", ["--memory", "64M"], sb.probe_cmd("mem", {"bytes": 48 * MIB, "procs": 8})
    )
    entry = limit_report(res, "memory")
    if "per-process" in entry["mechanism"]:
        assert refused, f"a per-process memory limit was used without --accept-weaker: {entry}"
        return
    assert b'"allocated": true' not in res.stdout, f"384 MiB held under 64M: {res.stdout!r}"


def test_stderr_counts_toward_the_output_cap(sb: Sandbox) -> None:
    """Writing to stderr instead of stdout does not escape the output cap."""
    res, _ = run_limited(
        sb,
        "output",
        ["--output", "1M"],
        sb.probe_cmd("output", {"bytes": 8 * MIB, "stream": "stderr"}),
    )
    assert len(res.stdout) + len(res.stderr) <= MIB + 64 * 1024, len(res.stderr)
    assert res.status is not None
    assert res.status["output"]["truncated"] is True, res.status


def test_endless_writer_ends_at_the_output_cap(sb: Sandbox) -> None:
    """An endless writer (yes) is stopped at --output without any wall limit: no hang."""
    res, _ = run_limited(sb, "output", ["--output", "4K"], ["/usr/bin/yes"], timeout=30)
    assert len(res.stdout) <= 4096, len(res.stdout)
    assert len(res.stdout) > 0, "control: output flowed"
    assert res.status is not None
    assert res.status["output"]["truncated"] is True, res.status
    assert limit_report(res, "output")["hit"] is True


def test_accept_weaker_all(sb: Sandbox) -> None:
    """--accept-weaker all lets every limit run, each naming the mechanism that enforced it."""
    flags = ["--memory", "256M", "--cpu-time", "30", "--pids", "64", "--wall-time", "30"]
    res = sb.run(["/bin/true"], [*flags, "--accept-weaker", "all"])
    assert res.returncode == 0, res.describe()
    for name in ("memory", "cpu_time", "pids", "wall_time"):
        limit_report(res, name)
