"""Escape attempts against the filesystem perimeter: reads, writes, mounts, links, devices."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.escape._harness import Sandbox, kill_tree, wait_until

MIB = 1024 * 1024
SECRET = "glove-host-secret"
# Mount points a sandboxed command may write to: the workspace and the scratch tmpfs.
WRITABLE_MOUNTS = {"/workspace", "/tmp", "/dev/shm", "/", "/dev"}
# Device-node binds and devpts legitimately lack nodev (their nodes must open).
DEVICE_MOUNTS = {
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/pts",
    "/dev/ptmx",
    "/dev/console",
}
DEVICE_NODES = {"/null", "/zero", "/full", "/random", "/urandom", "/tty"}
ALLOWED_DEV = DEVICE_MOUNTS | {
    "/dev/shm",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd",
    "/dev/core",
    "/dev/mqueue",
}
SYSTEM_PREFIXES = ("/usr", "/bin", "/sbin", "/lib", "/etc", "/opt")
FORBIDDEN_MOUNTS = ("/home", "/root", "/var", "/run", "/mnt", "/media", "/srv", "/boot", "/work")


@pytest.fixture
def host_secret() -> Iterator[Path]:
    """A world-readable secret file in the host's /tmp, outside every bind."""
    d = Path(tempfile.mkdtemp(prefix="glove-escape-secret-"))
    d.chmod(0o755)
    f = d / "secret.txt"
    f.write_text(SECRET)
    f.chmod(0o644)
    yield f
    shutil.rmtree(d, ignore_errors=True)


def _denied_or_empty(result: dict[str, object]) -> bool:
    """An attempt failed, or listed a directory that holds nothing."""
    return "ok" not in result or result["ok"] in ([], "")


def test_paths_outside_the_binds_are_unreadable(sb: Sandbox, host_secret: Path) -> None:
    """/root, /home, /etc/shadow, the host's /tmp and this repo cannot be read from inside."""
    control = sb.host_probe("read", {"paths": [str(host_secret)]})
    assert control[str(host_secret)] == {"ok": SECRET}, f"control: {control}"
    paths = [
        "/root",
        "/home",
        f"/home/{sb.user.name}",
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/ssh",
        "/etc/ssl/private",
        str(host_secret),
        str(host_secret.parent),
        str(Path(__file__).resolve().parent),
        "/var/tmp/glove-unpriv",
        "/proc/1/root/etc/shadow",
        "/proc/kcore",
    ]
    report = sb.probe("read", {"paths": [*paths, "/workspace/probe.py"]})
    assert "ok" in report["/workspace/probe.py"], "control: the workspace must be readable"
    leaks = {p: report[p] for p in paths if not _denied_or_empty(report[p])}
    assert leaks == {}, f"readable from inside: {leaks}"


@pytest.fixture
def host_private_key(sb: Sandbox) -> Iterator[Path]:
    """A root-only 'private key' in the host's /etc/ssl/private for one test."""
    key = Path(f"/etc/ssl/private/glove-escape-{sb.tag}.key")
    if not key.parent.is_dir():
        key.parent.mkdir(mode=0o700, parents=True)
    key.write_text(SECRET)
    key.chmod(0o600)
    yield key
    key.unlink(missing_ok=True)


def test_host_private_keys_are_not_exposed(sb: Sandbox, host_private_key: Path) -> None:
    """Root-only TLS keys under /etc/ssl/private stay unreadable, even for a root launcher."""
    assert host_private_key.read_text() == SECRET, "control: the key exists on the host"
    report = sb.probe("read", {"paths": [str(host_private_key)]})
    assert "ok" not in report[str(host_private_key)], f"host private key readable: {report}"


