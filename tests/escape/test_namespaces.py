"""Escape attempts against the namespace perimeter: pids, ids, hostname, IPC, lifetimes."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.escape._harness import (
    Sandbox,
    glove_pid,
    host_pids_with,
    kill_marked,
    kill_tree,
    wait_until,
)

NAMESPACES = ("user", "pid", "mnt", "net", "ipc", "uts", "cgroup")
SURVIVOR_GRACE_S = 5.0


def test_host_pids_are_invisible(sb: Sandbox) -> None:
    """No host process is visible or signalable, the command is near the pidns init."""
    marker = sb.marker("hostpid")
    host = subprocess.Popen([marker, "60"], executable="/bin/sleep")
    try:
        assert wait_until(lambda: host_pids_with(marker), 5), "control: host marker not found"
        parts = [marker[:8], marker[8:]]
        report = sb.probe("pids", {"marker_parts": parts, "host_pid": host.pid})
    finally:
        host.kill()
        host.wait()
    assert report["marker_pids"] == []
    assert len(report["pids"]) < 10, report["pids"]
    assert report["self"] < 10
    # The host pid either does not exist in the sandbox pidns or names a sandbox process.
    if "ok" in report["kill_host_pid"]:
        assert host.pid in report["pids"]
    else:
        assert report["kill_host_pid"]["errno"] in {"ESRCH", "EPERM"}
    host_pid1 = Path("/proc/1/cmdline").read_bytes()[:64].decode("latin-1")
    assert report["pid1_cmdline"].get("ok") != host_pid1, "the host's init is visible as pid 1"


def test_kill_minus_one_stays_inside(sb: Sandbox) -> None:
    """kill(-1) from inside reaches no host process of the launching user."""
    marker = sb.marker("victim")
    victim = subprocess.Popen(
        sb.user.argv(["/bin/bash", "-c", f"exec -a {marker} /bin/sleep 60"]),
    )
    try:
        assert wait_until(lambda: host_pids_with(marker), 5), "control: the victim runs"
        report = sb.probe("kill-all")
        assert "ok" in report["kill_minus_one"], f"control: kill(-1) ran: {report}"
        assert report["child_signal"] == signal.SIGTERM, f"control: it hit the sandbox: {report}"
        assert host_pids_with(marker), "kill(-1) in the sandbox killed a host process"
    finally:
        kill_marked(marker)
        victim.wait(timeout=10)


def test_namespaces_differ_from_host(sb: Sandbox) -> None:
    """Every namespace of the sandboxed command is a fresh one, none the launcher's."""
    inside = sb.probe("ns")
    host = sb.host_probe("ns")
    for name in NAMESPACES:
        assert "ok" in host[name], f"control: host {name} ns unreadable: {host[name]}"
        assert "ok" in inside[name], f"{name} ns unreadable inside: {inside[name]}"
        assert inside[name]["ok"] != host[name]["ok"], f"{name} namespace shared with the host"


def test_hostname_is_private_and_fixed(sb: Sandbox) -> None:
    """The hostname differs from the host's and cannot be changed from inside."""
    before = socket.gethostname()
    report = sb.probe("hostname")
    assert report["hostname"] != before
    assert "errno" in report["sethostname"], "sethostname succeeded inside the sandbox"
    assert report["after"] == report["hostname"]
    assert socket.gethostname() == before


def _sysv_ipc_create(key: int) -> list[int]:
    """Create a SysV shm segment, message queue and semaphore set with ``key`` (mode 0666)."""
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_creat = 0o1000
    ids = [
        libc.shmget(key, 4096, ipc_creat | 0o666),
        libc.msgget(key, ipc_creat | 0o666),
        libc.semget(key, 1, ipc_creat | 0o666),
    ]
    assert all(i >= 0 for i in ids), f"control: cannot create host IPC objects: {ids}"
    return ids


def _sysv_ipc_remove(ids: list[int]) -> None:
    """Remove the objects created by :func:`_sysv_ipc_create`."""
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    libc.shmctl(ids[0], ipc_rmid, None)
    libc.msgctl(ids[1], ipc_rmid, None)
    libc.semctl(ids[2], 0, ipc_rmid)


def test_host_ipc_objects_are_invisible(sb: Sandbox) -> None:
    """Host SysV shm/msg/sem, POSIX shm and message queues cannot be found from inside."""
    key = int(sb.tag[:7], 16) | 0x10000000
    shm_name = sb.marker("shm")
    mq_name = "/" + sb.marker("mq")
    ids = _sysv_ipc_create(key)
    shm_path = f"/dev/shm/{shm_name}"
    with open(shm_path, "w") as f:
        f.write("host-secret")
    os.chmod(shm_path, 0o666)
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    mqd = rt.mq_open(mq_name.encode(), os.O_RDWR | os.O_CREAT, 0o666, None)
    try:
        arg = {"key": key, "shm": shm_name, "mq": mq_name}
        control = sb.host_probe("ipc", arg)
        assert "ok" in control["shmget"], f"control: host cannot see its own shm {control}"
        assert "ok" in control["posix_shm"], control
        report = sb.probe("ipc", arg)
    finally:
        _sysv_ipc_remove(ids)
        os.unlink(shm_path)
        if mqd >= 0:
            rt.mq_close(mqd)
        rt.mq_unlink(mq_name.encode())
    for name in ("shmget", "msgget", "semget"):
        assert report[name].get("errno") == "ENOENT", f"{name}: {report[name]}"
    assert report["posix_shm"].get("errno") == "ENOENT", report["posix_shm"]
    assert "ok" not in report["mq_open"], report["mq_open"]
    if mqd >= 0:
        assert "ok" in control["mq_open"], control


