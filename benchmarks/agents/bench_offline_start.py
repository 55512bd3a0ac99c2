"""CPU time of an offline agent start: ``glove exec --agent`` against the same start in bwrap.

Run as root with the project interpreter, after ``scripts/setup`` (it installs the pinned
agents into ``tests/agents/npm``)::

    .venv/bin/python benchmarks/agents/bench_offline_start.py [--rounds 3] [--seconds 8]

Each case runs ``timeout SECONDS claude -p hello`` with no network (a fake API key, no
base URL): Claude Code tries to reach its API, name resolution fails, and it retries until
``timeout`` ends it. What is measured is the **CPU time of the whole tree** (the children's
rusage of this process, so the launcher, the sandbox and every agent process), because a
resolver that busy-loops burns CPU at the same wall time:

``bwrap``   ``bwrap --unshare-all --die-with-parent --new-session`` with the same binds as the
            ``claude`` profile (no ``/etc/resolv.conf``: lookups go to 127.0.0.1:53)
``glove``   ``python -m glove exec -q --agent claude`` (its own offline ``resolv.conf``): the
            CLI, its launcher and the whole sandboxed tree, all reaped through this process

It prints the CPU seconds per case (median over the rounds, interleaved) and the ratio
glove/bwrap; the goal is at most 2x.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NPM = REPO / "tests" / "agents" / "npm" / "node_modules"
PACKAGE = NPM / "@anthropic-ai" / "claude-code"
EXECUTABLE = PACKAGE / "bin" / "claude.exe"
SYSTEM_BINDS = ("/usr", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts",
                "/etc/ld.so.cache", "/etc/ssl/certs", "/etc/ca-certificates")  # fmt: skip
KEY = "sk-ant-bench-0000000000000000000000"


def _own_cpu(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """Run ``argv``; return the CPU of the processes this one reaps, and their stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, check=False)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


#: Inside bwrap a shell runs the start and prints its children's CPU (cutime + cstime):
#: bwrap's pid-namespace init does not pass the tree's rusage up to this process.
_TREE_CPU = (
    "timeout {seconds} {exe} -p hello >/dev/null 2>&1; "
    'set -- $(cat /proc/$$/stat | cut -d")" -f2); echo CPU $((${{14}} + ${{15}}))'
)


def _bwrap(home: Path, workspace: Path, seconds: int) -> list[str]:
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"]
    for path in SYSTEM_BINDS:
        if Path(path).exists():
            argv += ["--ro-bind", path, path]
    for name in ("bin", "lib", "lib64", "sbin"):
        argv += ["--symlink", f"usr/{name}", f"/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
             "--ro-bind", str(PACKAGE), str(PACKAGE), "--bind", str(home), str(home),
             "--bind", str(workspace), str(workspace), "--chdir", str(workspace),
             "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", str(home),
             "--setenv", "ANTHROPIC_API_KEY", KEY, "--setenv", "DISABLE_AUTOUPDATER", "1",
             "--", "/bin/sh", "-c", _TREE_CPU.format(seconds=seconds, exe=EXECUTABLE)]  # fmt: skip
    return argv


def main() -> int:
    """Measure both cases, interleaved, and print CPU seconds and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=8, help="how long each start may retry")
    args = parser.parse_args()
    if not EXECUTABLE.exists() or shutil.which("bwrap") is None:
        sys.exit("needs the pinned agents (scripts/setup) and bubblewrap")
    base = Path(tempfile.mkdtemp(prefix="glove-bench-agents-", dir="/var/tmp"))
    try:
        workspace = base / "ws"
        workspace.mkdir()
        bwrap_home = base / "bwrap-home"
        bwrap_home.mkdir()
        env = {"PATH": f"{NPM / '.bin'}:/usr/bin:/bin", "HOME": str(base),
               "XDG_DATA_HOME": str(base / "xdg"), "ANTHROPIC_API_KEY": KEY}  # fmt: skip
        status = base / "status.json"
        glove = [sys.executable, "-m", "glove", "exec", "-q", "--agent", "claude",
                 "--json-status", str(status), "--", "-p", "hello"]  # fmt: skip
        ticks = os.sysconf("SC_CLK_TCK")
        samples: dict[str, list[float]] = {"bwrap": [], "glove": []}
        for _ in range(args.rounds):
            outer, out = _own_cpu(_bwrap(bwrap_home, workspace, args.seconds), env, workspace)
            inner = int(out.split()[-1]) / ticks if "CPU" in out else float("nan")
            samples["bwrap"].append(outer + inner)
            # SIGTERM after the same window: glove passes it on, the agent exits. glove's
            # launcher reaps its init, which reaped the whole tree, so this process's
            # children's rusage already holds every agent process (unlike bwrap's, whose
            # pid-namespace init is not reaped through it). The init's own report in
            # --json-status is the tree without the launcher: it must not be larger.
            outer, _ = _own_cpu(["timeout", str(args.seconds), *glove], env, workspace)
            usage = json.loads(status.read_text())["usage"]
            tree = usage["cpu_user_s"] + usage["cpu_system_s"]
            if tree > outer + 0.05:
                sys.exit(
                    f"the sandbox's tree ({tree:.2f} s) exceeds what was reaped ({outer:.2f} s)"
                )
            samples["glove"].append(outer)
        for name, values in samples.items():
            shown = ", ".join(f"{v:.2f}" for v in values)
            print(f"{name:6} CPU s median {statistics.median(values):.2f}  ({shown})")
        ratio = statistics.median(samples["glove"]) / statistics.median(samples["bwrap"])
        print(f"ratio glove/bwrap (CPU): {ratio:.2f}x (goal: at most 2x)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
