"""The default workspace shows at its own host path; ``--use``; what ``glove exec`` says.

Run through the real CLI as root and as the unprivileged user, on the default profile (no
test profile: these tests are about the default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import Unpriv
from tests.container.conftest import ExecResult, GloveExec


def _plain(
    glove_exec: GloveExec, *cmd: str, flags: tuple[str, ...] = (), cwd: Path | None = None
) -> ExecResult:
    """``glove exec`` on the default profile (the fixture's own profile left out)."""
    status = glove_exec.workspace.parent / "plain-status.json"
    status.unlink(missing_ok=True)
    argv = [*glove_exec.wrap, glove_exec.python, "-m", "glove", "exec",
            "--json-status", str(status), *flags, "--", *cmd]  # fmt: skip
    done = subprocess.run(
        argv,
        cwd=cwd or glove_exec.workspace,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    loaded = json.loads(status.read_text()) if status.exists() else {}
    return ExecResult(done.returncode, done.stdout, done.stderr, loaded)


def test_the_workspace_appears_at_its_own_path(glove_exec: GloveExec) -> None:
    """By default the agent and the host name the workspace by the same path, and start in it."""
    (glove_exec.workspace / "from-host").write_text("x")
    done = _plain(glove_exec, "/bin/sh", "-c", 'pwd; ls; echo y > "$PWD/from-inside"')
    assert done.rc == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(glove_exec.workspace)
    assert "from-host" in lines[1:]
    assert (glove_exec.workspace / "from-inside").read_text() == "y\n"
    assert "appears at" not in done.stderr


def test_starting_in_a_subdirectory_starts_there_inside(glove_exec: GloveExec) -> None:
    """With --workspace a parent of the current directory, the command starts where we are."""
    sub = glove_exec.workspace / "a" / "b"
    sub.mkdir(parents=True)
    os.chown(glove_exec.workspace / "a", *_owner(glove_exec.workspace))
    os.chown(sub, *_owner(glove_exec.workspace))
    done = _plain(glove_exec, "pwd", flags=("--workspace", str(glove_exec.workspace)), cwd=sub)
    assert done.stdout.strip() == str(sub), done.stderr


def _owner(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_uid, info.st_gid


def test_a_workspace_under_tmp_appears_at_its_own_path(glove_exec: GloveExec) -> None:
    """A workspace below /tmp is shown at its own path (inside the sandbox's private /tmp),
    with no note; /tmp itself, the sandbox's own, still appears at /workspace with one."""
    uid, gid = _owner(glove_exec.workspace)
    with tempfile.TemporaryDirectory(prefix="glove-ws-", dir="/tmp") as ws:
        os.chown(ws, uid, gid)
        done = _plain(glove_exec, "pwd", flags=("--workspace", ws))
        assert done.stdout.strip() == ws, done.stderr
        assert "appears at" not in done.stderr
    whole = _plain(glove_exec, "pwd", flags=("--workspace", "/tmp"))
    assert whole.stdout.strip() == "/workspace", whole.stderr
    assert "note: the workspace /tmp appears at /workspace" in whole.stderr


def test_a_bind_onto_sandbox_owned_paths_says_what_to_write_instead(
    glove_exec: GloveExec,
) -> None:
    """A bind that would replace the private /tmp or land in the sandbox's /dev or /proc is
    refused (125) with the flag to write instead."""
    for flags, says in (
        (("--bind", "/tmp"), "would replace the sandbox's private /tmp"),
        (("--bind", "/usr/share:/dev/share"), "inside the sandbox-owned /dev"),
        (("--bind", "/usr/share:/proc/share"), "inside the sandbox-owned /proc"),
    ):
        done = _plain(glove_exec, "true", flags=flags)
        assert done.rc == 125, done
        assert says in done.stderr
        assert "--bind " + flags[1].split(":")[0] + ":/mnt/" in done.stderr


def test_a_workspace_under_a_system_bind_is_not_hidden_by_it(glove_exec: GloveExec) -> None:
    """Mounts go parents first: a workspace shown under /usr stays visible (dry run proves the
    order; the bind itself is refused for an unprivileged user who cannot read /usr/local)."""
    done = _plain(glove_exec, "true", flags=("--workspace", "/usr/local", "--dry-run", "--json"))
    assert done.rc == 0, done.stderr
    targets = [m["target"] for m in json.loads(done.stdout)["mounts"]]
    assert targets.index("/usr") < targets.index("/usr/local")


def test_the_weaker_limits_are_named_once_on_stderr(glove_exec: GloveExec) -> None:
    """An unprivileged run says which limits are per process; root (with cgroups) does not."""
    done = _plain(glove_exec, "true")
    notes = [line for line in done.stderr.splitlines() if "per process" in line]
    if glove_exec.who == "unpriv" or os.getuid() != 0:
        assert len(notes) == 1, done.stderr
        assert "memory 4G (RLIMIT_AS, per process)" in notes[0]
        assert done.status["limits"]["memory"]["mechanism"] == "rlimit-as-per-process"
    else:
        assert notes == [], done.stderr
    assert _plain(glove_exec, "true", flags=("-q",)).stderr == ""


def test_the_exit_summary_names_denied_syscalls(glove_exec: GloveExec) -> None:
    """Seccomp refusals are summed up in one line at exit, by name and count."""
    done = _plain(
        glove_exec, "/usr/bin/python3", "-c",
        "import ctypes\nlibc = ctypes.CDLL(None)\n"
        "for _ in range(3): libc.setns(0, 0)\nlibc.unshare(0x20000)\nlibc.syscall(250, 0)\n",
    )  # fmt: skip
    summary = done.stderr.strip().splitlines()[-1]
    assert summary.startswith("glove exec: seccomp refused setns x3, keyctl x1"), done.stderr
    assert "unshare" not in summary  # an expected namespace probe is not named
    assert done.status["denied_syscalls"] == {"setns": 3, "keyctl": 1}
    assert done.status["expected_denials"] == {"namespace_probe": 1}


def test_a_memory_error_under_the_per_process_limit_is_reported_as_hit(
    glove_exec: GloveExec,
) -> None:
    """Under RLIMIT_AS the refusal is invisible from outside; the MemoryError on stderr shows it."""
    grow = "x = bytearray(512 * 1024 * 1024)"
    done = _plain(glove_exec, "/usr/bin/python3", "-c", grow,
                  flags=("--memory", "128M", "--accept-weaker", "memory"))  # fmt: skip
    memory = done.status["limits"]["memory"]
    assert memory["hit"] is True, done.status
    if memory["mechanism"] == "rlimit-as-per-process":
        assert "MemoryError" in done.stderr
        assert "memory limit 128M reached (rlimit-as-per-process)" in done.stderr
        ok = _plain(glove_exec, "true", flags=("--memory", "128M", "--accept-weaker", "memory"))
        assert ok.status["limits"]["memory"]["hit"] is None  # unknown, never a false "no"


def test_usage_is_reported(glove_exec: GloveExec) -> None:
    """The result carries the tree's CPU time and peak memory."""
    done = _plain(
        glove_exec, "/usr/bin/python3", "-c", "x = bytearray(64 << 20); sum(range(10**6))"
    )
    usage = done.status["usage"]
    assert usage["peak_rss_bytes"] >= 64 << 20
    assert usage["cpu_user_s"] + usage["cpu_system_s"] > 0


def test_use_makes_a_host_virtualenv_usable_inside(glove_exec: GloveExec, unpriv: Unpriv) -> None:
    """``--use VENV`` binds the venv and its base interpreter, and puts its bin first on PATH."""
    venv = Path(unpriv.python).parent.parent if glove_exec.who == "unpriv" else Path(sys.prefix)
    script = "import sys, msgspec; print(sys.prefix)"
    done = _plain(glove_exec, "python", "-c", script, flags=("--use", str(venv)))
    assert done.rc == 0, done.stderr
    assert done.stdout.strip() == str(venv)
    without = _plain(glove_exec, "/usr/bin/python3", "-c", "import msgspec")
    assert "ModuleNotFoundError" in without.stderr  # control: the venv is not there otherwise


def test_use_of_a_missing_directory_is_a_setup_error(glove_exec: GloveExec) -> None:
    """A --use that names nothing is refused with its name."""
    done = _plain(glove_exec, "true", flags=("--use", "/nonexistent-venv"))
    assert done.rc == 125
    assert "--use /nonexistent-venv" in done.stderr


def test_dry_run_prints_the_sandbox_and_runs_nothing(glove_exec: GloveExec) -> None:
    """--dry-run lists mounts, env, limits with mechanisms, network and seccomp; nothing runs."""
    done = _plain(glove_exec, "/bin/sh", "-c", "touch ran", flags=("--dry-run",))
    assert done.rc == 0, done.stderr
    assert not (glove_exec.workspace / "ran").exists()
    for needle in ("mounts:", f"{glove_exec.workspace}  rw  bind", "/usr ", "limits:",
                   "wall_time", "pipe-accounting", "seccomp:", "network:  none"):  # fmt: skip
        assert needle in done.stdout, (needle, done.stdout)
    as_json = _plain(glove_exec, "true", flags=("--dry-run", "--json", "--memory", "64M",
                                                "--accept-weaker", "memory"))  # fmt: skip
    description = json.loads(as_json.stdout)
    assert description["limits"]["memory"]["value"] == 64 << 20
    assert description["network"] == {"mode": "none", "interfaces": ["lo"], "routes": 0}
    assert "ptrace" in description["seccomp"]["denied_syscalls"]
    assert description["cwd"] == str(glove_exec.workspace)


def test_dry_run_fails_like_the_launch_would(glove_exec: GloveExec) -> None:
    """A refused launch is refused by the dry run too, with the same message and 125."""
    done = _plain(glove_exec, "true", flags=("--dry-run", "--bind", "/nonexistent-src"))
    assert done.rc == 125
    assert "cannot open bind source /nonexistent-src" in done.stderr


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (("--wall-time", "5x"), "--wall-time: not a duration"),
        (("--memory", "lots"), "--memory: not a size"),
        (("--pids", "many"), "--pids wants a count"),
        (("--env", "NOEQUALS"), "--env wants KEY=VALUE"),
    ],
)
def test_bad_limit_values_name_the_flag(
    glove_exec: GloveExec, flags: tuple[str, ...], needle: str
) -> None:
    """A malformed value is a setup error naming its flag, never a traceback."""
    done = _plain(glove_exec, "true", flags=flags)
    assert done.rc == 125
    assert needle in done.stderr
    assert "Traceback" not in done.stderr


def test_durations_take_units(glove_exec: GloveExec) -> None:
    """``--wall-time 1500ms`` ends a sleeper at 1.5 s (units as profiles accept them)."""
    done = _plain(glove_exec, "sleep", "30", flags=("--wall-time", "1500ms"))
    assert done.status["limits"]["wall_time"] == {
        "value": 1.5,
        "mechanism": "watchdog",
        "hit": True,
    }


def test_dry_run_for_macos_prints_the_seatbelt_profile(glove_exec: GloveExec) -> None:
    """``--dry-run --platform macos`` renders the deny-default SBPL profile on any machine."""
    done = _plain(glove_exec, "sh", flags=("--dry-run", "--platform", "macos"))
    assert done.rc == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["(version 1)", "(deny default)"]
    assert f'"/private{glove_exec.workspace}"' in done.stdout  # macOS: /var is /private/var
    as_json = _plain(glove_exec, "sh", flags=("--dry-run", "--platform", "macos", "--json"))
    assert json.loads(as_json.stdout)["sbpl"] == done.stdout
