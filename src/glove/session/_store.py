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
"""

from __future__ import annotations

import asyncio
import json
import time
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

    def __init__(self, journal: Journal, key: bytes) -> None:
        self.journal = journal
        self._key = key
        self.sessions: dict[str, SessionRecord] = {}

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

    async def _append(self, event: dict[str, Any]) -> None:
        await self.journal.append(_encode(event), kind=RecordKind.DATA)
        self._apply(_encode(event))

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
        self, session_id: str, state: str, details: dict[str, Any] | None = None
    ) -> None:
        """Persist a state change before it is visible."""
        event: dict[str, Any] = {
            "t": "state",
            "id": session_id,
            "at": time.time_ns(),
            "state": state,
        }
        if details:
            event["details"] = details
        await self._append(event)

    async def terminal(
        self,
        session_id: str,
        receipt_seq: int,
        outcome: dict[str, Any],
        evaluation: dict[str, Any] | None = None,
    ) -> None:
        """Persist that the session's terminal receipt (or, for a refinement plan, its
        envelope, whose ``evaluation`` outcome is kept too) is in the receipt journal."""
        event: dict[str, Any] = {
            "t": "terminal",
            "id": session_id,
            "at": time.time_ns(),
            "receipt_seq": receipt_seq,
            "outcome": outcome,
        }
        if evaluation is not None:
            event["evaluation"] = evaluation
        await self._append(event)

    async def cleaned(self, session_id: str) -> None:
        """Persist that the session's data was removed."""
        await self._append({"t": "cleaned", "id": session_id, "at": time.time_ns()})


def session_dir(root: Path, session_id: str) -> Path:
    """Where a session's output lives."""
    return root / session_id
