"""The executor's identity file: every fault refuses service; the measurement tracks the code."""

from __future__ import annotations

import hashlib
import importlib
import os
import pwd
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from glove.remote import (
    IdentityError,
    measure_executable,
    parse_identity,
    render_identity,
    verify_identity,
)
from glove.remote._identity import measurement_manifest
from tests.remote.conftest import (
    IMAGE_DIGEST,
    ExecutorProcess,
    IdentityFiles,
    launcher_argv,
    request_bytes,
)

EXIT_IDENTITY = 78
OTHER_DIGEST = "sha256:" + "e" * 64


def _other_uid() -> int:
    """The unprivileged test user's uid (a non-root owner)."""
    try:
        return pwd.getpwnam(os.environ.get("GLOVE_UNPRIV_USER", "glovetest")).pw_uid
    except KeyError:
        pytest.fail("test user glovetest missing: run scripts/setup as root")


def _valid() -> bytes:
    return render_identity(measure_executable(), IMAGE_DIGEST)


def _missing(ids: IdentityFiles) -> Path:
    return ids.directory / "absent.identity"


def _missing_parent(ids: IdentityFiles) -> Path:
    return ids.directory / "no-such-dir" / "remote-executor.identity"


def _empty(ids: IdentityFiles) -> Path:
    return ids.write(b"")


def _blank(ids: IdentityFiles) -> Path:
    return ids.write(b" \n\n\t\n")


def _not_toml(ids: IdentityFiles) -> Path:
    return ids.write(b"executable_digest: sha256:abc\n")


def _unknown_key(ids: IdentityFiles) -> Path:
    return ids.write(_valid() + b'extra = "x"\n')


def _missing_key(ids: IdentityFiles) -> Path:
    return ids.write(f'executable_digest = "{measure_executable()}"\n'.encode())


def _uppercase_digest(ids: IdentityFiles) -> Path:
    return ids.write(
        f'executable_digest = "{measure_executable().upper().replace("SHA256", "sha256")}"\n'
        f'image_digest = "{IMAGE_DIGEST}"\n'.encode()
    )


def _short_image_digest(ids: IdentityFiles) -> Path:
    return ids.write(
        f'executable_digest = "{measure_executable()}"\nimage_digest = "sha256:abc"\n'.encode()
    )


def _wrong_type(ids: IdentityFiles) -> Path:
    return ids.write(b"executable_digest = 1\nimage_digest = 2\n")


def _too_large(ids: IdentityFiles) -> Path:
    return ids.write(_valid() + b"#" * 5000 + b"\n")


def _group_writable(ids: IdentityFiles) -> Path:
    path = ids.write()
    path.chmod(0o664)
    return path


def _other_writable(ids: IdentityFiles) -> Path:
    path = ids.write()
    path.chmod(0o646)
    return path


def _not_root(ids: IdentityFiles) -> Path:
    path = ids.write()
    os.chown(path, _other_uid(), -1)
    return path


def _symlink(ids: IdentityFiles) -> Path:
    real = ids.write(name="real.identity")
    link = ids.directory / "link.identity"
    link.symlink_to(real)
    return link


def _symlinked_directory(ids: IdentityFiles) -> Path:
    ids.write()
    link = ids.directory.parent / "linked-etc"
    link.symlink_to(ids.directory)
    return link / "remote-executor.identity"


def _hard_link(ids: IdentityFiles) -> Path:
    real = ids.write()
    os.link(real, ids.directory / "second-name")
    return real


def _directory(ids: IdentityFiles) -> Path:
    path = ids.directory / "remote-executor.identity"
    path.mkdir()
    return path


def _fifo(ids: IdentityFiles) -> Path:
    path = ids.directory / "remote-executor.identity"
    os.mkfifo(path, 0o644)
    return path


def _directory_not_root(ids: IdentityFiles) -> Path:
    path = ids.write()
    os.chown(ids.directory, _other_uid(), -1)
    return path


def _directory_world_writable(ids: IdentityFiles) -> Path:
    path = ids.write()
    ids.directory.chmod(0o777)
    return path


def _mismatch(ids: IdentityFiles) -> Path:
    return ids.write(render_identity(OTHER_DIGEST, IMAGE_DIGEST))


