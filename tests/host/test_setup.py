"""``glove setup [--json]`` run for real: what it reports, the modes it makes, a second run
that changes nothing, and the unsafe directories it refuses (never repairs)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.session._gloved import Gloved

#: Every key ``glove setup --json`` prints (SetupReport).
REPORT_KEYS = {
    "config",
    "state_dir",
    "runtime_dir",
    "receipts_journal",
    "sessions_journal",
    "key_file",
    "signing_key",
    "public_key",
    "created",
    "changed",
}
#: A uid no test user has: "owned by someone else".
OTHER_UID = 65534


def _home(tmp_path: Path) -> Gloved:
    home = Gloved(Path(os.path.realpath(tmp_path)))
    (home.base / "run").mkdir(mode=0o700)
    return home


def _setup_json(home: Gloved) -> dict[str, Any]:
    done = home.glove("setup", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert isinstance(report, dict)
    return report


def _tree(root: Path) -> dict[str, tuple[int, int, int, int]]:
    """Every path under ``root``: (inode, mode, mtime_ns, size)."""
    out = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.lstat()
        out[str(path)] = (info.st_ino, info.st_mode, info.st_mtime_ns, info.st_size)
    return out


def test_setup_json_names_every_path_and_makes_them_owner_only(tmp_path: Path) -> None:
    """The --json report has exactly the documented keys, each path where XDG says, and
    every directory made is 0700 and every file 0600, owned by the caller."""
    home = _home(tmp_path)
    report = _setup_json(home)
    assert set(report) == REPORT_KEYS
    assert report["config"] == str(home.config / "gloved.toml")
    assert report["state_dir"] == str(home.state)
    assert report["runtime_dir"] == str(home.runtime)
    assert report["receipts_journal"] == str(home.state / "receipts")
    assert report["sessions_journal"] == str(home.state / "sessions")
    assert report["key_file"] == str(home.config / "journal.key")
    assert report["changed"] is True
    assert report["public_key"]
    made = {Path(p) for p in report["created"]}
    for key in ("config", "state_dir", "runtime_dir", "receipts_journal", "key_file"):
        assert Path(report[key]) in made, key
    assert Path(report["signing_key"]) in made
    for path in made:
        info = path.lstat()
        assert info.st_uid == os.getuid(), path
        wanted = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
        assert stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode), path
        assert stat.S_IMODE(info.st_mode) == wanted, f"{path}: {stat.S_IMODE(info.st_mode):o}"
    key = Path(report["key_file"]).read_text().strip()
    assert len(bytes.fromhex(key)) == 32
    toml = Path(report["config"]).read_text()
    assert "[harnesses.demo]" in toml
    assert "@HOME@" not in toml


def test_a_second_setup_changes_nothing_and_says_so(tmp_path: Path) -> None:
    """Run twice: the second run reports nothing created, the human form says nothing
    changed, and no file or directory is rewritten (inode, mode, mtime, size), no key rotated."""
    home = _home(tmp_path)
    first = _setup_json(home)
    key = Path(first["key_file"]).read_bytes()
    signing = Path(first["signing_key"]).read_bytes()
    before = {**_tree(home.config), **_tree(home.state), **_tree(home.runtime)}
    again = _setup_json(home)
    assert (again["changed"], again["created"]) == (False, [])
    assert again["public_key"] == first["public_key"]
    human = home.glove("setup")
    assert human.returncode == 0, human.stderr
    assert "nothing changed" in human.stdout
    assert "created " not in human.stdout
    after = {**_tree(home.config), **_tree(home.state), **_tree(home.runtime)}
    assert after == before
    assert Path(first["key_file"]).read_bytes() == key
    assert Path(first["signing_key"]).read_bytes() == signing


@pytest.mark.parametrize("unsafe", ["group-writable", "world-writable", "other-owner"])
def test_an_unsafe_config_dir_is_refused_in_one_line(tmp_path: Path, unsafe: str) -> None:
    """A config dir open to group or others, or owned by another uid: one line naming it,
    exit 1, no traceback, and nothing repaired or created inside it."""
    home = _home(tmp_path)
    home.config.mkdir(parents=True, mode=0o700)
    if unsafe == "group-writable":
        home.config.chmod(0o770)
    elif unsafe == "world-writable":
        home.config.chmod(0o707)
    else:
        os.chown(home.config, OTHER_UID, OTHER_UID)
    mode = stat.S_IMODE(home.config.stat().st_mode)
    for argv in (("setup",), ("setup", "--json")):
        done = home.glove(*argv)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("glove setup: ")
        assert str(home.config) in lines[0]
        assert done.stdout == ""
    assert stat.S_IMODE(home.config.stat().st_mode) == mode  # never repaired
    assert list(home.config.iterdir()) == []
