"""The exit-status convention: own code, 128+signal, 125 setup, 126 not executable, 127."""

from __future__ import annotations

import json
import os

import pytest

from tests.escape._harness import Sandbox

CASES = {
    "zero": ([], ["/bin/sh", "-c", "exit 0"], 0, "exited", None),
    "three": ([], ["/bin/sh", "-c", "exit 3"], 3, "exited", None),
    "own_125": ([], ["/bin/sh", "-c", "exit 125"], 125, "exited", None),
    "sigterm": ([], ["/bin/sh", "-c", "kill -TERM $$"], 128 + 15, "signaled", 15),
    "sigkill": ([], ["/bin/sh", "-c", "kill -KILL $$"], 128 + 9, "signaled", 9),
    "not_found": ([], ["/nonexistent/glove-cmd"], 127, "exec_error", None),
    "not_executable": ([], ["/workspace/probe.py"], 126, "exec_error", None),
    "setup_failed": (
        ["--bind", "/nonexistent-glove-src:/data"],
        ["/bin/true"],
        125,
        "setup_error",
        None,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_exit_status_mapping(sb: Sandbox, case: str) -> None:
    """glove exec returns the documented code and json outcome for each way a run ends."""
    flags, cmd, code, outcome, signum = CASES[case]
    res = sb.run(cmd, flags)
    assert res.returncode == code, res.describe()
    assert res.status is not None, res.describe()
    assert res.status["outcome"] == outcome, res.status
    assert res.status["exit_code"] == code, res.status
    if signum is not None:
        assert res.status["signal"] == signum, res.status
    if outcome in {"setup_error", "exec_error"}:
        assert res.status["error"], "a refusal must say why"
    contract = {"outcome", "exit_code", "signal", "durations", "limits", "output", "error"}
    assert contract <= set(res.status), f"json-status lacks {contract - set(res.status)}"
    assert set(res.status["output"]) >= {"bytes", "truncated"}, res.status["output"]


def test_json_status_to_an_fd(sb: Sandbox) -> None:
    """--json-status N writes the result to an inherited fd."""
    r, w = os.pipe()
    try:
        res = sb.run(
            ["/bin/sh", "-c", "exit 7"],
            ["--json-status", str(w)],
            pass_fds=(w,),
            json_status=False,
        )
        os.close(w)
        w = -1
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    assert res.returncode == 7, res.describe()
    status = json.loads(data)
    assert status["outcome"] == "exited"
    assert status["exit_code"] == 7


def test_json_status_does_not_follow_a_planted_symlink(sb: Sandbox) -> None:
    """--json-status into the workspace never writes through a symlink the sandbox planted."""
    victim = sb.base / "victim.txt"
    victim.write_text("precious")
    sb.give(victim)
    plant = sb.run(["/bin/ln", "-s", str(victim), "/workspace/status.json"])
    assert plant.returncode == 0, plant.describe()
    assert (sb.ws / "status.json").is_symlink(), "control: the link is on the host"
    res = sb.run(["/bin/true"], ["--json-status", str(sb.ws / "status.json")], json_status=False)
    assert victim.read_text() == "precious", (
        f"glove wrote through the planted link: {res.describe()}"
    )


def test_json_status_does_not_go_through_a_planted_directory_link(sb: Sandbox) -> None:
    """--json-status WS/out/status.json is not created where a planted WS/out link points."""
    elsewhere = sb.base / "elsewhere"
    elsewhere.mkdir()
    sb.give(elsewhere)
    plant = sb.run(["/bin/ln", "-s", str(elsewhere), "/workspace/out"])
    assert plant.returncode == 0, plant.describe()
    assert (sb.ws / "out").is_symlink(), "control: the link is on the host"
    res = sb.run(
        ["/bin/true"], ["--json-status", str(sb.ws / "out" / "status.json")], json_status=False
    )
    assert not (elsewhere / "status.json").exists(), f"written through the link: {res.describe()}"


def test_seccomp_kill_is_reported_as_a_violation(sb: Sandbox) -> None:
    """A command killed by the filter (SIGSYS) exits 128+31 and the result names seccomp."""
    res = sb.run(["/workspace/rawsys", "int80-direct"])
    if res.returncode == 3:  # the filter answered with an errno instead of killing
        return
    assert res.returncode == 128 + 31, res.describe()
    assert res.status is not None
    assert res.status["outcome"] == "signaled"
    assert res.status["violation"] == "seccomp", res.status


def test_stopped_command_still_ends_at_the_wall_limit(sb: Sandbox) -> None:
    """A command that stops itself (SIGSTOP) is still killed at the wall limit."""
    res = sb.run(["/bin/sh", "-c", "kill -STOP $$; sleep 60"], ["--wall-time", "2"])
    assert res.elapsed_s < 40, res.elapsed_s  # the 2 s limit, not a stopped command's forever
    assert res.status is not None
    assert res.status["outcome"] == "limit", res.describe()
    assert res.status["limits"]["wall_time"]["hit"] is True


def test_unusable_json_status_fd_fails_before_running(sb: Sandbox) -> None:
    """--json-status naming a closed fd is refused up front (125); the command never runs."""
    res = sb.run(
        ["/bin/sh", "-c", "touch /workspace/ran"], ["--json-status", "97"], json_status=False
    )
    assert res.returncode == 125, f"status fd 97 is closed, yet: {res.describe()}"
    assert not (sb.ws / "ran").exists(), "the command ran although its result cannot be written"


def test_denied_syscalls_are_reported(sb: Sandbox) -> None:
    """A denied call (ptrace) made inside shows up in the result's denial report."""
    res = sb.run(sb.probe_cmd("seccomp", {"names": ["ptrace_traceme", "getpid"]}))
    assert res.returncode == 0, res.describe()
    assert res.probe()["ptrace_traceme"] == {"errno": "EPERM"}, "control: ptrace was denied"
    assert res.status is not None
    denied = res.status.get("denied_syscalls") or {}
    assert any("ptrace" in str(k) for k in denied), f"no report of the denial: {res.status}"


def test_denial_flood_does_not_stall_the_supervisor(sb: Sandbox) -> None:
    """Processes hammering a denied syscall cannot keep glove from ending them at the wall limit."""
    res = sb.run(
        sb.probe_cmd("deny-flood", {"procs": 8, "seconds": 60}), ["--wall-time", "2"], timeout=60
    )
    # The 2 s limit, not the flood's 60 s (generous for a loaded host: below the 60 s).
    assert res.elapsed_s < 40, f"glove took {res.elapsed_s:.1f}s under a denial flood"
    assert res.status is not None
    assert res.status["outcome"] == "limit", res.describe()
