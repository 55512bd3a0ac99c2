"""Fixtures of the escape suite: the launching user and a fresh sandbox directory per test."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.escape._harness import Sandbox, User, build_rawsys, make_sandbox, root_user, unpriv_user


@pytest.fixture(scope="session")
def rawsys_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The raw-syscall probe, compiled once per session."""
    return build_rawsys(tmp_path_factory.mktemp("rawsys"))


@pytest.fixture(scope="session", autouse=True)
def _require_root() -> None:
    """The suite switches users, so it must start as root (CI runs it so)."""
    assert os.geteuid() == 0, "the escape suite runs as root and switches to the test user"


@pytest.fixture(params=["root", "unpriv"])
def as_user(request: pytest.FixtureRequest) -> User:
    """Each escape check runs once launched by root and once by the unprivileged user."""
    return root_user() if request.param == "root" else unpriv_user()


@pytest.fixture
def sb(as_user: User, rawsys_bin: Path) -> Iterator[Sandbox]:
    """A fresh workspace holding the probes, owned by the launching user."""
    box = make_sandbox(as_user, rawsys_bin)
    yield box
    shutil.rmtree(box.base, ignore_errors=True)