FAULTS: dict[str, tuple[Callable[[IdentityFiles], Path], str]] = {
    "missing": (_missing, "missing"),
    "missing-parent": (_missing_parent, "missing"),
    "empty": (_empty, "empty"),
    "blank": (_blank, "empty"),
    "not-toml": (_not_toml, "malformed"),
    "unknown-key": (_unknown_key, "malformed"),
    "missing-key": (_missing_key, "malformed"),
    "uppercase-digest": (_uppercase_digest, "malformed"),
    "short-image-digest": (_short_image_digest, "malformed"),
    "wrong-type": (_wrong_type, "malformed"),
    "too-large": (_too_large, "too_large"),
    "group-writable": (_group_writable, "writable"),
    "other-writable": (_other_writable, "writable"),
    "not-root": (_not_root, "not_root"),
    "symlink": (_symlink, "link"),
    "symlinked-directory": (_symlinked_directory, "link"),
    "hard-link": (_hard_link, "link"),
    "directory": (_directory, "not_regular"),
    "fifo": (_fifo, "not_regular"),
    "directory-not-root": (_directory_not_root, "unsafe_directory"),
    "directory-world-writable": (_directory_world_writable, "unsafe_directory"),
    "mismatch": (_mismatch, "mismatch"),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_identity_fault_refuses_service(identities: IdentityFiles, name: str) -> None:
    """Each fault raises IdentityError(fault) and the executor exits 78 without serving."""
    make, fault = FAULTS[name]
    path = make(identities)
    with pytest.raises(IdentityError) as info:
        verify_identity(str(path))
    assert info.value.fault == fault
    process = ExecutorProcess(launcher_argv(path, "--stdio"))
    process.send(request_bytes("remote_health"))
    assert process.next_frame() is None
    code, err = process.finish()
    assert code == EXIT_IDENTITY
    assert err.startswith("glove-remote-executor: ")
    assert "Traceback" not in err


def test_valid_identity_is_accepted_and_read(identities: IdentityFiles) -> None:
    """A root-owned 0644 file with the measured digest verifies and keeps the image digest."""
    identity = verify_identity(str(identities.write()))
    assert identity.executable_digest == measure_executable()
    assert identity.image_digest == IMAGE_DIGEST


def test_sticky_world_writable_directory_is_accepted(identities: IdentityFiles) -> None:
    """A sticky directory (like /tmp) cannot have a root-owned entry replaced: it is allowed."""
    path = identities.write()
    identities.directory.chmod(0o1777)
    assert verify_identity(str(path)).image_digest == IMAGE_DIGEST


@pytest.mark.parametrize("path", ["relative/identity", "/", "/etc/../etc/glove/x"])
def test_identity_paths_must_be_absolute_and_plain(path: str) -> None:
    """The identity path itself is checked before anything is opened."""
    with pytest.raises(IdentityError):
        verify_identity(path)


def test_parse_accepts_only_the_two_keys() -> None:
    """The parser returns both digests and nothing else is accepted."""
    identity = parse_identity(render_identity(OTHER_DIGEST, IMAGE_DIGEST))
    assert (identity.executable_digest, identity.image_digest) == (OTHER_DIGEST, IMAGE_DIGEST)


def test_measurement_covers_the_interpreter_and_each_module() -> None:
    """The manifest names the interpreter (/proc/self/exe) and every measured module."""
    manifest = measurement_manifest().splitlines()
    assert manifest[0] == "glove-remote-executor-measurement-v1"
    exe = hashlib.sha256(Path("/proc/self/exe").read_bytes()).hexdigest()
    assert manifest[1] == f"interpreter {exe}"
    remote = sys.modules["glove.remote._wire"].__file__
    assert remote is not None
    wire = hashlib.sha256(Path(remote).read_bytes()).hexdigest()
    assert f"module glove.remote._wire {wire}" in manifest


def test_measurement_changes_when_a_measured_source_changes(tmp_path: Path) -> None:
    """Editing one byte of a measured module's source changes the manifest digest."""
    source = tmp_path / "glove_measure_probe.py"
    source.write_text("VALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("glove_measure_probe")
        before = measurement_manifest(("glove_measure_probe",))
        source.write_text("VALUE = 2\n")
        after = measurement_manifest(("glove_measure_probe",))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("glove_measure_probe", None)
    assert before != after


def test_measured_module_through_a_symlink_is_unmeasurable(tmp_path: Path) -> None:
    """A module whose source file is a symlink cannot be measured: refused, not followed."""
    real = tmp_path / "real_probe.py"
    real.write_text("VALUE = 1\n")
    (tmp_path / "glove_link_probe.py").symlink_to(real)
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("glove_link_probe")
        with pytest.raises(IdentityError) as info:
            measurement_manifest(("glove_link_probe",))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("glove_link_probe", None)
    assert info.value.fault == "unmeasurable"
