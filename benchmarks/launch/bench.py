"""Launch latency of ``glove exec`` against bubblewrap, as root and as an unprivileged user.

Run with the project interpreter, as root (it re-runs itself as the test user)::

    .venv/bin/python benchmarks/launch/bench.py [--runs 50] [--warmup 5] [--json out.json]

Each user's worker measures, interleaved round by round so drift hits every case alike:

``true``      ``/bin/true`` through ``subprocess.run`` (the spawn floor of every case below)
``python``    ``python -c pass`` with the interpreter the CLI uses (its own start-up)
``bwrap``     ``bwrap --unshare-all --die-with-parent --new-session`` with the default
              profile's binds, a fresh /proc, /dev and /tmp, the workspace rw, ``/bin/true``
``cli``       ``python -m glove exec --workspace WS -- /bin/true`` (default profile)
``library``   ``glove.container.run(spec)`` in this process (default profile, its limits)
``library-nolimits``  the same spec without limits (isolation only, like bwrap)
``cli-before``  with ``--before SRC``: the ``cli`` case run from another source tree (its
              ``src`` first on ``PYTHONPATH``), interleaved with ``cli`` in the same rounds

Each case also gets its CPU time (user + system of this process and its children, from
``getrusage``), and the report gives the load average at the start and end of the run.

It prints median and p90 per case and the ratios the issue sets as goals: library launch
no slower than bubblewrap, and the CLI within bubblewrap plus the interpreter's own start.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
UNPRIV_USER = os.environ.get("GLOVE_UNPRIV_USER", "glovetest")
UNPRIV_PYTHON = os.environ.get("GLOVE_UNPRIV_PYTHON", "/var/tmp/glove-unpriv/venv/bin/python")
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
CASES = ("true", "python", "bwrap", "cli", "cli-before", "library", "library-nolimits")


def ensure_bwrap() -> str:
    """Return the bwrap path, installing the Debian package first if it is missing."""
    path = shutil.which("bwrap")
    if path:
        return path
    if os.geteuid() != 0:
        raise SystemExit("bubblewrap is missing; run as root so it can be installed with apt")
    subprocess.run(["apt-get", "install", "-y", "-qq", "bubblewrap"], check=True)
    path = shutil.which("bwrap")
    if not path:
        raise SystemExit("apt-get installed bubblewrap but bwrap is not on PATH")
    return path


def profile_binds() -> list[tuple[str, str]]:
    """The default profile's (source, target) binds that exist on this host."""
    from glove.container import load_profile

    binds = []
    for b in load_profile(None).bind:
        if os.path.lexists(b.source):
            binds.append((b.source, b.target or b.source))
    return binds


