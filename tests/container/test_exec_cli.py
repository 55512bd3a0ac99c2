"""``glove exec`` end to end: exit codes, json status, identity, filesystem, hygiene."""

from __future__ import annotations

import os

from tests.container.conftest import GloveExec


def test_exit_code_and_status_are_propagated(glove_exec: GloveExec) -> None:
    """The command's own exit code comes back, with outcome ``exited`` in the json status."""
    done = glove_exec.sh("echo out; echo err >&2; exit 7", flags=("--quiet",))
    assert done.rc == 7
    assert done.stdout == "out\n"
    assert done.stderr == "err\n"
    assert done.status["outcome"] == "exited"
    assert done.status["exit_code"] == 7
    assert done.status["output"] == {"bytes": 8, "truncated": False}


def test_signal_death_maps_to_128_plus_n(glove_exec: GloveExec) -> None:
    """A command that kills itself with SIGTERM exits 143 and reports the signal."""
    done = glove_exec.sh("kill -TERM $$")
    assert done.rc == 143
    assert done.status["outcome"] == "signaled"
    assert done.status["signal"] == 15


def test_command_not_found_is_127_exec_error(glove_exec: GloveExec) -> None:
    """A missing command exits 127 with outcome ``exec_error``."""
    done = glove_exec("no-such-command-here")
    assert done.rc == 127
    assert done.status["outcome"] == "exec_error"
    assert "No such file" in done.status["error"]


def test_non_executable_is_126_exec_error(glove_exec: GloveExec) -> None:
    """A file without execute permission exits 126 with outcome ``exec_error``."""
    (glove_exec.workspace / "script").write_text("#!/bin/sh\necho hi\n")
    done = glove_exec("/workspace/script")
    assert done.rc == 126
    assert done.status["outcome"] == "exec_error"


def test_command_exiting_125_is_not_a_setup_error(glove_exec: GloveExec) -> None:
    """A command's own 125 is told apart from a setup failure by the outcome field."""
    done = glove_exec.sh("exit 125")
    assert done.rc == 125
    assert done.status["outcome"] == "exited"


def test_setup_failure_is_125_and_nothing_runs(glove_exec: GloveExec) -> None:
    """A missing bind source fails setup with 125 before the command runs."""
    done = glove_exec.sh("touch /workspace/ran", flags=("--bind", "/nonexistent-glove-src"))
    assert done.rc == 125
    assert done.status["outcome"] == "setup_error"
    assert "nonexistent-glove-src" in done.status["error"]
    assert not (glove_exec.workspace / "ran").exists()


def test_json_status_to_an_fd(glove_exec: GloveExec) -> None:
    """``--json-status 1`` writes the structured result on the given descriptor."""
    done = glove_exec("true", flags=("--json-status", "1"))
    assert done.rc == 0
    assert '"outcome":"exited"' in done.stdout


def test_identity_and_namespaces(glove_exec: GloveExec) -> None:
    """The command is pid 2 under a reaper, sees its own uid mapped once, and a new hostname."""
    done = glove_exec.sh(
        "echo $$; hostname; cat /proc/self/uid_map; cat /proc/self/setgroups; ls /proc | "
        "grep -c '^[0-9]'"
    )
    pid, hostname, uid_map, setgroups, nprocs = done.stdout.splitlines()
    uid = 0 if glove_exec.who != "unpriv" else int(uid_map.split()[1])
    assert pid == "2"
    assert hostname == "glove"
    assert uid_map.split() == [str(uid), str(uid), "1"]
    assert setgroups == "deny"
    assert int(nprocs) <= 4  # init, sh, ls, grep


def test_root_is_minimal_and_read_only(glove_exec: GloveExec) -> None:
    """Only the expected top-level entries exist, and system dirs and / are read-only."""
    done = glove_exec.sh(
        "ls /; for p in /usr/x /etc/x /x /bin/x; do touch $p 2>/dev/null && echo W$p; done; "
        "touch /tmp/ok /dev/shm/ok /workspace/ok && echo scratch-ok"
    )
    entries = set(done.stdout.split())
    assert {"usr", "etc", "proc", "dev", "tmp", "workspace"} <= entries
    assert not {"root", "home", "var", "sys", "boot", "mnt", "opt", "srv"} & entries
    assert not [line for line in done.stdout.splitlines() if line.startswith("W/")]
    assert "scratch-ok" in done.stdout
    assert (glove_exec.workspace / "ok").exists()


def test_etc_is_an_allowlist(glove_exec: GloveExec) -> None:
    """Secrets under /etc are not visible; the files programs need are."""
    done = glove_exec.sh("ls /etc; echo --; ls /etc/ssl")
    etc, ssl = done.stdout.split("--")
    names = set(etc.split())
    assert "passwd" in names
    assert not {"shadow", "gshadow", "sudoers", "ssh", "machine-id"} & names
    assert "certs" in ssl.split()
    assert "private" not in ssl.split()  # host TLS keys (a root sandbox is host uid 0)


def test_workspace_read_only_mode(glove_exec: GloveExec) -> None:
    """``--workspace-mode ro`` makes the workspace unwritable."""
    done = glove_exec.sh("touch /workspace/x", flags=("--workspace-mode", "ro"))
    assert done.rc != 0
    assert "Read-only" in done.stderr
    assert not (glove_exec.workspace / "x").exists()


def test_extra_bind_read_only_and_target(glove_exec: GloveExec) -> None:
    """``--bind SRC:DST:ro`` shows SRC's content at DST and refuses writes."""
    src = glove_exec.workspace.parent / "data"
    src.mkdir()
    (src / "f").write_text("payload")
    os.chown(src, glove_exec.workspace.stat().st_uid, glove_exec.workspace.stat().st_gid)
    done = glove_exec.sh("cat /data/f; touch /data/g", flags=("--bind", f"{src}:/data:ro"))
    assert done.stdout == "payload"
    assert "Read-only" in done.stderr
    assert not (src / "g").exists()


