"""compose_remote_runtime: the files it writes, what OpenSSH makes of them, and what it is not."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from glove.remote import (
    SSH_HOST_ALIAS,
    RemoteCapabilities,
    RemoteConfigError,
    RemoteFilesError,
    RemoteMethodNotFound,
    compose_remote_runtime,
)
from tests.remote.conftest import IMAGE, IMAGE_DIGEST, owner_only_dir, section

SIX = ("wall_time", "cpu_time", "memory", "pids", "disk", "output")


def _compose(runtime_dir: Path, **changes: object):  # type: ignore[no-untyped-def]
    return compose_remote_runtime(
        section(**changes), runtime_dir, local_materialization=False, apple_container=False
    )


def _ssh_g(config: Path, home: Path, destination: str = SSH_HOST_ALIAS) -> dict[str, list[str]]:
    """Ask the real OpenSSH client what it would use: ``ssh -G -F config destination``."""
    out = subprocess.run(
        ["ssh", "-G", "-F", str(config), destination],
        capture_output=True,
        text=True,
        timeout=30,
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        check=True,
    )
    options: dict[str, list[str]] = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        options.setdefault(key, []).append(value)
    return options


def test_files_are_written_owner_only_and_nothing_else_is_left(runtime_dir: Path) -> None:
    """ssh_config and known_hosts are 0600 in a 0700 remote/ directory; no temp files remain."""
    runtime = _compose(runtime_dir)
    remote = runtime_dir / "remote"
    assert stat.S_IMODE(remote.lstat().st_mode) == 0o700
    assert sorted(p.name for p in remote.iterdir()) == ["known_hosts", "ssh_config"]
    for path in (runtime.ssh_config_path, runtime.known_hosts_path):
        st = path.lstat()
        assert stat.S_ISREG(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert st.st_uid == os.geteuid()
    assert runtime.known_hosts_path.read_text() == (f"{SSH_HOST_ALIAS} {section().host_key}\n")


def test_runtime_keeps_both_image_values(runtime_dir: Path) -> None:
    """The composition retains the reference and its digest, both."""
    runtime = _compose(runtime_dir)
    assert runtime.container_image == IMAGE
    assert runtime.container_image_digest == IMAGE_DIGEST
    assert runtime.config == section()


def test_ssh_client_reads_every_pinned_option(runtime_dir: Path, tmp_path: Path) -> None:
    """`ssh -G -F` reports each isolation option exactly as the spec lists it."""
    runtime = _compose(runtime_dir, host="127.0.0.1", port=2201, user="agent")
    home = owner_only_dir(tmp_path / "home")
    got = _ssh_g(runtime.ssh_config_path, home)
    expected = {
        "hostname": "127.0.0.1",
        "port": "2201",
        "user": "agent",
        "hostkeyalias": SSH_HOST_ALIAS,
        "globalknownhostsfile": "none",
        "userknownhostsfile": str(runtime.known_hosts_path),
        "hostkeyalgorithms": "ssh-ed25519",
        "updatehostkeys": "false",
        "stricthostkeychecking": "true",
        "controlmaster": "false",
        "controlpersist": "no",
        "checkhostip": "no",
        "verifyhostkeydns": "false",
        "canonicalizehostname": "false",
        "batchmode": "yes",
        "passwordauthentication": "no",
        "kbdinteractiveauthentication": "no",
        "identitiesonly": "yes",
        "identityagent": "none",
        "forwardagent": "no",
        "clearallforwardings": "yes",
        "permitlocalcommand": "no",
        "requesttty": "false",
        "escapechar": "none",
    }
    for key, value in expected.items():
        assert got.get(key) == [value], (key, got.get(key))
    # ControlPath none, ProxyCommand none and ProxyJump none leave no value at all.
    for absent in ("controlpath", "proxycommand", "proxyjump", "localcommand"):
        assert absent not in got, absent
    # ssh -G cannot tell an option written from its default (ControlPersist no is both), so
    # the options the spec names are also required verbatim in the file.
    lines = runtime.ssh_config_path.read_text().splitlines()
    for required in (
        "GlobalKnownHostsFile none",
        f'UserKnownHostsFile "{runtime.known_hosts_path}"',
        "HostKeyAlgorithms ssh-ed25519",
        "UpdateHostKeys no",
        "StrictHostKeyChecking yes",
        "ControlMaster no",
        "ControlPath none",
        "ControlPersist no",
    ):
        assert lines.count(required) == 1, required
    text = "\n".join(lines)
    assert not re.search(r"^\s*(Include|Host|Match)\b", text, re.IGNORECASE | re.MULTILINE)


def test_user_and_system_configs_cannot_change_it(runtime_dir: Path, tmp_path: Path) -> None:
    """With -F, a hostile ~/.ssh/config is not read, and every destination name gets the pins."""
    runtime = _compose(runtime_dir, host="127.0.0.1")
    home = owner_only_dir(tmp_path / "home")
    ssh_dir = owner_only_dir(home / ".ssh")
    (ssh_dir / "config").write_text(
        "Host *\n  ControlMaster auto\n  ControlPath /tmp/cm-%r\n  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile /dev/null\n  ProxyCommand nc %h %p\n"
    )
    for destination in (SSH_HOST_ALIAS, "other.example", "127.0.0.2"):
        got = _ssh_g(runtime.ssh_config_path, home, destination)
        assert got["hostname"] == ["127.0.0.1"]
        assert got["controlmaster"] == ["false"]
        assert got["stricthostkeychecking"] == ["true"]
        assert got["userknownhostsfile"] == [str(runtime.known_hosts_path)]
        assert "controlpath" not in got
        assert "proxycommand" not in got


def test_known_hosts_is_read_by_openssh_under_the_alias(runtime_dir: Path) -> None:
    """ssh-keygen finds exactly the pinned ed25519 key for the alias in known_hosts."""
    runtime = _compose(runtime_dir)
    out = subprocess.run(
        ["ssh-keygen", "-F", SSH_HOST_ALIAS, "-f", str(runtime.known_hosts_path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    keys = [ln for ln in out.stdout.splitlines() if ln and not ln.startswith("#")]
    assert keys == [f"{SSH_HOST_ALIAS} {section().host_key}"]


def test_paths_with_spaces_and_percent_survive_ssh_parsing(tmp_path: Path) -> None:
    """A runtime dir with spaces and % reaches OpenSSH intact (quoted, %% escaped)."""
    runtime_dir = owner_only_dir(tmp_path / "run dir %d 100%")
    runtime = _compose(runtime_dir)
    got = _ssh_g(runtime.ssh_config_path, owner_only_dir(tmp_path / "home"))
    assert got["userknownhostsfile"] == [str(runtime.known_hosts_path)]


@pytest.mark.parametrize("name", ['run"quote', "run\\back", "run\nline"])
def test_paths_ssh_config_cannot_carry_are_refused(tmp_path: Path, name: str) -> None:
    """A runtime dir path with a quote, backslash or newline is refused, not escaped."""
    runtime_dir = owner_only_dir(tmp_path / name)
    with pytest.raises(RemoteFilesError, match="cannot carry"):
        _compose(runtime_dir)
    assert not (runtime_dir / "remote").exists()


def test_rewrite_replaces_files_atomically(runtime_dir: Path) -> None:
    """A second start replaces both files (new inode, new content), leaving no temp file."""
    first = _compose(runtime_dir, port=2201)
    inode = first.ssh_config_path.stat().st_ino
    second = _compose(runtime_dir, port=2202)
    assert second.ssh_config_path.stat().st_ino != inode
    assert "Port 2202\n" in second.ssh_config_path.read_text()
    assert sorted(p.name for p in (runtime_dir / "remote").iterdir()) == [
        "known_hosts",
        "ssh_config",
    ]


def test_symlinked_remote_dir_is_refused(runtime_dir: Path, tmp_path: Path) -> None:
    """A symlink planted as remote/ is refused, and its target is not written."""
    target = owner_only_dir(tmp_path / "elsewhere")
    (runtime_dir / "remote").symlink_to(target)
    with pytest.raises(RemoteFilesError):
        _compose(runtime_dir)
    assert list(target.iterdir()) == []


def test_symlinked_file_is_replaced_not_followed(runtime_dir: Path, tmp_path: Path) -> None:
    """A symlink planted as ssh_config is replaced by the rename; its target is untouched."""
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    remote = owner_only_dir(runtime_dir / "remote")
    (remote / "ssh_config").symlink_to(victim)
    runtime = _compose(runtime_dir)
    assert victim.read_text() == "keep\n"
    assert not runtime.ssh_config_path.is_symlink()


@pytest.mark.parametrize("mode", [0o750, 0o705, 0o777])
def test_runtime_dir_that_is_not_owner_only_is_refused(runtime_dir: Path, mode: int) -> None:
    """The runtime dir is re-checked through the descriptor the files are written with."""
    runtime_dir.chmod(mode)
    with pytest.raises(RemoteFilesError, match="0700"):
        _compose(runtime_dir)


def test_invalid_section_writes_nothing(runtime_dir: Path) -> None:
    """Validation comes first: a refused section leaves the runtime dir empty."""
    with pytest.raises(RemoteConfigError):
        _compose(runtime_dir, container_image_digest="sha256:" + "c" * 64)
    with pytest.raises(RemoteConfigError):
        compose_remote_runtime(
            section(), runtime_dir, local_materialization=True, apple_container=False
        )
    assert list(runtime_dir.iterdir()) == []


def test_capabilities_report_nothing_operational(runtime_dir: Path) -> None:
    """Schema 0, lifecycle not operational, no managed runtimes, every limit unavailable."""
    caps = _compose(runtime_dir).capabilities()
    doc = json.loads(msgspec.json.encode(caps))
    assert doc == {
        "backend": "remote_linux_container",
        "container_image": IMAGE,
        "container_image_digest": IMAGE_DIGEST,
        "resource_mechanisms": dict.fromkeys(SIX, "unavailable"),
        "schema_version": 0,
        "lifecycle_operational": False,
        "runtime_adapter": False,
        "receipts": False,
        "managed_runtimes": [],
    }
    assert msgspec.json.decode(msgspec.json.encode(caps), type=RemoteCapabilities) == caps


@pytest.mark.parametrize(
    "method", ["session.create", "session.start", "session.stop", "session.attach", "x"]
)
def test_every_lifecycle_method_is_method_not_found(runtime_dir: Path, method: str) -> None:
    """resolve() refuses any method with code method_not_found; none is operational."""
    runtime = _compose(runtime_dir)
    assert runtime.operational_methods == frozenset()
    with pytest.raises(RemoteMethodNotFound) as info:
        runtime.resolve(method)
    assert info.value.code == "method_not_found"
    assert info.value.method == method


_STRACE_SCRIPT = """
import os, sys
from pathlib import Path
from glove.remote import compose_remote_runtime, RemoteBackendConfig
import msgspec
section = msgspec.json.decode(sys.argv[2].encode(), type=RemoteBackendConfig)
os.write(2, b"GLOVE-COMPOSE-BEGIN\\n")
runtime = compose_remote_runtime(section, Path(sys.argv[1]), local_materialization=False,
                                 apple_container=False)
