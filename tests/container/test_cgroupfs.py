"""The sans-IO parsers of cgroup interface files, /proc/self/cgroup and mountinfo."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from glove.container._cgroupfs import (
    Cgroup2Mount,
    cgroup_dir,
    parse_cgroup2_mounts,
    parse_controllers,
    parse_keyed,
    parse_pid_list,
    parse_proc_cgroup,
    parse_proc_cgroups,
)
from glove.container.errors import CgroupFormatError, SandboxError

REPO = Path(__file__).resolve().parents[2]


def test_proc_cgroup_gives_the_v2_line_of_a_hybrid_host() -> None:
    """Only the ``0::`` line counts; v1 lines (named ones too) are skipped."""
    text = "9:name=systemd:/\n4:memory:/process_api/abc\n0::/glove/sbx-1\n"
    assert parse_proc_cgroup(text) == "/glove/sbx-1"
    assert parse_proc_cgroup("4:memory:/x\n") is None


@pytest.mark.parametrize("text", ["0:/x\n", "x::/a\n", "0::relative\n", "0::/a\n0::/b\n"])
def test_proc_cgroup_rejects_malformed_lines(text: str) -> None:
    """A line without three fields, a relative path or two v2 lines is a format error."""
    with pytest.raises(CgroupFormatError):
        parse_proc_cgroup(text)


def test_this_process_has_a_parsable_cgroup() -> None:
    """The live /proc/self/cgroup and mountinfo parse, and the mount reaches our cgroup."""
    own = parse_proc_cgroup(Path("/proc/self/cgroup").read_text())
    mounts = parse_cgroup2_mounts(Path("/proc/self/mountinfo").read_text())
    assert own is not None
    assert mounts
    assert any(cgroup_dir(m, own) is not None for m in mounts)


def test_mountinfo_unescapes_and_skips_other_filesystems() -> None:
    """Octal escapes are decoded; optional fields before ``-`` are allowed; v1 is skipped."""
    text = (
        "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 master:1 - cgroup2 cgroup2 rw\n"
        "31 23 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "35 30 0:26 /a\\040b /mnt/c\\134g rw - cgroup2 none rw\n"
    )
    assert parse_cgroup2_mounts(text) == [
        Cgroup2Mount("/sys/fs/cgroup", "/"),
        Cgroup2Mount("/mnt/c\\g", "/a b"),
    ]


@pytest.mark.parametrize("line", ["1 2 3 4 5", "1 2 3 / /x rw cgroup2 none rw", "1 2 3 4 5 6 -"])
def test_mountinfo_rejects_short_lines(line: str) -> None:
    """A line without the separator or the fields after it is a format error."""
    with pytest.raises(CgroupFormatError):
        parse_cgroup2_mounts(line + "\n")


def test_cgroup_dir_stays_under_the_mount() -> None:
    """A cgroup outside the mount's root is unreachable; one below it maps under the point."""
    whole = Cgroup2Mount("/sys/fs/cgroup/unified", "/")
    assert cgroup_dir(whole, "/") == "/sys/fs/cgroup/unified"
    assert cgroup_dir(whole, "/a/b") == "/sys/fs/cgroup/unified/a/b"
    part = Cgroup2Mount("/mnt", "/unit")
    assert cgroup_dir(part, "/unit/supervisor") == "/mnt/supervisor"
    assert cgroup_dir(part, "/unit") == "/mnt"
    assert cgroup_dir(part, "/unitx") is None
    assert cgroup_dir(part, "/") is None


def test_keyed_files_parse_the_kernel_formats() -> None:
    """memory.events, cgroup.events and cpu.stat are ``key value`` lines."""
    assert parse_keyed("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 1\n") == {
        "low": 0, "high": 0, "max": 3, "oom": 1, "oom_kill": 1, "oom_group_kill": 1,
    }  # fmt: skip
    assert parse_keyed(Path("/proc/self/cgroup").read_text().replace(":", " ")[:0]) == {}


@pytest.mark.parametrize(
    "text", ["max\n", "a -1\n", "a 1\na 2\n", "A 1\n", "a 1 2\n", "a ²\n", "a " + "9" * 21 + "\n"]
)
def test_keyed_files_reject_what_the_kernel_never_writes(text: str) -> None:
    """Missing values, negatives, repeats, capitals, non-ASCII digits and overlong numbers."""
    with pytest.raises(CgroupFormatError):
        parse_keyed(text)


def test_controllers_pids_and_proc_cgroups() -> None:
    """Controller lists, cgroup.procs and /proc/cgroups (v1 hierarchy ids; disabled ones out)."""
    assert parse_controllers("cpu memory pids\n") == {"cpu", "memory", "pids"}
    assert parse_controllers("") == frozenset()
    with pytest.raises(CgroupFormatError):
        parse_controllers("+memory")
    assert parse_pid_list("12\n345\n") == [12, 345]
    with pytest.raises(CgroupFormatError):
        parse_pid_list("0\n")
    text = (
        "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
        "memory\t4\t216\t1\npids\t0\t1\t1\nrdma\t0\t1\t0\n"
    )
    assert parse_proc_cgroups(text) == {"memory": 4, "pids": 0}
    with pytest.raises(CgroupFormatError):
        parse_proc_cgroups("memory 4 1\n")


@given(st.text(max_size=300))
def test_parsers_raise_only_their_error(text: str) -> None:
    """On any text every parser returns a value or raises CgroupFormatError (a SandboxError)."""
    for parser in (
        parse_proc_cgroup, parse_cgroup2_mounts, parse_keyed, parse_controllers,
        parse_pid_list, parse_proc_cgroups,
    ):  # fmt: skip
        with contextlib.suppress(CgroupFormatError):
            parser(text)  # anything but CgroupFormatError fails the test
    assert issubclass(CgroupFormatError, SandboxError)


def test_fuzz_target_replays_cleanly() -> None:
    """fuzz/cgroup_files.py replays its seeds and a second of mutations cleanly."""
    done = subprocess.run(
        [sys.executable, str(REPO / "fuzz" / "cgroup_files.py"), "--replay", "--seconds", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "no contract violation" in done.stdout