def bwrap_argv(bwrap: str, ws: str) -> list[str]:
    """bwrap with equivalent isolation and the same binds as glove's default profile."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--hostname", "glove"]
    for src, dst in profile_binds():
        if os.path.islink(src):  # /bin -> usr/bin on merged-/usr systems: keep the link
            argv += ["--symlink", os.readlink(src), dst]
        else:
            argv += ["--ro-bind", src, dst]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    argv += ["--bind", ws, "/workspace", "--chdir", "/workspace", "--clearenv"]
    argv += ["--setenv", "PATH", ENV["PATH"], "--", "/bin/true"]
    return argv


def library_runner(ws: str, limits: bool) -> Callable[[], None]:
    """A callable that runs /bin/true through the library launch path, in this process."""
    from glove.container import Limits, Overrides, build_spec, load_profile, run

    spec = build_spec(
        load_profile(None),
        ["/bin/true"],
        cwd=ws,
        host_env=dict(ENV),
        overrides=Overrides(workspace=ws),
    )
    if not limits:
        import msgspec

        spec = msgspec.structs.replace(spec, limits=Limits(), accept_weaker=frozenset())
    devnull = os.open(os.devnull, os.O_RDWR)

    def once() -> None:
        result = run(spec, stdin=devnull, stdout=devnull, stderr=devnull)
        if result.exit_code != 0:
            raise RuntimeError(f"library launch failed: {result}")

    return once


def command_runner(
    argv: list[str], cwd: str, env: dict[str, str] | None = None
) -> Callable[[], None]:
    """A callable that runs ``argv`` to completion and insists on exit 0."""

    def once() -> None:
        p = subprocess.run(argv, cwd=cwd, env=env or ENV, capture_output=True, check=False)
        if p.returncode != 0:
            raise RuntimeError(f"{argv[:4]}... exited {p.returncode}: {p.stderr[-500:]!r}")

    return once


def cpu_seconds() -> float:
    """User + system CPU time of this process and its reaped children so far."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def worker(runs: int, warmup: int, before: str | None = None) -> dict[str, Any]:
    """Measure every case as the current user; return samples (wall and CPU) in ms."""
    ws = tempfile.mkdtemp(prefix="glove-bench-")
    py = sys.executable
    runners: dict[str, Callable[[], None]] = {
        "true": command_runner(["/bin/true"], ws),
        "python": command_runner([py, "-c", "pass"], ws),
        "bwrap": command_runner(bwrap_argv(ensure_bwrap(), ws), ws),
        "cli": command_runner(
            [py, "-P", "-m", "glove", "exec", "--workspace", ws, "--", "/bin/true"], ws
        ),
    }
    if before is not None:
        runners["cli-before"] = command_runner(
            [py, "-P", "-m", "glove", "exec", "--workspace", ws, "--", "/bin/true"],
            ws,
            env={**ENV, "PYTHONPATH": str(Path(before) / "src")},
        )
    errors: dict[str, str] = {}
    for name, limits in (("library", True), ("library-nolimits", False)):
        try:
            runners[name] = library_runner(ws, limits)
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
    samples: dict[str, list[float]] = {name: [] for name in runners}
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    load = [os.getloadavg()]
    for i in range(warmup + runs):
        for name, once in runners.items():
            c0, t0 = cpu_seconds(), time.perf_counter_ns()
            try:
                once()
            except Exception as exc:
                errors[name] = str(exc)
                continue
            if i >= warmup:
                samples[name].append((time.perf_counter_ns() - t0) / 1e6)
                cpu[name].append((cpu_seconds() - c0) * 1e3)
    load.append(os.getloadavg())
    shutil.rmtree(ws, ignore_errors=True)
    return {"uid": os.getuid(), "samples": samples, "cpu": cpu, "errors": errors, "load": load}


def summarize(samples: list[float]) -> dict[str, float] | None:
    """Median and p90 of one case, or None without samples."""
    if len(samples) < 2:
        return None
    return {
        "median": statistics.median(samples),
        "p90": statistics.quantiles(samples, n=10)[8],
        "n": len(samples),
    }


