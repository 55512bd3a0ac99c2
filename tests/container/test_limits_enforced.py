"""The six limits, enforced for real, with the mechanism reported (or refused)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.container.conftest import GloveExec


def test_wall_time_kills_the_whole_tree(glove_exec: GloveExec) -> None:
    """The watchdog kills a setsid'd, double-forked and a stopped grandchild along with sh."""
    marker = f"glove-wall-{os.getpid()}-{glove_exec.who}"
    script = (
        f"setsid bash -c 'exec -a {marker} sleep 300' & "
        f"(bash -c 'exec -a {marker} sleep 300' &) ; "
        f"bash -c 'kill -STOP $$; exec -a {marker} sleep 300' & "
        f"sleep 0.5; pgrep -c -f ^{marker}; sleep 300"
    )
    started = time.monotonic()
    done = glove_exec.sh(script, flags=("--wall-time", "1"))
    assert time.monotonic() - started < 50  # the 1 s limit, not the sleeps' 300 s
    assert done.rc == 137
    assert done.stdout.strip() == "2"  # control: the running markers were visible inside
    assert done.status["outcome"] == "limit"
    assert done.status["limits"]["wall_time"] == {
        "value": 1.0,
        "mechanism": "watchdog",
        "hit": True,
    }
    left = subprocess.run(
        ["pgrep", "-f", f"^{marker}"], capture_output=True, text=True, check=False
    )
    assert left.stdout == ""


def test_output_is_cut_exactly_at_the_cap(glove_exec: GloveExec) -> None:
    """Output beyond the cap is not passed on; the result says truncated and the limit hit."""
    done = glove_exec("yes", flags=("--output", "1000"))
    assert len(done.stdout) == 1000
    assert done.stderr.endswith("glove exec: output limit 1000 reached (pipe-accounting)\n")
    quiet = glove_exec("yes", flags=("--output", "1000", "--quiet"))
    assert quiet.stderr == "glove exec: output limit reached\n"
    assert done.status["output"] == {"bytes": 1000, "truncated": True}
    assert done.status["limits"]["output"]["hit"] is True
    assert done.status["outcome"] == "limit"


def test_orphan_holding_the_pipe_does_not_hang(glove_exec: GloveExec) -> None:
    """A background child that keeps stdout open dies with the sandbox; exec returns at once."""
    started = time.monotonic()
    done = glove_exec.sh("(sleep 300 &) ; echo parent-done; exit 3")
    assert time.monotonic() - started < 50  # at once, not the orphan's 300 s
    assert done.rc == 3
    assert done.stdout == "parent-done\n"


def test_disk_limit_bounds_scratch(glove_exec: GloveExec) -> None:
    """Writing past --disk fails with ENOSPC and the result marks the disk limit hit."""
    done = glove_exec.sh(
        "dd if=/dev/zero of=/tmp/fill bs=64k count=64 2>&1; echo rc=$?",
        flags=("--disk", "1M"),
    )
    assert "No space left" in done.stdout
    assert done.status["limits"]["disk"]["mechanism"] == "tmpfs-size"
    assert done.status["limits"]["disk"]["hit"] is True


