"""The pre-compiled seccomp programs (``seccomp-programs.json``, decision 0056): current,
served only for exactly this process's rules, architecture, libseccomp and kernel API level,
and refused when tampered with, stale or not the package's own file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from glove.container.linux import _seccomp, _seccomp_packed
from glove.container.linux._seccomp_packed import PACKED_FILE, packed_program

VARIANTS = ((False, False), (True, False), (True, True))


def _copy(tmp_path: Path, edit: Any = None) -> Path:
    """The packed file copied to ``tmp_path``, its JSON passed through ``edit`` first."""
    doc = json.loads(PACKED_FILE.read_bytes())
    if edit is not None:
        edit(doc)
    path = tmp_path / "programs.json"
    path.write_text(json.dumps(doc))
    path.chmod(0o644)
    return path


def _served(path: Path, notify: bool = False, gate: bool = False) -> bytes | None:
    rules = _seccomp.filter_rules(gate=gate)
    return packed_program(notify, gate, rules, _seccomp.MAX_BPF_BYTES, path)


def test_the_packed_file_is_current() -> None:
    """Regenerate after changing the rules: ``.venv/bin/python -c "import pathlib; from
    glove.container.linux import _seccomp as s; pathlib.Path(
    'src/glove/container/linux/seccomp-programs.json').write_bytes(s.pack_seccomp_programs())"``
    (on a machine whose libseccomp and kernel API level differ from the file's, the file is
    never served there, and this test says so)."""
    assert PACKED_FILE.read_bytes() == _seccomp.pack_seccomp_programs()


@pytest.mark.parametrize(("notify", "gate"), VARIANTS)
def test_each_packed_program_is_the_compiled_one(notify: bool, gate: bool) -> None:
    program = _served(PACKED_FILE, notify, gate)
    assert program is not None
    assert program == _seccomp.compile_program(notify, gate)


def test_a_launch_process_loads_no_libseccomp_bindings() -> None:
    """``seccomp_program`` serves the packed programs without importing pyseccomp."""
    code = (
        "import sys\nfrom glove.container.linux import _seccomp as s\n"
        "s.seccomp_program(); s.seccomp_program(notify=True, gate=True)\n"
        "print('pyseccomp' in sys.modules, 'hashlib' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "False"]


def _flip_bpf(doc: dict[str, Any]) -> None:
    bpf = bytearray.fromhex(doc["programs"][0]["bpf"])
    bpf[-8] ^= 0x01  # the last instruction: the default action, ALLOW -> something else
    doc["programs"][0]["bpf"] = bpf.hex()


def _flip_both(doc: dict[str, Any]) -> None:
    """A rewritten program with its digest rewritten to match (the digest is a corruption
    check; the file is as trusted as the package's code, decision 0056)."""
    from hashlib import sha256

    _flip_bpf(doc)
    doc["programs"][0]["sha256"] = sha256(bytes.fromhex(doc["programs"][0]["bpf"])).hexdigest()


def _set(key: str, value: Any) -> Any:
    return lambda doc: doc.__setitem__(key, value)


def _drop_rule(doc: dict[str, Any]) -> None:
    doc["programs"][0]["rules"].pop(0)


def _add_rule(doc: dict[str, Any]) -> None:
    doc["programs"][0]["rules"].append(["deny", "getpid", [], False])


def _truncate(doc: dict[str, Any]) -> None:
    doc["programs"][0]["bpf"] = doc["programs"][0]["bpf"][:-4]


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(_flip_bpf, id="program-byte-flipped"),
        pytest.param(_truncate, id="program-truncated"),
        pytest.param(_drop_rule, id="stale-rules-one-fewer"),
        pytest.param(_add_rule, id="stale-rules-one-more"),
        pytest.param(_set("libseccomp", "2.5.3"), id="other-libseccomp"),
        pytest.param(_set("api", 1), id="other-api-level"),
        pytest.param(_set("arch", "aarch64"), id="other-architecture"),
        pytest.param(lambda doc: doc.pop("api"), id="malformed"),
    ],
)
def test_a_tampered_or_stale_program_is_refused(tmp_path: Path, edit: Any) -> None:
    assert _served(_copy(tmp_path)) is not None  # the copy itself is served
    assert _served(_copy(tmp_path, edit)) is None


def test_a_matching_digest_does_not_hide_a_rules_change(tmp_path: Path) -> None:
    """The rules are compared whole: a program recompiled from other rules, its digest
    updated, is still refused once the rules it was packed with differ from this code's."""

    def edit(doc: dict[str, Any]) -> None:
        _flip_both(doc)
        _drop_rule(doc)

    assert _served(_copy(tmp_path, edit)) is None


def test_not_the_packages_own_file_is_refused(tmp_path: Path) -> None:
    good = _copy(tmp_path)
    link = tmp_path / "link.json"
    link.symlink_to(good)
    assert _served(link) is None
    good.chmod(0o664)
    assert _served(good) is None  # writable by its group
    good.chmod(0o646)
    assert _served(good) is None  # writable by anyone
    good.chmod(0o644)
    if os.geteuid() == 0:
        os.chown(good, 65534, 65534)
        assert _served(good) is None  # owned by another user
    assert _served(tmp_path / "missing.json") is None


def test_a_refused_file_falls_back_to_the_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the packed file refused, ``seccomp_program`` compiles the same filter."""
    monkeypatch.setattr(_seccomp, "_cached_programs", {})
    bad = _copy(tmp_path, _flip_bpf)
    real = _seccomp_packed.packed_program
    monkeypatch.setattr(_seccomp, "packed_program", lambda *args: real(*args[:4], bad))
    assert _seccomp.seccomp_program() == _seccomp.compile_program(False, False)