def test_read_only_mounts_refuse_writes(sb: Sandbox) -> None:
    """Every mount except the workspace and scratch tmpfs refuses file creation."""
    report = sb.probe(
        "write",
        {
            "all_mounts": True,
            "paths": ["/usr/glove-x", "/etc/glove-x", "/bin/glove-x", "/workspace/glove-x"],
        },
    )
    assert report["paths"]["/workspace/glove-x"] == {"ok": "created"}, "control: workspace rw"
    for p in ("/usr/glove-x", "/etc/glove-x", "/bin/glove-x"):
        assert "errno" in report["paths"][p], f"{p} writable: {report['paths'][p]}"
    written = {
        mp: r
        for mp, r in report["mounts"].items()
        if "ok" in r and mp not in WRITABLE_MOUNTS and not mp.startswith("/workspace")
    }
    assert written == {}, f"writable mounts: {written}"


@pytest.fixture
def bind_with_submount(sb: Sandbox) -> Iterator[Path]:
    """A host directory owned by the user with a world-writable tmpfs mounted inside it."""
    src = sb.base / "data"
    (src / "sub").mkdir(parents=True)
    sb.give(src)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "glove-escape", str(src / "sub")],
        check=True,
        timeout=10,
    )
    try:
        yield src
    finally:
        subprocess.run(["umount", "-l", str(src / "sub")], check=False, timeout=10)


def test_read_only_bind_submounts_stay_read_only(sb: Sandbox, bind_with_submount: Path) -> None:
    """A ro bind is read-only recursively: writing its submount fails; the host can write."""
    control = sb.host(["/usr/bin/touch", str(bind_with_submount / "sub" / "control")])
    assert control.returncode == 0, f"control: host write failed: {control.stderr!r}"
    report = sb.probe(
        "write",
        {"paths": ["/data/x", "/data/sub/x"]},
        flags=["--bind", f"{bind_with_submount}:/data:ro"],
    )
    assert report["paths"]["/data/x"].get("errno") in {"EROFS", "EACCES"}, report
    assert report["paths"]["/data/sub/x"].get("errno") in {"EROFS", "EACCES"}, report
    assert not (bind_with_submount / "sub" / "x").exists()


@pytest.fixture
def usr_submount(sb: Sandbox) -> Iterator[Path]:
    """A world-writable tmpfs mounted under the host's /usr for the duration of one test."""
    point = Path(f"/usr/local/share/glove-escape-{sb.tag}")
    point.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "glove-escape", str(point)],
        check=True,
        timeout=10,
    )
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False, timeout=10)
        point.rmdir()


def test_system_bind_submounts_are_read_only(sb: Sandbox, usr_submount: Path) -> None:
    """A writable host mount below /usr is read-only inside (recursive ro of system binds)."""
    control = sb.host(["/usr/bin/touch", str(usr_submount / "control")])
    assert control.returncode == 0, f"control: the host can write there: {control.stderr!r}"
    report = sb.probe("write", {"paths": [str(usr_submount / "x")]})
    assert report["paths"][str(usr_submount / "x")].get("errno") in {"EROFS", "EACCES"}, report
    assert not (usr_submount / "x").exists()


def test_read_only_workspace_and_its_submounts(sb: Sandbox) -> None:
    """--workspace-mode ro refuses writes to the workspace and to a submount inside it."""
    sub = sb.ws / "mnt"
    sub.mkdir()
    sb.give(sub)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "glove-escape", str(sub)],
        check=True,
        timeout=10,
    )
    try:
        report = sb.probe(
            "write",
            {"paths": ["/workspace/x", "/workspace/mnt/x"]},
            flags=["--workspace-mode", "ro"],
        )
    finally:
        subprocess.run(["umount", "-l", str(sub)], check=False, timeout=10)
    assert report["paths"]["/workspace/x"].get("errno") in {"EROFS", "EACCES"}, report
    assert report["paths"]["/workspace/mnt/x"].get("errno") in {"EROFS", "EACCES"}, report