def test_bind_through_symlink_is_refused(glove_exec: GloveExec) -> None:
    """A bind source given through a symlinked path component is refused at setup."""
    real = glove_exec.workspace.parent / "real"
    real.mkdir()
    link = glove_exec.workspace.parent / "link"
    link.symlink_to(real)
    done = glove_exec.sh(
        "true", flags=("--profile", _write_profile(glove_exec, f'source = "{link}/"'))
    )
    assert done.rc == 125
    assert "symlink" in done.status["error"]


def _write_profile(glove_exec: GloveExec, bind_line: str) -> str:
    path = glove_exec.workspace.parent / "p.toml"
    path.write_text(f'[[bind]]\n{bind_line}\n[[bind]]\nsource = "/usr"\n')
    path.chmod(0o644)
    return str(path)


def test_environment_is_scrubbed(glove_exec: GloveExec) -> None:
    """Only allowlisted variables and --env values reach the command."""
    done = glove_exec.sh("env | sort", flags=("--env", "EXTRA=1"))
    keys = {line.split("=", 1)[0] for line in done.stdout.splitlines()}
    assert "EXTRA" in keys
    assert keys <= {
        "EXTRA",
        "PATH",
        "HOME",
        "TMPDIR",
        "TERM",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "LANGUAGE",
        "TZ",
        "COLORTERM",
        "NO_COLOR",
        "PWD",
        "SHLVL",
        "_",
    }


def test_privileges_are_gone(glove_exec: GloveExec) -> None:
    """Capabilities are empty, no_new_privs and seccomp are on, nested userns fails."""
    done = glove_exec.sh(
        "grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status; "
        "cat /proc/sys/user/max_user_namespaces"
    )
    fields = dict(line.split(":\t") for line in done.stdout.splitlines()[:-1])
    assert fields["CapEff"] == fields["CapBnd"] == fields["CapPrm"] == "0000000000000000"
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2"
    assert done.stdout.splitlines()[-1] == "0"


def test_network_is_loopback_only(glove_exec: GloveExec) -> None:
    """Only lo exists and is up; there is no route to the outside."""
    done = glove_exec(
        "python3",
        "-c",
        "import socket, os\n"
        "print(sorted(os.listdir('/proc/sys/net/ipv4/conf')))\n"
        "s = socket.socket(); s.settimeout(2)\n"
        "try:\n    s.connect(('1.1.1.1', 80))\nexcept OSError as e:\n    print(e.errno)\n"
        "l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n"
        "c = socket.create_connection(l.getsockname()); print('lo-ok')\n",
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "['all', 'default', 'lo']"
    assert lines[1] == "101"  # ENETUNREACH
    assert lines[2] == "lo-ok"


def test_bind_nested_inside_the_workspace(glove_exec: GloveExec) -> None:
    """A --bind whose target is under /workspace appears there, read-only, over the workspace."""
    src = glove_exec.workspace.parent / "nested"
    src.mkdir()
    (src / "f").write_text("inner")
    done = glove_exec.sh(
        "cat /workspace/sub/f; touch /workspace/sub/g; touch /workspace/ok",
        flags=("--bind", f"{src}:/workspace/sub:ro"),
    )
    assert done.stdout == "inner"
    assert "Read-only" in done.stderr
    assert (glove_exec.workspace / "ok").exists()
    assert not (src / "g").exists()


def test_host_root_and_kernel_trees_are_never_bound(glove_exec: GloveExec) -> None:
    """/, kernel filesystems (any spelling) and trees holding them are refused up front."""
    for flags in (
        ("--workspace", "/"),
        ("--workspace", "//"),
        ("--bind", "/proc/sys:/ps"),
        ("--bind", "//proc:/k"),
        ("--bind", "/./sys:/k"),
        ("--bind", "/sys/fs/cgroup:/k"),
    ):
        done = glove_exec("true", flags=flags)
        assert done.rc == 125, flags
        assert done.status["outcome"] == "setup_error"
        assert "refusing" in done.status["error"]


def test_init_hides_the_launcher(glove_exec: GloveExec) -> None:
    """pid 1 shows only 'glove-init': no launcher command line, environment or memory."""
    done = glove_exec.sh(
        "tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/1/environ 2>&1 | head -c 200; "
        "head -c 1 /proc/1/mem 2>&1"
    )
    lines = done.stdout.splitlines()
    assert lines[0].strip() == "glove-init"
    assert "status.json" not in done.stdout
    assert "Permission denied" in lines[1]
    assert "Permission denied" in lines[2] or "Operation not permitted" in lines[2]


def test_closed_json_status_fd_fails_before_running(glove_exec: GloveExec) -> None:
    """--json-status naming a closed fd is a setup error; the command never runs."""
    done = glove_exec.sh("touch /workspace/ran", flags=("--json-status", "97"))
    assert done.rc == 125
    assert "not open for writing" in done.stderr
    assert not (glove_exec.workspace / "ran").exists()


def test_proc_knobs_and_internals_are_closed(glove_exec: GloveExec) -> None:
    """/proc/sys is read-only and root-only kernel internals read as nothing."""
    done = glove_exec.sh(
        "echo 1 > /proc/sys/vm/drop_caches 2>/dev/null && echo WROTE; "
        "for f in slabinfo vmallocinfo kallsyms sysrq-trigger; do "
        "head -c 16 /proc/$f 2>/dev/null | wc -c; done; head -c 5 /proc/version | wc -c"
    )
    lines = done.stdout.split()
    assert "WROTE" not in lines
    assert lines == ["0", "0", "0", "0", "5"]
