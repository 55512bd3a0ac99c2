"""kill -9 of a real transparency-log process, in and around checkpoint writes, then recovery."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from glove.journal import (
    NotSealed,
    SessionNotFound,
    export_offline,
    open_transparency_log,
    verify,
    verify_bundle,
)
from tests.journal._tlog_child import KEY, KILL_STEPS, LIMITS, SIGNING_KEY
from tests.journal._tlog_helpers import SIGNING_KEY as HELPER_KEY

CHILD = Path(__file__).with_name("_tlog_child.py")
RANDOM_KILLS = 40
ROUNDS_PER_STEP = 3
MAX_DELAY_S = 0.08
SEED = 20270111


def _wait_gone(pid: int, deadline_s: float = 10.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.001)
    raise AssertionError(f"worker {pid} did not die")


def _read(out: Path) -> tuple[int, tuple[int, str] | None]:
    """The highest acknowledged seq and the last checkpoint the worker saw stored."""
    top, last = 0, None
    if out.exists():
        for line in out.read_text().splitlines():
            parts = line.split()
            if parts[:1] == ["A"] and len(parts) == 2:
                top = max(top, int(parts[1]))
            elif parts[:1] == ["C"] and len(parts) == 3:
                last = (int(parts[1]), parts[2])
    return top, last


async def _recover_and_check(jdir: Path, out: Path, seal: bool) -> int:
    acked, stored = _read(out)
    log = await open_transparency_log(jdir, KEY, SIGNING_KEY, limits=LIMITS)
    try:
        assert log.size >= acked, "an acknowledged receipt was lost"
        checkpoint = log.last_checkpoint
        if stored is not None:
            assert checkpoint is not None, "a stored checkpoint vanished"
            assert checkpoint.size >= stored[0], "a checkpoint went backwards"
            if checkpoint.size == stored[0]:
                assert checkpoint.root.hex() == stored[1]
        if checkpoint is not None and checkpoint.size:
            for session in ("s0", "s3", "s5"):
                try:
                    data = export_offline(jdir, session, SIGNING_KEY.verifier)
                except (NotSealed, SessionNotFound):  # unsealed or pruned: legitimate
                    continue
                assert verify_bundle(data, SIGNING_KEY.verifier).checkpoint == checkpoint
        return log.size
    finally:
        await log.close(seal=seal)


async def test_kill9_around_checkpoints_recovers_consistently(tmp_path: Path) -> None:
    """SIGKILL at every step of a checkpoint write and at random moments: the recovered tree
    extends the last stored checkpoint, which verifies, and nothing acknowledged is lost."""
    assert SIGNING_KEY == HELPER_KEY
    jdir = tmp_path / "receipts"
    rng = random.Random(SEED)
    plan = [(step, rng.randrange(1, 6)) for step in range(KILL_STEPS)] * ROUNDS_PER_STEP
    plan += [(-1, 0)] * RANDOM_KILLS
    rng.shuffle(plan)
    server = subprocess.Popen(
        [sys.executable, str(CHILD)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert server.stdin is not None
    assert server.stdout is not None
    sizes = []
    try:
        for iteration, (step, at) in enumerate(plan):
            out = tmp_path / f"out-{iteration}"
            server.stdin.write(f"{jdir} {rng.randrange(2**32)} {out} {step} {at}\n")
            pid = int(server.stdout.readline())
            if step < 0:
                time.sleep(rng.uniform(0.005, MAX_DELAY_S))
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            _wait_gone(pid, deadline_s=30.0)
            sizes.append(await _recover_and_check(jdir, out, seal=iteration % 2 == 0))
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
    assert sizes == sorted(sizes), "the tree shrank across a crash"
    assert sizes[-1] > 50
    assert (jdir / "tree-base").exists(), "no segment was ever pruned: the test lost its edge"
    assert verify(jdir, KEY).ok