def test_mount_flags(sb: Sandbox) -> None:
    """Mounts are nosuid, nodev (but device nodes), system dirs ro, no other host dirs."""
    mounts = sb.probe("mountinfo")["mounts"]
    points = {m["mountpoint"] for m in mounts}
    assert "/workspace" in points, f"control: the workspace bind is missing: {points}"
    for m in mounts:
        mp, opts = m["mountpoint"], m["opts"]
        assert "nosuid" in opts, f"{mp} lacks nosuid: {m}"
        # Device binds (and /dev/null masks over /proc files) need dev; all else is nodev.
        device_bind = m["fstype"] == "devtmpfs" and m.get("root") in DEVICE_NODES
        if mp not in DEVICE_MOUNTS and not device_bind and m["fstype"] != "devpts":
            assert "nodev" in opts, f"{mp} lacks nodev: {m}"
        if mp.startswith(SYSTEM_PREFIXES):
            assert "ro" in opts, f"system mount {mp} is writable: {m}"
        if m["fstype"] in {"proc", "sysfs"}:
            assert "noexec" in opts, f"{mp} lacks noexec: {m}"
        assert not any(mp == f or mp.startswith(f + "/") for f in FORBIDDEN_MOUNTS), (
            f"host path {mp} is mounted: {m}"
        )
    assert not any(m["fstype"] == "sysfs" and "ro" not in m["opts"] for m in mounts)


def test_tmpfs_size_caps_writes(sb: Sandbox) -> None:
    """With --disk 8M, /tmp, /dev/shm and / together hold no more than 8 MiB at once."""
    cap = 8 * MIB
    report = sb.probe(
        "fill",
        {"paths": ["/tmp/fill", "/dev/shm/fill", "/fill"], "max": 64 * MIB},
        flags=["--disk", "8M"],
    )
    assert report["/tmp/fill"]["written"] > 0, "control: /tmp must be writable"
    for path, r in report.items():
        if r["written"] == 0 and r["errno"] in {"EROFS", "EACCES"}:
            continue  # a read-only root is fine too
        assert r["errno"] in {"ENOSPC", "EFBIG", "EDQUOT"}, f"{path}: {r}"
    total = sum(r["written"] for r in report.values())
    assert total <= cap + MIB, f"scratch held {total} bytes at once under --disk {cap}: {report}"


def test_scratch_inodes_are_bounded(sb: Sandbox) -> None:
    """Empty files cost no bytes, so a small --disk must also bound the number of files."""
    report = sb.probe("inodes", {"dir": "/tmp", "max": 100_000}, flags=["--disk", "1M"])
    assert report["made"] > 10, "control: /tmp accepts files"
    assert report["errno"] == "ENOSPC", f"{report['made']} files in a 1 MiB scratch: {report}"


def test_default_tmp_is_size_limited(sb: Sandbox) -> None:
    """Without --disk, /tmp still carries an explicit size below the kernel's default."""
    report = sb.probe("fill", {"paths": ["/tmp/fill"], "max": MIB})
    mem_total = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    assert report["/tmp/fill"]["written"] == MIB, "control: /tmp must be writable"
    assert report["/tmp/fill"]["fs_bytes"] < mem_total // 2, report


def test_symlink_and_hardlink_tricks(sb: Sandbox, host_secret: Path) -> None:
    """Links planted in the workspace or inside never reach host files; hardlinks fail."""
    (sb.ws / "shadow-link").symlink_to("/etc/shadow")
    (sb.ws / "secret-link").symlink_to(host_secret)
    (sb.ws / "root-link").symlink_to("/root")
    for name in ("shadow-link", "secret-link", "root-link"):
        os.lchown(sb.ws / name, sb.user.uid, sb.user.gid)
    report = sb.probe(
        "links",
        {
            "dir": "/workspace",
            "follow": [
                "/workspace/shadow-link",
                "/workspace/secret-link",
                "/workspace/root-link/.bashrc",
            ],
            "plant": ["/etc/shadow", str(host_secret), "/proc/1/root/etc/shadow"],
            "hardlink": ["/usr/bin/true", "/etc/passwd", str(host_secret), "/workspace/probe.py"],
        },
    )
    assert report["hardlink"]["/workspace/probe.py"] == {"ok": "linked"}, "control: same mount"
    assert all("ok" not in r for r in report["follow"].values()), report["follow"]
    assert all("ok" not in r for r in report["plant"].values()), report["plant"]
    cross = {k: v for k, v in report["hardlink"].items() if k != "/workspace/probe.py"}
    assert all("ok" not in r for r in cross.values()), cross
    assert not any(p.name.startswith("hard-usr") for p in sb.ws.iterdir())
    assert host_secret.read_text() == SECRET