def run_unpriv(runs: int, warmup: int, before: str | None = None) -> dict[str, Any]:
    """Run the worker as the unprivileged user and read its JSON report."""
    if not os.access(UNPRIV_PYTHON, os.X_OK):
        raise SystemExit(f"{UNPRIV_PYTHON} missing: run scripts/setup as root first")
    tmp = tempfile.mkdtemp(prefix="glove-bench-unpriv-")
    script = Path(tmp) / "bench.py"
    shutil.copy(HERE, script)
    shutil.chown(tmp, UNPRIV_USER)
    os.chmod(tmp, 0o755)
    try:
        p = subprocess.run(
            [
                *("runuser", "-u", UNPRIV_USER, "--", UNPRIV_PYTHON, str(script), "--worker"),
                *("--runs", str(runs), "--warmup", str(warmup)),
                *(("--before", before) if before is not None else ()),
            ],
            cwd=tmp,
            env={**ENV, "TMPDIR": tmp},
            capture_output=True,
            check=False,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if p.returncode != 0:
        raise SystemExit(f"unprivileged worker failed: {p.stderr.decode()[-2000:]}")
    report: dict[str, Any] = json.loads(p.stdout)
    return report


def table_row(*args: Any, **kwargs: Any) -> None:
    """A headline row for ``python -m benchmarks`` (imported here: the worker runs alone)."""
    sys.path.insert(0, str(HERE.parents[2]))
    from benchmarks import _report

    _report.row(*args, **kwargs)


def ratio(a: dict[str, float] | None, b: float | None) -> str:
    """``a.median / b`` formatted, or n/a."""
    if a is None or not b:
        return "n/a"
    return f"{a['median'] / b:.2f}x"


def report(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Print the table and ratios; return the summary as a JSON-able dict."""
    summary: dict[str, Any] = {}
    for user, res in results.items():
        stats = {name: summarize(s) for name, s in res["samples"].items()}
        cpu = {name: summarize(s) for name, s in res.get("cpu", {}).items()}
        load = res.get("load", [])
        summary[user] = {"stats": stats, "cpu": cpu, "errors": res["errors"], "load": load}
        loads = " -> ".join("/".join(f"{x:.2f}" for x in avg) for avg in load)
        print(f"\n== {user} (uid {res['uid']}) == load average {loads}")
        print(f"{'case':<18} {'median ms':>10} {'p90 ms':>10} {'cpu ms':>10} {'n':>5}")
        for name in CASES:
            st = stats.get(name)
            if st is None:
                if name in res["samples"] or name in res["errors"]:
                    print(
                        f"{name:<18} {'n/a':>10} {'n/a':>10}   {res['errors'].get(name, '')[:60]}"
                    )
                continue
            used = cpu.get(name)
            used_ms = f"{used['median']:>10.2f}" if used else f"{'n/a':>10}"
            print(f"{name:<18} {st['median']:>10.2f} {st['p90']:>10.2f} {used_ms} {st['n']:>5}")
        bw = stats.get("bwrap")
        py = stats.get("python")
        bw_m = bw["median"] if bw else None
        budget = bw["median"] + py["median"] if bw and py else None
        ratios = {
            "library/bwrap": ratio(stats.get("library"), bw_m),
            "library-nolimits/bwrap": ratio(stats.get("library-nolimits"), bw_m),
            "cli/bwrap": ratio(stats.get("cli"), bw_m),
            "cli/(bwrap+python)": ratio(stats.get("cli"), budget),
        }
        if stats.get("cli-before"):
            ratios["cli-before/(bwrap+python)"] = ratio(stats.get("cli-before"), budget)
            before = stats["cli-before"]
            ratios["cli/cli-before"] = ratio(stats.get("cli"), before["median"] if before else None)
        summary[user]["ratios"] = ratios
        for k, v in ratios.items():
            print(f"  {k:<24} {v}")
        lib, cli = stats.get("library"), stats.get("cli")
        if lib and bw_m:
            table_row(
                "launch", f"library launch ({user})", lib["median"], "bwrap", bw_m, "ms", goal=1.2
            )
        if cli and budget:
            table_row(
                "launch",
                f"glove exec /bin/true ({user})",
                cli["median"],
                "bwrap + python",
                budget,
                "ms",
                goal=1.5,
            )
    return summary


def main() -> None:
    """Parse arguments; run the workers; print and optionally save the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the summary here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-unpriv", action="store_true", help="measure root only")
    ap.add_argument(
        "--before",
        metavar="SRC",
        help="also run the cli case from this source tree (a checkout or git worktree of "
        "another commit), interleaved: the before/after of a change in one run",
    )
    args = ap.parse_args()
    if args.worker:
        json.dump(worker(args.runs, args.warmup, args.before), sys.stdout)
        return
    ensure_bwrap()
    before = str(Path(args.before).resolve()) if args.before else None
    if before is not None:  # byte-compiled once, so the unprivileged user needs no writes
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{before}/src"], check=True)
    user = "root" if os.geteuid() == 0 else "user"
    results = {user: worker(args.runs, args.warmup, before)}
    if os.geteuid() == 0 and not args.no_unpriv:
        results["unpriv"] = run_unpriv(args.runs, args.warmup, before)
    summary = report(results)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
