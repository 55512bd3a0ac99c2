"""refinement-eval-v1 in a gloved session: the fixture read at prepare, the ``evaluator``
actor fed by the PTY drain, and the verdict after the session ended.

::

    prepare    read_fixture(library root, digest, size)   openat2 beneath the pinned root,
                                                           hashed while copied into a memfd,
                                                           decoded strictly; never mounted
    run        session-<id>
               ├─ evaluator   EvaluatorActor: Feed(offset, chunk) one at a time
               ├─ pty-drain   write(chunk): observers first (evaluator.observe), then the ring
               └─ sandbox
    finalize   evaluator.finish(evicted)  once the sandbox has its result, before the tree
               stops: the Finish message queues behind every Feed, so its evidence covers
               every byte the drain was given
    verdict    judge(termination_of(outcome, result, complete), evidence, fixture)

The drain calls :meth:`EvaluatorActor.observe` with every chunk *before* it appends the
chunk to the transcript ring, so the evaluator sees every byte whatever the ring evicts
later. ``observe`` keeps the chunks in order: it puts them into the actor's bounded
mailbox while there is room, keeps the rest in a backlog, and then returns an awaitable
that completes when the backlog is in the mailbox; the drain hands it to the sandbox,
which stops reading the terminal meanwhile (backpressure: the agent blocks in its own
``write``, nothing is dropped). Each Feed carries the offset of its first byte, so a chunk
that never arrived (a message dropped past its deadline) is a gap, and a gap or a
missing tail makes the evidence incomplete: the verdict is then ``invalid_evidence``
(``stream_incomplete``), never a pass.
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Final

import msgspec

from glove.actors import Actor
from glove.container import SandboxResult
from glove.evaluate import (
    Evidence,
    Fixture,
    Outcome,
    Reason,
    StreamEvaluator,
    Termination,
    decode_fixture,
    judge,
)
from glove.evaluate.errors import FixtureError
from glove.library import Library, LibraryError, read_verified
from glove.plan import CONTAINER_LIMIT_NAMES, EVALUATION_KIND
from glove.records import EvaluationEntry, FixtureRef, ReceiptOutcome
from glove.session.errors import FixtureRefused

#: The evaluator's mailbox, in chunks (each at most the drain's read size).
EVALUATOR_MAILBOX: Final = 8
#: The deadline of one Feed in the mailbox: generous, since the drain waits for room
#: rather than piling chunks up; a Feed dropped past it is a gap in the evidence.
FEED_DEADLINE_S: Final = 120.0
#: How long the registry waits for the evaluator to take the rest of the stream.
FINISH_DEADLINE_S: Final = 120.0
#: Most bytes the backlog may hold beyond the mailbox (the sandbox's last drain hands its
#: remaining output over without waiting); more crashes the evaluator (and the session).
MAX_BACKLOG_BYTES: Final = 64 * 1024 * 1024
#: The refusal code of fixture bytes that are not a valid fixture.
FIXTURE_INVALID: Final = "fixture_invalid"
#: ... and of a fixture that cannot be copied out of the library for another reason.
FIXTURE_UNREADABLE: Final = "fixture_unreadable"
#: Session outcome kinds in which the agent's run says nothing (Glove's part failed, or
#: the run was cut short by the caller or a lost daemon): the verdict is ``infra_error``
#: with the kind as its code.
INFRA_KINDS: Final = frozenset(
    {
        "setup_error",
        "exec_error",
        "internal_error",
        "mediation_failed",
        "cancelled",
        "daemon_lost",
    }
)
_PLAN_LIMIT_OF: Final = {container: plan for plan, container in CONTAINER_LIMIT_NAMES.items()}


def read_fixture(root: Path, digest: str, size: int) -> Fixture:
    """Read the fixture bundle ``digest`` of ``size`` bytes from the library at ``root``
    and decode it (blocking: run it off the loop).

    The bundle is opened beneath the library's pinned root descriptor (``openat2``, no
    symlinks, no ``..``, no other mount), its inode checked (regular, ours, one link, no
    group or other write, the size asked for), then hashed while it is copied into a
    memfd; only the copy's bytes, the ones hashed, are decoded. Nothing is mounted: the
    fixture never exists inside the sandbox.

    Raises:
        FixtureRefused: the library's code (``library_root_*``, ``projection_*``),
            ``fixture_invalid`` (not a fixture) or ``fixture_unreadable``.
    """
    try:
        with Library.open(root) as library, library.open_bundle(digest, size) as bundle:
            copy = os.memfd_create("glove-fixture", os.MFD_CLOEXEC)
            try:
                read_verified(bundle, copy)
                data = os.pread(copy, size + 1, 0)
            finally:
                os.close(copy)
    except LibraryError as exc:
        raise FixtureRefused(exc.code, f"fixture {digest} refused ({exc.code}): {exc}") from exc
    except OSError as exc:
        raise FixtureRefused(
            FIXTURE_UNREADABLE,
            f"fixture {digest} refused ({FIXTURE_UNREADABLE}): it could not be copied: "
            f"{exc.strerror}",
        ) from exc
    if len(data) != size:
        raise FixtureRefused(
            FIXTURE_UNREADABLE,
            f"fixture {digest} refused ({FIXTURE_UNREADABLE}): {len(data)} bytes copied of {size}",
        )
    try:
        return decode_fixture(data)
    except FixtureError as exc:
        raise FixtureRefused(
            FIXTURE_INVALID, f"fixture {digest} refused ({FIXTURE_INVALID}): {exc}"
        ) from exc


class Feed(msgspec.Struct, frozen=True):
    """The next chunk of the raw stream; ``offset`` is its first byte's."""

    offset: int
    data: bytes