def test_symlink_planted_as_bind_source_is_not_followed(sb: Sandbox, host_secret: Path) -> None:
    """A bind source the sandbox replaced with a symlink is refused, not followed to the host.

    The agent controls its workspace: in one run it plants ``/workspace/cache`` as a symlink
    to a host directory; a later run that binds ``WS/cache`` must not expose that directory.
    """
    plant = sb.run(["/bin/ln", "-s", str(host_secret.parent), "/workspace/cache"])
    assert plant.returncode == 0, plant.describe()
    assert (sb.ws / "cache").is_symlink(), "control: the planted link is on the host"
    res = sb.run(
        sb.probe_cmd("read", {"paths": ["/cache/secret.txt"]}), ["--bind", f"{sb.ws}/cache:/cache"]
    )
    if res.returncode == 125:
        assert res.status is not None
        assert res.status["outcome"] == "setup_error"
        return
    report = res.probe()
    assert "ok" not in report["/cache/secret.txt"], f"planted symlink followed: {report}"


def test_bind_source_through_a_planted_directory_link(sb: Sandbox, host_secret: Path) -> None:
    """A bind source whose parent the sandbox replaced with a symlink does not reach the host."""
    sub = host_secret.parent / "sub"
    sub.mkdir()
    (sub / "s.txt").write_text(SECRET)
    sub.chmod(0o755)
    (sub / "s.txt").chmod(0o644)
    plant = sb.run(["/bin/ln", "-s", str(host_secret.parent), "/workspace/cache"])
    assert plant.returncode == 0, plant.describe()
    res = sb.run(
        sb.probe_cmd("read", {"paths": ["/cache/s.txt"]}), ["--bind", f"{sb.ws}/cache/sub:/cache"]
    )
    if res.returncode == 125:
        assert res.status is not None
        assert res.status["outcome"] == "setup_error"
        return
    assert "ok" not in res.probe()["/cache/s.txt"], "planted parent link followed"


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_bind_target_through_a_planted_link_creates_nothing_on_the_host(
    sb: Sandbox, kind: str
) -> None:
    """A bind target nested in the workspace under a planted symlink never lands on the host.

    The agent plants ``/workspace/sub -> HOST_DIR``; an operator's ``--bind SRC:/workspace/sub/x``
    must not make glove create ``x`` (a mount point) inside HOST_DIR, nor mount there.
    """
    victim = sb.base / "victim"
    victim.mkdir()
    sb.give(victim)
    src = sb.base / "src"
    src.mkdir()
    (src / "f.txt").write_text("operator data")
    sb.give(src)
    plant = sb.run(["/bin/ln", "-s", str(victim), "/workspace/sub"])
    assert plant.returncode == 0, plant.describe()
    bind = f"{src}:/workspace/sub/x" if kind == "dir" else f"{src / 'f.txt'}:/workspace/sub/x"
    res = sb.run(["/bin/true"], ["--bind", bind])
    assert list(victim.iterdir()) == [], f"glove created {list(victim.iterdir())} on the host"
    assert res.returncode in {0, 125}, res.describe()


# A reader that needs no probe.py (used where /workspace is not the probes' workspace).
PROBE_READ = (
    "import json\n"
    "try:\n    r = {{'ok': open('{path}').read()}}\n"
    "except OSError as e:\n    r = {{'errno': e.errno}}\n"
    "print('GLOVE-PROBE:' + json.dumps({{'read': r}}))"
)


@pytest.mark.parametrize(
    ("source", "probe_path"),
    [("//proc", "/k/1/cmdline"), ("//sys", "/k/kernel/uevent_seqnum"), ("//", "/k{ws}/probe.py")],
)
@pytest.mark.parametrize("via", ["bind", "workspace"])
def test_kernel_trees_never_exposed_by_spelling(
    sb: Sandbox, source: str, probe_path: str, via: str
) -> None:
    """The host's /, /proc and /sys cannot be bound under another spelling (``//proc``)."""
    probe_path = probe_path.format(ws=sb.ws)
    if via == "bind":
        flags = ["--bind", f"{source}:/k"]
    else:
        flags = ["--workspace", source]
        probe_path = probe_path.replace("/k", "/workspace", 1)
    cmd = ["/usr/bin/python3", "-I", "-S", "-c", PROBE_READ.format(path=probe_path)]
    res = sb.run(cmd, flags)
    if res.returncode == 125:
        return
    report = res.probe()["read"]
    assert "ok" not in report, f"{flags} exposed the host: {report}"