@pytest.mark.parametrize("mode", ["clone3", "fork"])
def test_pids_limit_stops_a_fork_bomb(
    glove_exec: GloveExec, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A fork loop hits --pids and the whole sandbox ends at once (a setsid'd sleeper too):
    on a cgroup from the refused fork, under the user-namespace rlimit from the supervisor's
    count of the tree reaching it, on either launch path (the fork path has a reaper)."""
    monkeypatch.setenv("GLOVE_SANDBOX_LAUNCH", mode)
    marker = f"glove-pids-{os.getpid()}-{glove_exec.who}"
    done = glove_exec(
        "/bin/bash",
        "-c",
        f"setsid bash -c 'exec -a {marker} sleep 300' & exec python3 -c '"
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as e:\n"
        "    time.sleep(1); print(n, e.errno)\n'",
        flags=("--pids", "16"),
        timeout=60,
    )
    mechanism = "cgroup-v1-pids" if glove_exec.who == "root" else "rlimit-nproc-userns"
    assert done.status["limits"]["pids"] == {"value": 16, "mechanism": mechanism, "hit": True}
    assert done.status["outcome"] == "limit"
    assert done.status["error"] == "pids limit reached"
    assert done.rc == 137
    assert done.stdout == ""  # killed within the second the loop waits before printing
    left = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, check=False)
    assert left.stdout == b""


@pytest.mark.parametrize("mode", ["clone3", "fork"])
def test_pids_below_the_limit_are_not_killed(
    glove_exec: GloveExec, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A command holding limit-2 processes for a second (many polls) runs to its end: the
    count never reaches the limit, on either launch path."""
    monkeypatch.setenv("GLOVE_SANDBOX_LAUNCH", mode)
    hold = (
        "import os, time\n"
        "kids = []\n"
        "for _ in range(13):\n"  # with this one, 14 processes: --pids 16 less two
        "    kid = os.fork()\n"
        "    if kid == 0:\n"
        "        time.sleep(1); os._exit(0)\n"
        "    kids.append(kid)\n"
        "print(sum(os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) == 0 for k in kids))\n"
    )
    done = glove_exec("python3", "-c", hold, flags=("--pids", "16"), timeout=60)
    assert done.status["outcome"] == "exited", done.status
    assert done.rc == 0
    assert done.stdout == "13\n"
    assert done.status["limits"]["pids"]["hit"] is not True


def test_memory_limit_mechanism_or_refusal(glove_exec: GloveExec) -> None:
    """Root gets a memory cgroup that OOM-kills; unprivileged is refused unless it accepts."""
    hog = ("python3", "-c", "b = bytearray(256 * 1024 * 1024); print('allocated')")
    done = glove_exec(*hog, flags=("--memory", "64M"))
    if glove_exec.who == "root":
        assert done.status["outcome"] == "limit"
        assert done.status["limits"]["memory"] == {
            "value": 64 * 2**20,
            "mechanism": "cgroup-v1-memory",
            "hit": True,
        }
        assert done.rc == 137
        return
    assert done.rc == 125
    assert done.status["outcome"] == "setup_error"
    assert "--accept-weaker memory" in done.status["error"]
    weaker = glove_exec(*hog, flags=("--memory", "64M", "--accept-weaker", "memory"))
    assert weaker.status["limits"]["memory"]["mechanism"] == "rlimit-as-per-process"
    assert "MemoryError" in weaker.stderr
    assert weaker.rc == 1


def test_cpu_time_limit(glove_exec: GloveExec) -> None:
    """A busy loop is stopped near --cpu-time by the tree-wide mechanism (or refused)."""
    loop = ("python3", "-c", "while True: pass")
    if glove_exec.who != "root":
        refused = glove_exec(*loop, flags=("--cpu-time", "1"))
        assert refused.rc == 125
        assert "cpu_time" in refused.status["error"]
        done = glove_exec(*loop, flags=("--cpu-time", "1", "--accept-weaker", "all"))
        assert done.status["limits"]["cpu_time"]["mechanism"] == "rlimit-cpu-per-process"
        assert done.rc == 128 + 24  # SIGXCPU
        assert done.status["outcome"] == "limit"
        assert done.status["limits"]["cpu_time"]["hit"] is True
        return
    # The loop never ends by itself: the outcome and the hit say the CPU limit ended it (no
    # wall-clock bound: on a loaded host a CPU second takes several seconds of wall time).
    done = glove_exec(*loop, flags=("--cpu-time", "1"))
    assert done.status["outcome"] == "limit"
    assert done.status["limits"]["cpu_time"] == {
        "value": 1.0,
        # cpu.stat of the sandbox's v2 group: this host's empty v2 tree has it, unlike
        # the controllers (tests/container/test_cgroup_v2_host.py).
        "mechanism": "cgroup-v2-cpu-watchdog",
        "hit": True,
    }


def test_bad_limit_values_are_setup_errors(glove_exec: GloveExec) -> None:
    """Malformed or out-of-range limit values fail with 125 and say why."""
    for flags, word in (
        (("--memory", "12x"), "not a size"),
        (("--pids", "1"), "pids"),
        (("--wall-time", "-3"), "seconds"),
        (("--accept-weaker", "bogus"), "unknown"),
    ):
        done = glove_exec("true", flags=flags)
        assert done.rc == 125
        assert word in done.status["error"]


#: How long the stalled-reader test waits for the marker to appear, then to be gone.
STALL_DEADLINE_S = 60.0


def _running(marker: str) -> bool:
    found = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, check=False)
    return bool(found.stdout)


def _until(condition: Callable[[], bool], deadline_s: float) -> bool:
    """Poll ``condition`` every 20 ms until it holds (True) or ``deadline_s`` passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_stalled_reader_does_not_stall_the_watchdog(glove_exec: GloveExec) -> None:
    """With nobody reading glove's stdout, --wall-time still kills the sandbox."""
    marker = f"glove-stall-{os.getpid()}-{glove_exec.who}"
    status_path = glove_exec.workspace.parent / "stall.json"
    argv = [
        *glove_exec.wrap,
        glove_exec.python,
        "-m",
        "glove",
        "exec",
        "--wall-time",
        "1",
        "--json-status",
        str(status_path),
        "--",
        "/bin/bash",
        "-c",
        f"exec -a {marker} yes",
    ]
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        argv, cwd=glove_exec.workspace, stdout=write_end, stderr=subprocess.DEVNULL
    )
    os.close(write_end)

    try:
        # Waited on, not timed: under load the start alone can take longer than the limit.
        assert _until(lambda: _running(marker), STALL_DEADLINE_S), (
            "control: the marker process runs while the reader stalls"
        )
        assert _until(lambda: not _running(marker), STALL_DEADLINE_S), (
            "the sandbox outlived its wall time behind a stalled reader"
        )
    finally:
        os.close(read_end)
        proc.wait(timeout=30)
    assert '"wall_time":{"value":1.0,"mechanism":"watchdog","hit":true}' in (
        status_path.read_text()
    )


def test_nothing_outlives_a_killed_launcher(glove_exec: GloveExec) -> None:
    """SIGKILL to the glove process takes the sandbox with it (PR_SET_PDEATHSIG on init)."""
    marker = f"glove-orphan-{os.getpid()}-{glove_exec.who}"
    argv = [
        *glove_exec.wrap,
        glove_exec.python,
        "-m",
        "glove",
        "exec",
        "--",
        "/bin/bash",
        "-c",
        f"(exec -a {marker} sleep 300) & exec -a {marker} sleep 300",
    ]
    proc = subprocess.Popen(
        argv, cwd=glove_exec.workspace, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, check=False)
            if len(found.stdout.split()) == 2:
                break
            time.sleep(0.05)
        assert len(found.stdout.split()) == 2, "control: both sleepers started"
        launcher = proc.pid
        if glove_exec.wrap:
            launcher = int(
                Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0]
            )
        os.kill(launcher, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, check=False)
            if not left.stdout:
                break
            time.sleep(0.05)
        assert left.stdout == b""
    finally:
        proc.kill()
        proc.wait(timeout=10)
