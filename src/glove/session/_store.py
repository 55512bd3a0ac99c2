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
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from glove.journal import Journal, PosixStorage, RecordKind
from glove.session.errors import RecoveryRefused

State = Literal["created", "preparing", "composed", "running", "finalizing", "terminal"]
TERMINAL: Final = "terminal"
#: States a session can be in while the daemon dies (recovery gives each a receipt).
LIVE_STATES: Final = frozenset({"created", "preparing", "composed", "running", "finalizing"})


@dataclass(slots=True)
class SessionRecord:
    """What the journal says of one session (plus what the daemon holds in memory)."""

    session_id: str
    created_ns: int
    plan: dict[str, Any]
    sha256: str
    blake3: str
    exposures: dict[str, int]
    state: str = "created"
    state_ns: int = 0
    receipt_seq: int | None = None
    outcome: dict[str, Any] | None = None
    evaluation: dict[str, Any] | None = None
    cleaned: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        """Whether the session has its terminal receipt."""
        return self.state == TERMINAL


def _encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


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
            event = json.loads(payload)
            kind, session_id, at = event["t"], event["id"], int(event["at"])
        except (ValueError, KeyError, TypeError) as exc:
            raise RecoveryRefused(
                f"the session journal holds a record that is no event: {exc}"
            ) from exc
        if kind == "created":
            self.sessions[session_id] = SessionRecord(
                session_id,
                at,
                event["plan"],
                event["sha256"],
                event["blake3"],
                dict(event.get("exposures", {})),
                "created",
                at,
            )
            return
        record = self.sessions.get(session_id)
        if record is None:
            raise RecoveryRefused(
                f"the session journal has a {kind} event for unknown {session_id}"
            )
        if kind == "state":
            record.state, record.state_ns = str(event["state"]), at
            record.details.update(event.get("details") or {})
        elif kind == "terminal":
            record.state, record.state_ns = TERMINAL, at
            record.receipt_seq = event.get("receipt_seq")
            record.outcome = event.get("outcome")
            record.evaluation = event.get("evaluation")
        elif kind == "cleaned":
            record.cleaned = True

    async def _append(
        self, event: dict[str, Any], *, durable: bool = True, show: bool = True
    ) -> None:
        """Write ``event``; with ``durable`` wait for its fdatasync (which makes every record
        before it durable too: those are shown first, in order). ``show`` applies an event
        written without one at once (the terminal record); otherwise it waits for a commit."""
        payload = _encode(event)
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
            record = self.sessions.get(json.loads(payload)["id"])
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
        plan: dict[str, Any],
        sha256: str,
        blake3: str,
        exposures: dict[str, int],
    ) -> SessionRecord:
        """Persist a new session (its plan and digests) before it is acknowledged."""
        await self._append(
            {
                "t": "created",
                "id": session_id,
                "at": time.time_ns(),
                "plan": plan,
                "sha256": sha256,
                "blake3": blake3,
                "exposures": exposures,
            }
        )
        return self.sessions[session_id]

    async def transition(
        self,
        session_id: str,
        state: str,
        details: dict[str, Any] | None = None,
        *,
        durable: bool = True,
    ) -> None:
        """Persist a state change before it is visible.

        ``durable=False``: written without an fdatasync of its own, shown once a later
        commit made it durable (only for a state recovery treats as the one before it).
        """
        event: dict[str, Any] = {
            "t": "state",
            "id": session_id,
            "at": time.time_ns(),
            "state": state,
        }
        if details:
            event["details"] = details
        await self._append(event, durable=durable, show=durable)

    async def terminal(
        self,
        session_id: str,
        receipt_seq: int,
        outcome: dict[str, Any],
        evaluation: dict[str, Any] | None = None,
    ) -> None:
        """Record that the session's terminal receipt (or, for a refinement plan, its
        envelope, whose ``evaluation`` outcome is kept too) is in the receipt journal.

        A resource plan's record is written without an fdatasync of its own and applied at
        once: the receipt is durable already, and recovery makes a session whose record a
        power cut lost terminal from it (same outcome and seq); the journal's next commit
        makes this record durable. A refinement plan's record is synced before it is shown:
        the verdict it carries is not rebuilt by recovery.
        """
        event: dict[str, Any] = {
            "t": "terminal",
            "id": session_id,
            "at": time.time_ns(),
            "receipt_seq": receipt_seq,
            "outcome": outcome,
        }
        if evaluation is not None:
            event["evaluation"] = evaluation
        await self._append(event, durable=evaluation is not None)

    async def cleaned(self, session_id: str) -> None:
        """Persist that the session's data was removed."""
        await self._append({"t": "cleaned", "id": session_id, "at": time.time_ns()})


def session_dir(root: Path, session_id: str) -> Path:
    """Where a session's output lives."""
    return root / session_id
