"""A real gloved with a ``[remote_backend]`` in gloved.toml: it starts construction-only
(capabilities say so, no lifecycle, pinned SSH files written, no process started), and a
section with one bad field stops it starting with one line that names the field."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.container import LIMIT_NAMES
from glove.control import RemoteError
from glove.protocol import PROTOCOL_VERSION
from glove.session import LIFECYCLE_METHODS
from tests.remote.conftest import IMAGE, IMAGE_DIGEST, IMAGE_HEX, ed25519_public_line
from tests.session._gloved import Gloved

HOST = "builder.example.net"
PORT = 2222
USER = "glove"
HOST_KEY = ed25519_public_line()
SSH_ALIAS = "glove-remote-backend"
STOP_DEADLINE_S = 30.0


def remote_table(**changes: object) -> str:
    """A ``[remote_backend]`` TOML table (valid unless ``changes`` break it)."""
    fields: dict[str, object] = {
        "host": HOST,
        "port": PORT,
        "user": USER,
        "host_key": HOST_KEY,
        "container_image": IMAGE,
        "container_image_digest": IMAGE_DIGEST,
    }
    fields.update(changes)
    lines = ["", "[remote_backend]"]
    for key, value in fields.items():
        lines.append(f"{key} = {value}" if isinstance(value, int) else f'{key} = "{value}"')
    return "\n".join(lines) + "\n"


def _home(tmp_path: Path, table: str) -> Gloved:
    """``glove setup``'s gloved.toml (no test harnesses) plus ``table``."""
    home = Gloved(Path(os.path.realpath(tmp_path)))
    home.setup(harnesses=table)
    return home


