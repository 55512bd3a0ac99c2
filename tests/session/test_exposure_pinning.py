"""An exposure's bind carries the directory it pinned: the launcher refuses a swapped one."""

from __future__ import annotations

from pathlib import Path

import pytest

from glove.session._exposures import ExposureRegistry
from glove.session.errors import ExposureError


def test_the_bind_names_the_pinned_directory_and_a_swap_is_refused(tmp_path: Path) -> None:
    """``resolve`` gives the bind the pinned (device, inode), and refuses once it changed."""
    shared = tmp_path / "work"
    shared.mkdir()
    registry = ExposureRegistry(tmp_path / "exposures.json")
    registry.load()
    try:
        made = registry.create("work", str(shared))
        bind = registry.resolve("work", made.generation)
        info = shared.stat()
        assert bind.identity == (info.st_dev, info.st_ino)
        assert bind.source == str(shared)
        shared.rename(tmp_path / "moved")
        shared.mkdir()
        with pytest.raises(ExposureError, match="another directory"):
            registry.resolve("work", made.generation)
    finally:
        registry.close()


def test_an_exposure_target_may_be_below_tmp_never_the_sandboxs_own(tmp_path: Path) -> None:
    """A target below /tmp is accepted (shown inside the private /tmp); /tmp itself, /proc
    and /dev, which the sandbox builds, are refused naming --target."""
    shared = tmp_path / "work"
    shared.mkdir()
    registry = ExposureRegistry(tmp_path / "exposures.json")
    registry.load()
    try:
        assert registry.create("work", str(shared), target="/tmp/work").target == "/tmp/work"
        for target in ("/tmp", "/proc/work", "/dev/work", "/"):
            with pytest.raises(ExposureError, match="choose another --target"):
                registry.create("other", str(shared), target=target)
    finally:
        registry.close()
