"""The output drain's end: a write that races its final sync touches no closed descriptor.

gloved is multi-threaded: once the drain has closed a stream's file, another thread may
open a file and get the same descriptor number. A write that arrives while the drain still
awaits the sync of its other stream must then go nowhere, never into that other file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path

import pytest

from glove.session import _drain
from glove.session._drain import OutputDrain


async def test_a_write_during_the_final_sync_lands_in_no_other_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drain = OutputDrain(tmp_path / "session")
    runner = asyncio.create_task(drain.run())
    await drain.started.wait()
    drain.write("stdout", b"out")
    drain.write("stderr", b"err")

    real_fdatasync = os.fdatasync
    synced: list[int] = []
    second_sync = threading.Event()
    release = threading.Event()

    def fdatasync(fd: int) -> None:
        synced.append(fd)
        if len(synced) == 2:  # stderr's: stdout's file is synced (and was closed, before)
            second_sync.set()
            release.wait(10)
        real_fdatasync(fd)

    monkeypatch.setattr(_drain.os, "fdatasync", fdatasync)
    drain.stop()
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, second_sync.wait, 10)

    # Another thread's file, opened now, takes the lowest free descriptor number.
    other = tmp_path / "another-sessions-journal"
    other_fd = os.open(other, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        drain.write("stdout", b"late")
    finally:
        release.set()
        os.close(other_fd)
    with contextlib.suppress(asyncio.CancelledError):
        await runner

    assert drain.exit_reason is None, drain.exit_reason
    assert drain.closed
    assert other.read_bytes() == b""
    assert (tmp_path / "session" / "stdout").read_bytes() == b"out"
    assert drain.digests()["stdout"].bytes == 3