@pytest.fixture
def source_with_procfs(sb: Sandbox) -> Iterator[Path]:
    """A host directory with a procfs mounted inside it (like a build chroot)."""
    src = sb.base / "chroot"
    (src / "proc").mkdir(parents=True)
    sb.give(src)
    subprocess.run(["mount", "-t", "proc", "proc", str(src / "proc")], check=True, timeout=10)
    try:
        yield src
    finally:
        subprocess.run(["umount", "-l", str(src / "proc")], check=False, timeout=10)


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_kernel_fs_submount_in_a_bind_is_not_exposed(
    sb: Sandbox, source_with_procfs: Path, mode: str
) -> None:
    """A procfs mounted below a bind source does not reach the sandbox (nor rw for uid 0)."""
    path = "/chroot/proc/1/cmdline"
    res = sb.run(
        sb.probe_cmd("read", {"paths": [path, "/chroot/proc/sys/kernel/core_pattern"]}),
        ["--bind", f"{source_with_procfs}:/chroot:{mode}"],
    )
    if res.returncode == 125:
        return
    report = res.probe()
    host_pid1 = Path("/proc/1/cmdline").read_bytes()[:64].decode("latin-1")
    assert report[path].get("ok") != host_pid1, f"host procfs exposed through a submount: {report}"


RACE_LAUNCHES = 12


@pytest.mark.parametrize("how", ["bind", "workspace"])
def test_source_swapped_during_launch_never_widens(
    sb: Sandbox, host_secret: Path, how: str
) -> None:
    """A second sandbox swapping a bind source with a symlink (renameat2) never exposes the host.

    Two agents share a workspace: one keeps exchanging ``WS/cache`` (a directory) with a
    symlink to a host directory while the other is launched with ``--bind WS/cache:/cache``
    (or with ``--workspace WS/cache``).
    """
    (sb.ws / "cache").mkdir()
    (sb.ws / "cache" / "secret.txt").write_text("decoy")
    (sb.ws / "cache.swap").symlink_to(host_secret.parent)
    sb.give(sb.ws)
    swapper = sb.popen(
        sb.probe_cmd("swap", {"path": "/workspace/cache", "seconds": 60, "ready": "/workspace/go"}),
        ["--wall-time", "90"],
    )
    try:
        assert wait_until((sb.ws / "go").exists, 20), "control: the swapper started"
        outcomes = []
        for _ in range(RACE_LAUNCHES):
            if how == "bind":
                path, flags = "/cache/secret.txt", ["--bind", f"{sb.ws}/cache:/cache:ro"]
            else:
                path, flags = "/workspace/secret.txt", ["--workspace", f"{sb.ws}/cache"]
            cmd = ["/usr/bin/python3", "-I", "-S", "-c", PROBE_READ.format(path=path)]
            res = sb.run(cmd, flags, json_status=False)
            if res.returncode == 125:
                outcomes.append("refused")
                continue
            got = res.probe()["read"]
            assert got.get("ok") != SECRET, "a swapped bind source exposed the host directory"
            outcomes.append(got.get("ok", "denied"))
        assert "decoy" in outcomes or "refused" in outcomes, f"control: {outcomes}"
    finally:
        kill_tree(swapper.pid)
        swapper.communicate(timeout=10)


