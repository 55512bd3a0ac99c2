"""The session journal: every plan and every transition, durable before it is acknowledged.

One record per event, JSON in a ``PLAN``-kind journal (HMAC-chained, never loses its
beginning; full is a refusal, not a rotation)::

    {"t": "created",  "id": ..., "at": NS, "plan": {...}, "sha256": ..., "blake3": ...,
     "exposures": {"alias": generation}}
    {"t": "state",    "id": ..., "at": NS, "state": "preparing" | "composed" | "running" |
                                                      "finalizing", ...}
    {"t": "terminal", "id": ..., "at": NS, "receipt_seq": N, "outcome": {...},
     "evaluation": {"verdict": ..., "reasons": [...]}}     (refinement plans only)
    {"t": "cleaned",  "id": ..., "at": NS}

:meth:`SessionStore.replay` rebuilds every session's last known state from the journal
(verified with the key) at start; :class:`SessionRecord` is that state.

Not every record needs an fdatasync of its own (docs/sessions.md, "Durable writes"): a
transition with ``durable=False`` (``preparing``, ``finalizing``: recovery treats a session
in them as in the state before) is written, so a kill -9 keeps it, and shown (applied, and
handed to ``on_shown``) only once a later commit of this journal made it durable. The
``terminal`` record is written without one too but shown at once: its receipt, durable in
the receipt journal before it, is what recovery makes the session terminal from.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from glove.evaluate import Outcome
from glove.journal import Journal, PosixStorage, RecordKind
from glove.protocol import JsonObject
from glove.records import (
    Cleaned,
    Created,
    Projection,
    ReceiptOutcome,
    RecordInvalid,
    SessionEvent,
    State,
    StateChanged,
    StateDetails,
    Terminal,
    decode_event,
    encode_event,
)
from glove.session.errors import RecoveryRefused

TERMINAL: Final = "terminal"
#: States a session can be in while the daemon dies (recovery gives each a receipt).
LIVE_STATES: Final = frozenset({"created", "preparing", "composed", "running", "finalizing"})


@dataclass(slots=True)
class SessionRecord:
    """What the journal says of one session (plus what the daemon holds in memory)."""

    session_id: str
    created_ns: int
    plan: JsonObject
    sha256: str
    blake3: str
    exposures: dict[str, int]
    state: State = "created"
    state_ns: int = 0
    receipt_seq: int | None = None
    outcome: ReceiptOutcome | None = None
    evaluation: Outcome | None = None
    cleaned: bool = False
    #: What the state changes added (each member as its latest change set it).
    details: StateDetails = field(default_factory=StateDetails)

    @property
    def terminal(self) -> bool:
        """Whether the session has its terminal receipt."""
        return self.state == TERMINAL

    @property
    def launch_binding(self) -> str | None:
        """The launch binding (``composed`` on), or None."""
        value = self.details.launch_binding
        return None if isinstance(value, msgspec.UnsetType) else value

    @property
    def launched_ns(self) -> int | None:
        """When the sandbox was launched (``running`` on), or None."""
        value = self.details.launched_ns
        return None if isinstance(value, msgspec.UnsetType) else value

    @property
    def projections(self) -> list[Projection] | None:
        """What the durable ``composed`` step said was to be mounted (None before it)."""
        value = self.details.projections
        return None if isinstance(value, msgspec.UnsetType) else value


def _merged(details: StateDetails, added: StateDetails) -> StateDetails:
    """``details`` with each member ``added`` sets."""
    changes = {
        name: value
        for name in added.__struct_fields__
        if not isinstance(value := getattr(added, name), msgspec.UnsetType)
    }
    return msgspec.structs.replace(details, **changes) if changes else details


class SessionStore:
    """Appends session events durably; replays them at start (owned by the registry)."""

    def __init__(
        self,
        journal: Journal,
        key: bytes,
        *,
        on_shown: Callable[[SessionRecord], None] | None = None,
    ) -> None:
        self.journal = journal
        self._key = key
        self.sessions: dict[str, SessionRecord] = {}
        #: Called with a session once a record written without its own fdatasync is
        #: durable and applied (the registry publishes it then).
        self.on_shown = on_shown
        self._unshown: list[tuple[int, bytes]] = []  # (seq, payload), written, not durable
        self._written = 0  # the highest seq written, and the highest known durable
        self._durable = 0

    async def replay(self) -> dict[str, SessionRecord]:
        """Read every record (verified with the key) and rebuild the sessions.

        Raises:
            RecoveryRefused: the journal does not verify, or a record is not an event.
        """
        from glove.journal import iter_entries

        status = await self.journal.status()
        path = self.journal.writer.path

        def scan() -> list[bytes]:
            return [
                entry.payload
                for entry in iter_entries(PosixStorage(), path, self._key, upto=status.seq)
                if entry.kind == RecordKind.DATA
            ]

        try:
            payloads = await asyncio.to_thread(scan)
        except Exception as exc:
            raise RecoveryRefused(f"the session journal {path} does not verify: {exc}") from exc
        for payload in payloads:
            self._apply(payload)
        return self.sessions

    def _apply(self, payload: bytes) -> None:
        try:
            event = decode_event(payload)
        except RecordInvalid as exc:
            raise RecoveryRefused(str(exc)) from exc
        if isinstance(event, Created):
            self.sessions[event.id] = SessionRecord(
                event.id,
                event.at,
                event.plan,
                event.sha256,
                event.blake3,
                {} if isinstance(event.exposures, msgspec.UnsetType) else dict(event.exposures),
                "created",
                event.at,
            )
            return
        record = self.sessions.get(event.id)
        if record is None:
            kind = type(event).__struct_config__.tag
            raise RecoveryRefused(f"the session journal has a {kind} event for unknown {event.id}")
        if isinstance(event, StateChanged):
            record.state, record.state_ns = event.state, event.at
            if not isinstance(event.details, msgspec.UnsetType):
                record.details = _merged(record.details, event.details)
        elif isinstance(event, Terminal):
            record.state, record.state_ns = TERMINAL, event.at
            record.receipt_seq = event.receipt_seq
            record.outcome = event.outcome
            record.evaluation = (
                None if isinstance(event.evaluation, msgspec.UnsetType) else event.evaluation
            )
        else:
            record.cleaned = True

    async def _append(
        self, event: SessionEvent, *, durable: bool = True, show: bool = True
    ) -> None:
        """Write ``event``; with ``durable`` wait for its fdatasync (which makes every record
        before it durable too: those are shown first, in order). ``show`` applies an event
        written without one at once (the terminal record); otherwise it waits for a commit."""
        payload = encode_event(event)
        receipt = await self.journal.append(payload, kind=RecordKind.DATA, durable=durable)
        self._written = max(self._written, receipt.seq)
        if durable:
            self._durable = max(self._durable, receipt.seq)
            self._show_upto(receipt.seq)
        elif not show:
            self._unshown.append((receipt.seq, payload))
            return
        self._apply(payload)

    def _show_upto(self, seq: int) -> None:
        """Apply and hand out the records written before ``seq`` (durable now), in order;
        a state record of a session already terminal is only history (replay keeps it)."""
        ready = [item for item in self._unshown if item[0] < seq]
        if not ready:
            return
        self._unshown = [item for item in self._unshown if item[0] >= seq]
        for _seq, payload in ready:
            record = self.sessions.get(decode_event(payload).id)
            if record is None or record.terminal:
                continue
            self._apply(payload)
            if self.on_shown is not None:
                self.on_shown(record)

    async def sync(self) -> None:
        """Make every record written so far durable (one fdatasync, none when all are).

        Raises:
            JournalError: as :meth:`Journal.sync`.
        """
        if self._written > self._durable:
            seq = await self.journal.sync()
            self._durable = max(self._durable, seq)
            self._show_upto(seq + 1)

    async def created(
        self,
        session_id: str,
        plan: JsonObject,
        sha256: str,
        blake3: str,
        exposures: dict[str, int],
    ) -> SessionRecord:
        """Persist a new session (its plan and digests) before it is acknowledged."""
        await self._append(
            Created(
                id=session_id,
                at=time.time_ns(),
                plan=plan,
                sha256=sha256,
                blake3=blake3,
                exposures=exposures,
            )
        )
        return self.sessions[session_id]

    async def transition(
        self,
        session_id: str,
        state: State,
        details: StateDetails | None = None,
        *,
        durable: bool = True,
    ) -> None:
        """Persist a state change before it is visible.

        ``durable=False``: written without an fdatasync of its own, shown once a later
        commit made it durable (only for a state recovery treats as the one before it).
        """
        event = StateChanged(
            id=session_id,
            at=time.time_ns(),
            state=state,
            details=msgspec.UNSET if details is None or details == StateDetails() else details,
        )
        await self._append(event, durable=durable, show=durable)

    async def terminal(
        self,
        session_id: str,
        receipt_seq: int,
        outcome: ReceiptOutcome,
        evaluation: Outcome | None = None,
    ) -> None:
        """Record that the session's terminal receipt (or, for a refinement plan, its
        envelope, whose ``evaluation`` outcome is kept too) is in the receipt journal.

        A resource plan's record is written without an fdatasync of its own and applied at
        once: the receipt is durable already, and recovery makes a session whose record a
        power cut lost terminal from it (same outcome and seq); the journal's next commit
        makes this record durable. A refinement plan's record is synced before it is shown:
        the verdict it carries is not rebuilt by recovery.
        """
        event = Terminal(
            id=session_id,
            at=time.time_ns(),
            receipt_seq=receipt_seq,
            outcome=outcome,
            evaluation=msgspec.UNSET if evaluation is None else evaluation,
        )
        await self._append(event, durable=evaluation is not None)

    async def cleaned(self, session_id: str) -> None:
        """Persist that the session's data was removed."""
        await self._append(Cleaned(id=session_id, at=time.time_ns()))


def session_dir(root: Path, session_id: str) -> Path:
    """Where a session's output lives."""
    return root / session_id