def _traced(home: Gloved, log: Path) -> None:
    """Make ``home`` start gloved under ``strace -f`` (process and connect calls to ``log``)."""
    wrapper = home.base / "traced-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec strace -f -qq -e trace=execve,execveat,connect -o {log} {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o700)
    home.python = str(wrapper)


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, from /proc/<pid>/task/*/children."""
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                pending.append(child)
    return found


@pytest.fixture
def remote_gloved(tmp_path: Path) -> Iterator[tuple[Gloved, Path]]:
    """A set-up home whose gloved.toml has a valid [remote_backend], gloved running traced."""
    home = _home(tmp_path, remote_table())
    log = tmp_path / "strace.log"
    _traced(home, log)
    home.start()
    try:
        yield home, log
    finally:
        _stop_traced(home)


def _stop_traced(home: Gloved) -> None:
    """SIGTERM gloved itself (strace would detach and leave it running) and reap strace."""
    assert home.proc is not None
    if home.proc.poll() is None:
        for pid in _descendants(home.proc.pid):
            os.kill(pid, signal.SIGTERM)
        assert home.proc.wait(timeout=STOP_DEADLINE_S) == 0


def test_gloved_with_a_remote_backend_is_construction_only(
    remote_gloved: tuple[Gloved, Path],
) -> None:
    """gloved starts; capabilities report the remote backend as non-operational; every
    lifecycle method is method_not_found; health answers."""
    home, _ = remote_gloved
    caps = home.call("capabilities")
    assert caps == {  # exactly what docs/remote.md shows
        "schema_version": 0,
        "protocol": PROTOCOL_VERSION,
        "lifecycle_operational": False,
        "runtimes": [],
        "limits": dict.fromkeys(LIMIT_NAMES, "unavailable"),
        "networks": [],
        "terminals": [],
        "reason": "the remote_linux_container backend is construction-only",
        "backend": "remote_linux_container",
    }
    for method in LIFECYCLE_METHODS:
        with pytest.raises(RemoteError) as refused:
            home.call(method, {})
        assert refused.value.code == "method_not_found", method
    health = home.call("health")
    assert health["status"] == "ok"
    assert home.proc is not None
    assert health["pid"] in _descendants(home.proc.pid)  # gloved itself, beneath strace


def test_gloved_writes_the_pinned_ssh_files_and_starts_no_process(
    remote_gloved: tuple[Gloved, Path],
) -> None:
    """remote/ (0700) holds exactly ssh_config and known_hosts (0600, ours); real ssh -G
    reads the pins from the config; gloved never executed or connected anything."""
    home, log = remote_gloved
    home.call("capabilities")
    remote = home.runtime / "remote"
    info = remote.lstat()
    assert stat.S_ISDIR(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert info.st_uid == os.geteuid()
    assert sorted(p.name for p in remote.iterdir()) == ["known_hosts", "ssh_config"]
    for name in ("known_hosts", "ssh_config"):
        item = (remote / name).lstat()
        assert stat.S_ISREG(item.st_mode), name
        assert stat.S_IMODE(item.st_mode) == 0o600, name
        assert item.st_uid == os.geteuid(), name
        assert item.st_nlink == 1, name
    key_type, blob = HOST_KEY.split()[:2]
    assert (remote / "known_hosts").read_text() == f"{SSH_ALIAS} {key_type} {blob}\n"
    text = (remote / "ssh_config").read_text()
    assert not re.search(r"^\s*(Include|Host|Match)\b", text, re.IGNORECASE | re.MULTILINE)
    shown = subprocess.run(
        ["ssh", "-G", "-F", str(remote / "ssh_config"), SSH_ALIAS],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**home.env, "HOME": str(home.base)},
    ).stdout
    options = {}
    for line in shown.splitlines():
        key, _, value = line.partition(" ")
        options.setdefault(key, value)
    assert options["hostname"] == HOST
    assert options["port"] == str(PORT)
    assert options["user"] == USER
    assert options["globalknownhostsfile"] == "none"
    assert options["userknownhostsfile"] == str(remote / "known_hosts")
    assert options["hostkeyalgorithms"] == "ssh-ed25519"
    assert options["stricthostkeychecking"] == "true"
    assert options["updatehostkeys"] == "false"
    assert options["controlmaster"] == "false"
    assert "controlpath" not in options  # ControlPath none leaves no value at all
    assert re.search(r"^ControlPath none$", text, re.MULTILINE)
    assert options["controlpersist"] == "no"

    assert home.proc is not None
    gloved_pids = {home.proc.pid, *_descendants(home.proc.pid)}
    names = {pid: Path(f"/proc/{pid}/comm").read_text().strip() for pid in gloved_pids}
    assert not [n for n in names.values() if "ssh" in n], names
    # ... but the local launcher's seccomp warm-up, whose libseccomp lookup (ctypes'
    # find_library) reads the linker cache through ldconfig -p: never anything remote.
    execs = [
        line
        for line in log.read_text().splitlines()
        if "execve" in line and 'execve("/sbin/ldconfig", ["/sbin/ldconfig", "-p"]' not in line
    ]
    assert len(execs) == 1, execs  # the interpreter strace started, nothing after it
    assert sys.executable in execs[0]
    connects = [line for line in log.read_text().splitlines() if "connect(" in line]
    assert connects == [], connects


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"port": 0}, "port"),
        ({"container_image": f"registry.example.net/agents/base:1.2@{IMAGE_DIGEST}"},
         "container_image"),
        ({"container_image_digest": f"sha256:{IMAGE_HEX.upper()}"}, "container_image_digest"),
        ({"container_image_digest": f"sha256:{'b' * 64}"}, "container_image_digest"),
        ({"host_key": "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ"}, "host_key"),
        ({"hots": HOST}, "hots"),
    ],
    ids=["port", "tagged-image", "uppercase-digest", "mismatched-digest", "rsa-key", "unknown-key"],
)  # fmt: skip
def test_an_invalid_remote_backend_stops_gloved_starting(
    tmp_path: Path, changes: dict[str, object], field: str
) -> None:
    """One bad field: gloved exits non-zero with one stderr line naming the field, no
    traceback, no socket and no SSH files left behind."""
    home = _home(tmp_path, remote_table(**changes))
    try:
        with pytest.raises(AssertionError, match="exited"):
            home.start()
    finally:
        home.stop()  # only does something if gloved wrongly started
    assert home.proc is not None
    assert home.proc.returncode == 2
    lines = [line for line in home.stderr().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("gloved: refusing to start: "), lines
    assert (
        f"remote_backend.{field}: " in lines[0]
        or f"[remote_backend]: Object contains unknown field `{field}`" in lines[0]
    ), lines
    assert "Traceback" not in home.stderr()
    assert not (home.runtime / "gloved.sock").exists()
    assert not (home.runtime / "remote").exists()