def test_descendants_die_with_the_command(sb: Sandbox) -> None:
    """Setsid'd, double-forked and stopped descendants do not outlive the sandbox."""
    marker = sb.marker("orphan")
    try:
        report = sb.probe("spawn", {"marker": marker})
        assert report["spawned"] == 4
        assert wait_until(lambda: not host_pids_with(marker), SURVIVOR_GRACE_S), (
            f"processes outlived the sandbox: {host_pids_with(marker)}"
        )
    finally:
        kill_marked(marker)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_killing_glove_kills_everything(sb: Sandbox, signum: int) -> None:
    """Killing the glove process (-9, TERM, HUP) leaves nothing it started alive."""
    marker = sb.marker("dwp")
    ready = "/workspace/ready"
    proc = sb.popen(
        sb.probe_cmd("spawn", {"marker": marker, "ready": ready, "then": "sleep"}),
        stdout=subprocess.DEVNULL,
    )
    try:
        assert wait_until((sb.ws / "ready").exists, 20), "probe never got ready"
        # Control: the marked descendants exist while glove is alive.
        assert wait_until(lambda: len(host_pids_with(marker)) >= 4, 5), host_pids_with(marker)
        os.kill(glove_pid(sb, proc.pid), signum)
        assert wait_until(lambda: not host_pids_with(marker), SURVIVOR_GRACE_S), (
            f"processes survived signal {signum} to glove: {host_pids_with(marker)}"
        )
        assert wait_until(lambda: proc.poll() is not None, 10), f"glove ignored signal {signum}"
        # The sandboxed probe itself (sleeping in the foreground) is gone too.
        assert wait_until(lambda: not _probe_processes(sb), SURVIVOR_GRACE_S)
    finally:
        kill_tree(proc.pid)
        proc.communicate(timeout=10)
        kill_marked(marker)


def _probe_processes(sb: Sandbox) -> list[int]:
    """Host pids still running this test's probe (their argv names the spawn marker)."""
    return host_pids_with(f'"marker": "{sb.marker("dwp")}"')


def test_nested_user_namespaces_are_impossible(sb: Sandbox) -> None:
    """unshare(CLONE_NEWUSER), unshare(1) and raising max_user_namespaces all fail."""
    report = sb.probe("userns")
    control = sb.host_probe("userns")
    assert control["unshare_newuser"] == {"ok": 0}, f"control: {control}"
    assert "ok" not in report["unshare_newuser"], report
    assert report["unshare_cmd_rc"] != {"ok": 0}, report
    assert "ok" not in report["raise_max_user_namespaces"], report


def test_uid_map_has_one_mapping_of_the_invoker(sb: Sandbox) -> None:
    """uid_map and gid_map hold exactly one line mapping the invoking ids; setgroups denied."""
    report = sb.probe("privs")
    uid_lines = report["uid_map"]["ok"].strip().splitlines()
    gid_lines = report["gid_map"]["ok"].strip().splitlines()
    assert len(uid_lines) == 1, uid_lines
    assert len(gid_lines) == 1, gid_lines
    _inside, outside, count = (int(x) for x in uid_lines[0].split())
    assert (outside, count) == (sb.user.uid, 1)
    _inside, outside, count = (int(x) for x in gid_lines[0].split())
    assert (outside, count) == (sb.user.gid, 1)
    assert report["setgroups_file"] == {"ok": "deny"}
    assert "errno" in report["setgroups"], report["setgroups"]
    assert "errno" in report["write_uid_map"], report["write_uid_map"]
    if not sb.user.is_root:
        assert "errno" in report["setuid0"], report["setuid0"]


def test_sandbox_init_is_not_a_stepping_stone(sb: Sandbox) -> None:
    """The command cannot take its init's fds (/proc, pidfd_getfd), memory, environ or root."""
    report = sb.probe("init")
    targets = {k: v for k, v in report.items() if k not in {"self", "ppid"}}
    assert targets, f"control: the probe found no init or parent to attack: {report}"
    for pid, entry in targets.items():
        assert entry["pidfd_getfd"].get("ok", []) == [], f"pidfd_getfd on {pid}: {entry}"
        for key in ("mem_rw", "environ", "root"):
            assert "ok" not in entry[key], f"/proc/{pid}/{key}: {entry[key]}"
        used = {n: fd for n, fd in entry["fds"].items() if n != "list" and "ok" in fd["use"]}
        assert used == {}, f"fds of pid {pid} usable from the command: {used}"