def test_device_nodes(sb: Sandbox) -> None:
    """Only the minimal /dev exists, mknod fails everywhere, the harmless devices work."""
    report = sb.probe("dev", {"dirs": ["/tmp", "/dev", "/dev/shm", "/workspace"]})
    assert report["dev_null_write"] == {"ok": 1}
    assert report["mkfifo_tmp"] == {"ok": "created"}, "control: FIFOs are fine"
    assert report["dev_urandom_read"] == {"ok": 16}
    assert report["dev_zero_read"] == {"ok": True}
    extra = {f"/dev/{n}" for n in report["dev"]["ok"]} - ALLOWED_DEV
    assert extra == set(), f"unexpected /dev entries: {extra}"
    made = {p: r for p, r in report["mknod"].items() if "ok" in r}
    assert made == {}, f"mknod succeeded: {made}"


def test_proc_and_sys_surfaces(sb: Sandbox) -> None:
    """/proc/kcore, /proc/sysrq-trigger, core_pattern and /sys cannot be read or written."""
    report = sb.probe("procsys")
    # Unreadable, or masked by /dev/null (reads back empty).
    assert report["kcore"].get("ok", "") == "", report["kcore"]
    assert report["kmsg"].get("ok", "") == "", report["kmsg"]
    opened = {p: r for p, r in report["writes"].items() if "ok" in r}
    assert opened == {}, f"opened for writing: {opened}"
    assert "ok" not in report["sys_mkdir_cgroup"]


def test_no_global_proc_file_is_writable(sb: Sandbox) -> None:
    """No /proc file outside the command's own /proc/<pid> opens for writing."""
    report = sb.probe("proc-writable")
    control = sb.host_probe("proc-writable")
    if sb.user.is_root:
        assert "/proc/sys/kernel/core_pattern" in control["writable"], "control: host root"
    # PSI trigger files are world-writable by design (unprivileged triggers, kernel-bounded).
    writable = [p for p in report["writable"] if not p.startswith("/proc/pressure/")]
    assert writable == [], f"writable /proc files: {writable}"


KERNEL_INTERNALS = (
    "/proc/kcore",
    "/proc/kmsg",
    "/proc/keys",
    "/proc/kallsyms",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/kpagecount",
    "/proc/kpageflags",
    "/proc/kpagecgroup",
    "/proc/slabinfo",
    "/proc/pagetypeinfo",
    "/proc/vmallocinfo",
)


def test_kernel_internals_in_proc_are_not_readable(sb: Sandbox) -> None:
    """Exploit aids in /proc (slab, page and symbol maps) read as nothing from inside."""
    report = sb.probe("read", {"paths": [*KERNEL_INTERNALS, "/proc/version"]})
    assert "ok" in report["/proc/version"], "control: /proc is mounted and readable"
    leaks = {p: r["ok"][:40] for p, r in report.items() if p in KERNEL_INTERNALS and r.get("ok")}
    assert leaks == {}, f"kernel internals readable: {leaks}"


@pytest.fixture
def host_listeners(sb: Sandbox) -> Iterator[dict[str, str]]:
    """A host unix socket on a path and two abstract ones (one named like X11's)."""
    path = str(sb.base / "host.sock")
    names = {"abstract": sb.marker("abs"), "x11": f"/tmp/.X11-unix/X{sb.tag}"}
    socks = []
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
    socks.append(s)
    for name in names.values():
        a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        a.bind(b"\0" + name.encode())
        socks.append(a)
    for x in socks:
        x.listen(8)
    yield {"path": path, **names}
    for x in socks:
        x.close()


def test_dangerous_host_sockets_unreachable(sb: Sandbox, host_listeners: dict[str, str]) -> None:
    """docker/systemd/dbus paths, host unix sockets and abstract sockets cannot be reached."""
    abstract = [host_listeners["abstract"], host_listeners["x11"]]
    paths = [
        "/var/run/docker.sock",
        "/run/docker.sock",
        "/run/systemd/private",
        "/run/dbus/system_bus_socket",
        "/var/run/dbus/system_bus_socket",
        "/tmp/.X11-unix/X0",
        host_listeners["path"],
    ]
    control = sb.host_probe("sockets", {"abstract": abstract})
    assert all(r == {"ok": "connected"} for r in control["abstract"].values()), control
    report = sb.probe("sockets", {"paths": paths, "abstract": abstract})
    reached = {k: v for part in report.values() for k, v in part.items() if "ok" in v}
    assert reached == {}, f"host sockets reachable: {reached}"
