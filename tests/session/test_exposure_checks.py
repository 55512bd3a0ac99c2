"""The exposure checks on their own: mountinfo, the filesystem rule through a descriptor
(also for mounts reached by another path), the contents walk, names, and gloved.toml's
``[exposures]`` table."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from glove.config import parse_gloved_config
from glove.host.errors import GlovedConfigError
from glove.session._exposure_checks import (
    MAX_SCAN_DEPTH,
    check_contents,
    check_text,
    parse_mountinfo,
)
from glove.session._exposures import ExposureRegistry
from glove.session.errors import ExposureError
from tests.conftest import Unpriv

MOUNTINFO = (
    "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
    "25 24 0:23 / /dev/shm rw,relatime shared:3 master:1 - tmpfs tmpfs rw,size=64k\n"
    "90 27 0:23 /sub /home/a\\040b rw - tmpfs tmpfs rw\n"
    "garbage line\n"
)

#: Prints, for each path argument, why its filesystem is refused (or null), as JSON.
FS_PROBE = textwrap.dedent(
    """
    import json, os, sys
    from glove.session._exposure_checks import filesystem_refusal
    out = {}
    for path in sys.argv[1:]:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY)
        out[path] = filesystem_refusal(fd)
        os.close(fd)
    print(json.dumps(out))
    """
)
#: Bind the host's /dev/shm and /dev/pts at paths outside /dev, in a private mount
#: namespace, then probe them there: the rule follows the mount, not the path.
BIND_PROBE = textwrap.dedent(
    """
    set -e
    mkdir -p "$1/shm" "$1/pts"
    mount --bind /dev/shm "$1/shm"
    mount --bind /dev/pts "$1/pts"
    exec "$2" -c "$3" "$1/shm" "$1/pts"
    """
)


def test_mountinfo_is_parsed_with_optional_fields_and_escapes() -> None:
    """Optional fields before the separator, an escaped space, and a bad line skipped."""
    entries = parse_mountinfo(MOUNTINFO)
    assert [(e.mount_id, e.device, e.mount_point, e.fstype) for e in entries] == [
        (22, "0:21", "/proc", "proc"),
        (25, "0:23", "/dev/shm", "tmpfs"),
        (90, "0:23", "/home/a b", "tmpfs"),
    ]


def _probe(prefix: list[str], python: str, *paths: str) -> dict[str, str | None]:
    done = subprocess.run(
        [*prefix, python, "-c", FS_PROBE, *paths],
        capture_output=True, text=True, timeout=60, cwd="/", check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, str | None] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("who", ["root", "unpriv"])
def test_kernel_and_runtime_filesystems_are_named(who: str, unpriv: Unpriv) -> None:
    """proc, sysfs, cgroup, cgroup2, devpts, devtmpfs and the tmpfs at /dev/shm are each
    refused by what the descriptor is on; /usr and /var/tmp are not."""
    prefix, python = (unpriv.command(), unpriv.python) if who == "unpriv" else ([], sys.executable)
    found = _probe(prefix, python, "/proc", "/sys", "/sys/fs/cgroup/memory",
                   "/sys/fs/cgroup/unified", "/dev/pts", "/dev", "/dev/shm", "/usr",
                   "/var/tmp")  # fmt: skip
    expected = {"/proc": "proc", "/sys": "sysfs", "/sys/fs/cgroup/memory": "cgroup",
                "/sys/fs/cgroup/unified": "cgroup2", "/dev/pts": "devpts", "/dev": "devtmpfs",
                "/dev/shm": "mounted at /dev/shm"}  # fmt: skip
    for path, word in expected.items():
        assert word in (found[path] or ""), (path, found[path])
    assert found["/usr"] is None
    assert found["/var/tmp"] is None


@pytest.mark.parametrize("who", ["root", "unpriv"])
def test_a_runtime_mount_reached_by_another_path_is_refused(who: str, unpriv: Unpriv) -> None:
    """/dev/shm and /dev/pts bind-mounted under a plain directory are still refused: the
    tmpfs by every place its superblock is mounted, devpts by its type."""
    base = Path("/var/tmp") / f"glove-bindprobe-{os.getpid()}-{who}"
    base.mkdir()
    try:
        if who == "unpriv":
            os.chown(base, unpriv.uid, unpriv.gid)
            prefix, python = [*unpriv.command(), "unshare", "-Urm"], unpriv.python
        else:
            prefix, python = ["unshare", "-m", "--propagation", "private"], sys.executable
        done = subprocess.run(
            [*prefix, "/bin/sh", "-c", BIND_PROBE, "probe", str(base), python, FS_PROBE],
            capture_output=True, text=True, timeout=60, cwd="/", check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout)
        assert "mounted at /dev/shm" in found[f"{base}/shm"]
        assert "devpts" in found[f"{base}/pts"]
    finally:
        for name in ("shm", "pts"):
            (base / name).rmdir()
        base.rmdir()


def _walk(path: Path, *, sockets: bool, max_entries: int = 1000) -> None:
    fd = os.open(path, os.O_PATH | os.O_DIRECTORY)
    try:
        check_contents(fd, str(path), sockets=sockets, max_entries=max_entries)
    finally:
        os.close(fd)


def test_the_contents_walk_refuses_fifos_and_ungated_sockets(tmp_path: Path) -> None:
    """A FIFO deep down is always refused; a socket only when no gate covers it; a tree
    larger than the bound is refused rather than half checked."""
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (tmp_path / "a" / "file").write_text("x")
    (tmp_path / "link").symlink_to("/dev")  # a link is not followed
    _walk(tmp_path, sockets=True)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(deep / "s.sock"))
        _walk(tmp_path, sockets=False)
        with pytest.raises(ExposureError, match=r"c/s\.sock is a Unix socket"):
            _walk(tmp_path, sockets=True)
    os.mkfifo(deep / "p")
    with pytest.raises(ExposureError, match=r"c/p is a FIFO"):
        _walk(tmp_path, sockets=False)
    with pytest.raises(ExposureError, match="more than 3 entries"):
        _walk(tmp_path, sockets=False, max_entries=3)


def test_a_wide_tree_needs_few_descriptors_and_a_deep_one_is_refused(tmp_path: Path) -> None:
    """500 sibling directories are walked under a 32-descriptor limit (one is held per
    level, not per directory); a tree deeper than the bound is refused, by its path."""
    wide = tmp_path / "wide"
    for index in range(500):
        (wide / f"d{index}").mkdir(parents=True)
    code = textwrap.dedent(
        """
        import os, resource, sys
        from glove.session._exposure_checks import check_contents
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
        fd = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)
        check_contents(fd, sys.argv[1], sockets=True)
        print("walked")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(wide)], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.stdout == "walked\n", done.stderr
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    inner = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(MAX_SCAN_DEPTH + 1):  # relative mkdirs: the path grows past PATH_MAX
            os.mkdir("d", dir_fd=inner)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=inner)
            os.close(inner)
            inner = child
        with pytest.raises(ExposureError, match=f"deeper than {MAX_SCAN_DEPTH} levels"):
            check_contents(fd, str(tmp_path), sockets=False)
    finally:
        os.close(inner)
        os.close(fd)