class Finish(msgspec.Struct, frozen=True):
    """The stream ended; ``evicted`` is what the transcript ring evicted of it."""

    evicted: int


class Finished(msgspec.Struct, frozen=True):
    """The evaluator's evidence and whether it covers every byte the drain was given."""

    evidence: Evidence
    complete: bool


class EvaluatorActor(Actor):
    """Evaluates one PTY session's raw stream against its fixture (module docstring)."""

    def __init__(self, fixture: Fixture) -> None:
        """Evaluate against ``fixture`` (decoded, so within the DSL's bounds)."""
        super().__init__("evaluator", mailbox_size=EVALUATOR_MAILBOX)
        self._evaluator = StreamEvaluator(fixture)
        self._backlog: collections.deque[Feed] = collections.deque()
        self._backlog_bytes = 0
        self._room: asyncio.Future[None] | None = None
        self._offered = 0
        self._gap = False
        self.finished: Finished | None = None

    # -- the drain's side ------------------------------------------------------------------

    @property
    def offered(self) -> int:
        """Bytes the drain has handed over so far."""
        return self._offered

    def observe(self, data: bytes) -> Awaitable[None] | None:
        """Take the drain's next chunk (before its ring sees it); an awaitable while the
        mailbox is full (the drain's reader pauses until it completes).

        Raises:
            ActorDead: the evaluator is gone (the drain crashes, and with it the session).
        """
        if not data:
            return None
        if self._backlog_bytes + len(data) > MAX_BACKLOG_BYTES:
            overflow = OverflowError(
                f"the evaluator's backlog would pass {MAX_BACKLOG_BYTES} bytes"
            )
            self.crash(overflow)
            raise overflow
        self._backlog.append(Feed(self._offered, bytes(data)))
        self._backlog_bytes += len(data)
        self._offered += len(data)
        self._pump()
        if not self._backlog:
            return None
        if self._room is None or self._room.done():
            self._room = asyncio.get_running_loop().create_future()
        return asyncio.shield(self._room)

    def _pump(self) -> None:
        """Move chunks from the backlog into the mailbox while it has room."""
        while self._backlog and self.mailbox_depth < self.mailbox_capacity:
            feed = self._backlog.popleft()
            self._backlog_bytes -= len(feed.data)
            self.tell(feed, timeout=FEED_DEADLINE_S)
        room = self._room
        if not self._backlog and room is not None and not room.done():
            self._room = None
            room.set_result(None)

    async def finish(self, evicted: int, *, timeout: float = FINISH_DEADLINE_S) -> Finished:
        """Once the stream has ended: wait for the backlog to enter the mailbox, then the
        evidence, behind every chunk (``evicted``: the ring's evicted bytes).

        Raises:
            DeadlineExceeded: the evaluator did not get through the stream in time.
            ActorDead: it died meanwhile.
        """
        async with asyncio.timeout(timeout):
            while self._backlog:
                room = self._room
                if room is None:
                    self._pump()
                    continue
                await asyncio.shield(room)
        finished: Finished = await self.ask(Finish(evicted), timeout=timeout, wait=True)
        return finished

    # -- the actor's side ------------------------------------------------------------------

    async def handle(self, msg: object) -> object:
        """Feed a chunk (a gap is remembered) or finish.

        Raises:
            EvidenceError: the evaluator used after it finished (a bug).
        """
        if isinstance(msg, Feed):
            if msg.offset != self._evaluator.bytes_total:
                self._gap = True  # a chunk was dropped: the evidence can never be complete
            self._evaluator.feed(msg.data)
            self._pump()
            return None
        if isinstance(msg, Finish):
            total = self._evaluator.bytes_total
            self._evaluator.note_evicted(min(max(msg.evicted, 0), total))
            complete = not self._gap and total == self._offered and not self._backlog
            self.finished = Finished(self._evaluator.finish(), complete)
            return self.finished
        return await super().handle(msg)


