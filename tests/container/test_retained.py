"""Retained writable copies: hard-sized ext4 images that persist between runs (root only)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from glove.container import Bind, Retained, SandboxSpec, SpecError, run
from tests.conftest import Unpriv

SYSTEM_BINDS = (
    Bind("/usr"),
    Bind("/bin", optional=True),
    Bind("/lib", optional=True),
    Bind("/lib64", optional=True),
)
ENV = {"PATH": "/usr/bin:/bin"}
SIZE = 16 * 1024 * 1024

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="retained images need real root")


@pytest.fixture
def base() -> Iterator[Path]:
    """A private host directory for images and seeds."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as path:
        yield Path(path)


def _run(spec: SandboxSpec) -> tuple[str, object]:
    with tempfile.TemporaryFile() as out, open(os.devnull, "rb") as null:
        result = run(spec, stdin=null.fileno(), stdout=out.fileno(), stderr=out.fileno())
        out.seek(0)
        return out.read().decode(), result


@root_only
def test_retained_copy_persists_is_hard_sized_and_reported(base: Path) -> None:
    """Seeded on first use, written in one run, read back in the next; full at its size."""
    seed = base / "seed"
    seed.mkdir()
    (seed / "hello").write_text("seeded\n")
    item = Retained(image=str(base / "img.ext4"), target="/data", size=SIZE, seed=str(seed))
    script = (
        "cat /data/hello; echo kept > /data/new; "
        "dd if=/dev/zero of=/data/big bs=1M count=64 2>&1 | grep -c 'No space'"
    )
    first = SandboxSpec(argv=("sh", "-c", script), binds=SYSTEM_BINDS, env=ENV, retained=(item,))
    out, result = _run(first)
    assert out.splitlines() == ["seeded", "1"]
    report = result.retained["/data"]  # type: ignore[attr-defined]
    assert report.size == SIZE
    assert report.used_bytes is not None
    assert SIZE // 2 < report.used_bytes <= SIZE
    second = SandboxSpec(argv=("cat", "/data/new"), binds=SYSTEM_BINDS, env=ENV, retained=(item,))
    out, _ = _run(second)
    assert out == "kept\n"
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(base) not in mounts  # never attached in the host's mount table
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True, check=False)
    assert str(base) not in loops.stdout  # the loop device detached itself


@root_only
def test_image_inside_the_workspace_is_refused(base: Path) -> None:
    """An image the sandbox could write to while mounted is refused before anything runs."""
    item = Retained(image=str(base / "img.ext4"), target="/data", size=SIZE)
    spec = SandboxSpec(
        argv=("true",), binds=SYSTEM_BINDS, env=ENV, workspace=str(base), retained=(item,)
    )
    with pytest.raises(SpecError, match="could corrupt"):
        _run(spec)
    assert not (base / "img.ext4").exists()


def test_unprivileged_launcher_is_refused(unpriv: Unpriv) -> None:
    """Without real root the request fails with a clear reason, nothing is created."""
    code = (
        "from glove.container import Retained, SandboxSpec, Bind, run, SpecError\n"
        "spec = SandboxSpec(argv=('true',), binds=(Bind('/usr'),), retained=(Retained("
        "image='/var/tmp/glove-never.img', target='/data', size=16 * 2**20),))\n"
        "try:\n    run(spec)\nexcept SpecError as e:\n    print('REFUSED', e)\n"
    )
    argv = unpriv.command(unpriv.python, "-c", code)
    if os.geteuid() != 0:
        argv = [unpriv.python, "-c", code]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, cwd="/var/tmp"
    )
    assert "REFUSED" in done.stdout, done.stderr
    assert "root launcher" in done.stdout
    assert not Path("/var/tmp/glove-never.img").exists()


@root_only
def test_seed_through_a_symlink_is_refused(base: Path) -> None:
    """A seed path that is (or goes through) a symlink is refused; no image is left behind."""
    real = base / "real"
    real.mkdir()
    (base / "link").symlink_to(real)
    item = Retained(
        image=str(base / "img.ext4"), target="/data", size=SIZE, seed=str(base / "link")
    )
    spec = SandboxSpec(argv=("true",), binds=SYSTEM_BINDS, env=ENV, retained=(item,))
    with pytest.raises(SpecError, match="symlinks are refused"):
        _run(spec)
    assert not (base / "img.ext4").exists()


@root_only
def test_image_path_through_a_symlink_is_refused(base: Path) -> None:
    """An image path that goes through a symlinked directory is never created or opened."""
    target_dir = base / "elsewhere"
    target_dir.mkdir()
    (base / "linkdir").symlink_to(target_dir)
    item = Retained(image=str(base / "linkdir" / "img.ext4"), target="/data", size=SIZE)
    spec = SandboxSpec(argv=("true",), binds=SYSTEM_BINDS, env=ENV, retained=(item,))
    _, result = _run(spec)
    assert result.outcome == "setup_error"  # type: ignore[attr-defined]
    assert list(target_dir.iterdir()) == []
