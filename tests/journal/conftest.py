"""Fixtures shared by the journal tests: a key and a fresh journal directory."""

from __future__ import annotations

from pathlib import Path

import pytest

KEY = bytes(range(32))
"""A fixed 32-byte HMAC key, so failures are reproducible."""


@pytest.fixture
def key() -> bytes:
    """The HMAC key of the journals under test."""
    return KEY


@pytest.fixture
def jdir(tmp_path: Path) -> Path:
    """A journal directory path that does not exist yet."""
    return tmp_path / "journal"