# -- the verdict -------------------------------------------------------------------------------


def termination_of(
    outcome: ReceiptOutcome,
    result: SandboxResult | None,
    *,
    complete: bool,
    infra_error: str | None = None,
) -> Termination:
    """What Glove's supervisor saw of the run, from the session's outcome and result.

    ``complete`` says the evaluator's evidence covers the whole stream; ``infra_error``
    names a failure of Glove's own part (the evaluator's) that the outcome does not show.
    """
    kind = outcome.kind
    code = infra_error or (kind if kind in INFRA_KINDS else None)
    limits_hit: tuple[str, ...] = ()
    exit_code = None
    wall_ms = 0
    if result is not None:
        limits_hit = tuple(
            sorted(_PLAN_LIMIT_OF.get(name, name) for name, r in result.limits.items() if r.hit)
        )
        if kind == "exited" and 0 <= result.exit_code <= 255:
            exit_code = result.exit_code
        running_s = result.durations.total_s - result.durations.setup_s
        wall_ms = max(0, round(running_s * 1000))
    return Termination(
        drained=complete and result is not None,
        infra_error=code,
        limits_hit=limits_hit,
        exit_code=exit_code,
        wall_ms=wall_ms,
    )


def infra_outcome(code: str) -> Outcome:
    """The outcome of a run that never had a fixture to judge against (the fixture was
    refused, or the daemon was lost before anything was judged)."""
    return Outcome(
        verdict="infra_error",
        reasons=(
            Reason(
                code="infra_error",
                detail=f"Glove's infrastructure failed ({code}): this run says nothing "
                "about the agent",
                infra_error=code,
            ),
        ),
    )


def verdict_of(
    termination: Termination, evidence: Evidence | None, fixture: Fixture | None
) -> Outcome:
    """``judge``, or an ``infra_error`` outcome when there is no fixture."""
    if fixture is None:
        return infra_outcome(termination.infra_error or "fixture_missing")
    return judge(termination, evidence, fixture)


def evaluation_entry(
    *,
    fixture_digest: str,
    fixture_size: int,
    refusal: str | None,
    termination: Termination | None,
    evidence: Evidence | None,
    outcome: Outcome,
) -> EvaluationEntry:
    """The envelope's ``evaluation`` member: what was judged, from what, and the outcome."""
    return EvaluationEntry(
        kind=EVALUATION_KIND,
        fixture=FixtureRef(digest=fixture_digest, size=fixture_size),
        refusal=refusal,
        termination=termination,
        evidence=evidence,
        outcome=outcome,
    )
