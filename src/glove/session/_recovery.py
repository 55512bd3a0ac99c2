"""Recovery at start: the one honest receipt of each session the last daemon left alive.

Every session the journal shows alive got no terminal state because the daemon died; its
sandbox died with it (the sandbox's init watches its launcher), so it gets exactly one
receipt, outcome ``daemon_lost``, unless the receipt journal already holds its receipt (the
daemon died between the two appends): then that receipt's outcome is the truth.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from glove.evaluate import Outcome
from glove.records import Receipt, ReceiptOutcome, RecordInvalid, RefinementEnvelope
from glove.session._driver import journaled_projections, lost_evaluation
from glove.session._mediated import AUDIT_NAME, audit_digest, receipt_audit
from glove.session._receipt import is_refinement_plan, terminal_receipt
from glove.session._receipt_index import ReceiptIndex
from glove.session._store import SessionRecord
from glove.session._transcript import recovered_summary
from glove.session.errors import RecoveryRefused

_log = logging.getLogger(__name__)

#: Appends a session's terminal envelope; returns its sequence number.
AppendTerminal = Callable[[SessionRecord, Receipt], Awaitable[int]]


async def recovered_receipt(
    record: SessionRecord,
    *,
    seq: int | None,
    index: ReceiptIndex,
    sessions_data: Path,
    append: AppendTerminal,
) -> tuple[int, ReceiptOutcome, Outcome | None]:
    """The receipt of a session found alive at start: ``(seq, outcome, evaluation)``;
    ``seq`` is its receipt's if the transparency log holds one already.

    Raises:
        RecoveryRefused: its receipt exists but does not say what the plan needs.
        JournalError: the ``daemon_lost`` receipt could not be made durable.
    """
    if seq is not None:
        try:
            found = await asyncio.to_thread(index.receipt, seq)
        except RecordInvalid as exc:
            raise RecoveryRefused(
                f"receipt {seq} of session {record.session_id} does not decode: {exc}"
            ) from exc
        if found is None:
            raise RecoveryRefused(
                f"receipt {seq} of session {record.session_id} has no outcome: the "
                "receipt journal and the session journal disagree"
            )
        if not is_refinement_plan(record.plan):
            return seq, found.outcome, None
        if not isinstance(found, RefinementEnvelope):
            raise RecoveryRefused(
                f"receipt {seq} of refinement session {record.session_id} is no "
                "refinement envelope: the two journals disagree"
            )
        return seq, found.outcome, found.evaluation.outcome
    was = record.state
    error = f"gloved stopped while the session was {was}; its sandbox ended with it"
    # What was durable before the crash: the transcript, the audit log's records.
    directory = sessions_data / record.session_id
    transcript = None
    audit = None
    try:
        if record.plan.get("terminal") == "pty":
            transcript = await asyncio.to_thread(recovered_summary, directory)
        audit = receipt_audit(await asyncio.to_thread(audit_digest, directory / AUDIT_NAME))
    except Exception as exc:  # noqa: BLE001 - one session's leftovers never stop gloved starting
        # Its receipt says daemon_lost without these digests (an unreadable file): one
        # session's data must not keep the daemon from starting, again and again.
        _log.error(
            "session %s: its output could not be digested at recovery (%s); its "
            "receipt has no transcript or audit digest",
            record.session_id,
            type(exc).__name__,
            exc_info=exc,
        )
        error += f"; its output could not be digested ({type(exc).__name__})"
        transcript = audit = None
    outcome = ReceiptOutcome(
        kind="daemon_lost",
        exit_code=None,
        signal=None,
        limit=None,
        mechanism=None,
        error=error,
    )
    entry = lost_evaluation(record, "daemon_lost")
    payload = terminal_receipt(
        session_id=record.session_id,
        plan_sha256=record.sha256,
        plan_blake3=record.blake3,
        launch_binding=record.launch_binding,
        result=None,
        outcome=outcome,
        output={},
        created_ns=record.created_ns,
        launched_ns=record.launched_ns,
        ended_ns=time.time_ns(),
        audit=audit,
        transcript=transcript,
        evaluation=entry,
        projections=journaled_projections(record),
    )
    seq = await append(record, payload)
    return seq, outcome, entry.outcome if entry is not None else None
