"""A hypothesis state machine: append, close/reopen, torn crash, flip, rotate, against a model."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from glove.journal import (
    Journal,
    JournalError,
    JournalKind,
    JournalLimits,
    Receipt,
    open_journal,
    verify,
)

KEY = bytes(range(32))
LIMITS = JournalLimits(max_segment_bytes=4096, max_segment_records=12, max_segments=10_000)


class JournalMachine(RuleBasedStateMachine):
    """The journal's recovered records always equal the model's acknowledged prefix."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="glove-journal-sm-"))
        self.jdir = self.tmp / "j"
        self.loop = asyncio.new_event_loop()
        self.model: list[Receipt] = []
        self.journal: Journal = self._run(self._open())

    def _run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    async def _open(self) -> Journal:
        return await open_journal(self.jdir, KEY, kind=JournalKind.SESSION, limits=LIMITS)

    async def _append_all(self, payloads: list[bytes]) -> list[Receipt]:
        return list(await asyncio.gather(*(self.journal.append(p) for p in payloads)))

    def _segments(self) -> list[Path]:
        return sorted(self.jdir.glob("seg-*.glj"))

    def _reopen_and_check(self) -> None:
        self.journal = self._run(self._open())
        status = self._run(self.journal.status())
        assert status.recovered == ()
        want = self.model[-1] if self.model else None
        # Only a seal record (rotation) may follow the last acknowledged record.
        assert status.seq - (want.seq if want else 0) in (0, 1)
        if want is not None:
            page = self._run(self.journal.page(want.seq - 1, 1))
            assert page.receipts == (want,)

    @rule(sizes=st.lists(st.integers(0, 900), min_size=1, max_size=5))
    def append(self, sizes: list[int]) -> None:
        """Concurrent appends all get contiguous receipts."""
        payloads = [bytes([n % 256]) * n for n in sizes]
        receipts = self._run(self._append_all(payloads))
        first = (self.model[-1].seq if self.model else 0) + 1
        assert receipts[0].seq >= first
        seqs = [r.seq for r in receipts]
        # Strictly increasing; a gap of one is a seal record written by a rotation.
        assert all(0 < b - a <= 2 for a, b in itertools.pairwise(seqs))
        self.model.extend(receipts)

    @rule()
    def close_reopen(self) -> None:
        """A clean close and reopen keeps exactly the acknowledged records."""
        self._run(self.journal.close())
        assert verify(self.jdir, KEY).clean
        self._reopen_and_check()

    @rule(garbage=st.binary(min_size=1, max_size=300))
    def crash_with_torn_write(self, garbage: bytes) -> None:
        """A crash leaving an unacknowledged torn write is cut back on reopen."""
        self._run(self.journal.close())
        seg = self._segments()[-1]
        data = bytearray(seg.read_bytes())
        data[8] = 1  # ONLINE: the writer died with the segment open
        seg.write_bytes(bytes(data) + b"GREC" + garbage)
        self.journal = self._run(self._open())
        status = self._run(self.journal.status())
        assert len(status.recovered) == 1
        assert list(self.jdir.glob("*.broken-*"))
        for broken in self.jdir.glob("*.broken-*"):
            broken.unlink()
        if self.model:
            page = self._run(self.journal.page(self.model[-1].seq - 1, 1))
            assert page.receipts == (self.model[-1],)

    @rule(data=st.data())
    def flip_is_refused_then_undone(self, data: st.DataObject) -> None:
        """A flipped byte fails verify and reopen with a typed error; undoing it recovers."""
        self._run(self.journal.close())
        segments = self._segments()
        seg = data.draw(st.sampled_from(segments))
        original = seg.read_bytes()
        positions = [i for i in range(len(original)) if i != 8]
        position = data.draw(st.sampled_from(positions))
        flipped = bytearray(original)
        flipped[position] ^= 0x01
        seg.write_bytes(bytes(flipped))
        assert not verify(self.jdir, KEY).ok
        try:
            self._run(self._open())
        except JournalError:
            pass
        else:
            raise AssertionError(f"a flip at {seg.name}:{position} opened cleanly")
        seg.write_bytes(original)
        self._reopen_and_check()

    @rule()
    def rotate_by_filling(self) -> None:
        """Appending past the segment limit rotates; the chain continues across segments."""
        before = len(self._segments())
        receipts = [self._run(self.journal.append(b"r" * 700)) for _ in range(6)]
        self.model.extend(receipts)
        assert len(self._segments()) > before

    @invariant()
    def head_matches_model(self) -> None:
        """The journal's head is the last acknowledged receipt (or a seal right after it)."""
        status = self._run(self.journal.status())
        if self.model:
            assert status.seq - self.model[-1].seq in (0, 1)

    def teardown(self) -> None:
        """Close, verify end to end against the last receipt, clean up."""
        try:
            self._run(self.journal.close())
            if self.model:
                last = self.model[-1]
                assert verify(self.jdir, KEY, (last.seq, last.tag)).ok
        finally:
            self.loop.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


JournalMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestJournalMachine = JournalMachine.TestCase