def test_an_unreadable_directory_cannot_be_checked(unpriv: Unpriv) -> None:
    """What the owner cannot list is refused (as the unprivileged user: root reads all)."""
    code = textwrap.dedent(
        """
        import os, sys, tempfile
        from glove.session._exposure_checks import check_contents
        from glove.session.errors import ExposureError
        top = tempfile.mkdtemp(dir="/var/tmp")
        os.mkdir(top + "/closed", 0o300)
        fd = os.open(top, os.O_PATH | os.O_DIRECTORY)
        try:
            check_contents(fd, top, sockets=False)
        except ExposureError as exc:
            print(exc)
        os.rmdir(top + "/closed"); os.rmdir(top)
        """
    )
    done = subprocess.run(
        unpriv.command(unpriv.python, "-c", code),
        capture_output=True, text=True, timeout=60, cwd="/", check=False,
    )  # fmt: skip
    assert "closed cannot be read to be checked" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("bad", ["\0", "\n", "\r", "\x1b", "\x7f", "\x85"])
def test_control_characters_are_named(bad: str) -> None:
    """NUL, newline, carriage return, escape, DEL and a C1 character are each refused."""
    with pytest.raises(ExposureError, match=f"U\\+{ord(bad):04X}"):
        check_text(f"/workspace/x{bad}y", "target")
    check_text("/workspace/caf\u00e9 \u2603", "target")  # printable Unicode is fine


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (b'[exposures]\nallow_special = ["run/foo"]\n', "absolute, normalized"),
        (b'[exposures]\nallow_special = ["/run/foo/"]\n', "absolute, normalized"),
        (b'[exposures]\nallow_special = ["/run//foo"]\n', "absolute, normalized"),
        (b'[exposures]\nallow_special = ["/"]\n', "other than /"),
        (b'[exposures]\nallow_special = ["/run/a\\nb"]\n', "control character"),
        (b"[exposures]\nallow_any = true\n", "allow_any"),
        (b'[exposures]\nallow_special = "/run/foo"\n', "allow_special"),
    ],
)
def test_the_exposures_table_is_decoded_strictly(text: bytes, needle: str) -> None:
    """A relative, unnormalized or control-character path, an unknown key or a wrong type
    in [exposures] refuses the whole file, naming the field."""
    with pytest.raises(GlovedConfigError, match=needle):
        parse_gloved_config(text)
    good = parse_gloved_config(b'[exposures]\nallow_special = ["/run/foo"]\n')
    assert good.exposures.allow_special == ["/run/foo"]


def test_a_nul_in_the_path_or_target_is_an_exposure_error(tmp_path: Path) -> None:
    """What the CLI cannot send, the control socket can: a NUL in the path or the target
    is an ExposureError before any open, and nothing is recorded."""
    work = tmp_path / "work"
    work.mkdir(mode=0o700)
    registry = ExposureRegistry(tmp_path / "exposures.json")
    try:
        with pytest.raises(ExposureError, match="U\\+0000"):
            registry.create("x", f"{work}\0/etc")
        with pytest.raises(ExposureError, match="U\\+0000"):
            registry.create("x", str(work), target="/workspace/x\0y")
        assert registry.live() == []
        assert not (tmp_path / "exposures.json").exists()
    finally:
        registry.close()