os.write(2, b"GLOVE-COMPOSE-END\\n")
"""


def test_composition_makes_no_network_or_process_syscall(runtime_dir: Path, tmp_path: Path) -> None:
    """Under strace, composing opens no socket, resolves nothing and starts no process."""
    log = tmp_path / "strace.log"
    cfg = msgspec.json.encode(section(host="builder.example.net")).decode()
    subprocess.run(
        [
            "strace", "-f", "-qq", "-o", str(log),
            "-e", ("trace=socket,connect,sendto,sendmsg,bind,execve,execveat,clone,clone3,fork,"
            "vfork,write,openat"),
            sys.executable, "-c", _STRACE_SCRIPT, str(runtime_dir), cfg,
        ],
        check=True,
        timeout=60,
        capture_output=True,
    )  # fmt: skip
    lines = log.read_text().splitlines()
    begin = next(i for i, ln in enumerate(lines) if "GLOVE-COMPOSE-BEGIN" in ln)
    end = next(i for i, ln in enumerate(lines) if "GLOVE-COMPOSE-END" in ln)
    during = lines[begin + 1 : end]
    assert any("ssh_config" in ln for ln in during), "the trace should show the file writes"
    forbidden = re.compile(
        r"\b(socket|connect|sendto|sendmsg|bind|execve|execveat|clone|clone3|fork|vfork)\("
    )
    assert [ln for ln in during if forbidden.search(ln)] == []
    assert not any("resolv.conf" in ln or "nsswitch" in ln or "/etc/hosts" in ln for ln in during)
