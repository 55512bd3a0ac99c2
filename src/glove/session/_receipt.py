"""The terminal receipt of a session: what it commits to, as canonical JSON (pure).

One receipt per session, appended to the receipt journal (a transparency log) **before**
the session's terminal state is visible. Values are strings, integers, booleans or null
(times and CPU in microseconds: RFC 8785 numbers are exact only within 2**53), so its
RFC 8785 encoding is simple for a third party to reproduce (a limit's value may be a
fractional number of seconds, encoded as RFC 8785 numbers are)::

    {"receipt": "glove-session/v1", "session_id": "...",
     "plan": {"sha256": "sha256:...", "blake3": "blake3:..."},
     "launch_binding": "sha256:..." | null,
     "outcome": {"kind": "exited" | "signaled" | "limit" | "setup_error" | "exec_error" |
                         "cancelled" | "internal_error" | "daemon_lost",
                 "exit_code": N | null, "signal": N | null, "limit": NAME | null,
                 "mechanism": NAME | null, "error": TEXT | null},
     "limits": {NAME: {"value": N, "mechanism": NAME, "hit": true | false | null}},
     "usage": {"cpu_user_us": N, "cpu_system_us": N, "peak_rss_bytes": N,
               "disk_bytes": N | null, "output_bytes": N, "wall_us": N},
     "output": {STREAM: {"bytes": N, "sha256": "sha256:..."}},
     "audit": {"records": N, "bytes": N, "sha256": "sha256:...", "files": N} | null,
     "counts": {"tool_calls_denied": N, "egress_allowed": N, "egress_denied": N},
     "times": {"created_us": N, "launched_us": N | null, "ended_us": N},
     "transcript": {...},                      (PTY sessions only, see below)
     "projections": [{"alias": A, "target": PATH, "digest": "sha256:...", "size": N,
                      "mount_flags": ["ro", "nosuid", "nodev", "noexec"],
                      "freeze_method": "detached-tmpfs"}]}   (only when the plan has some)

A projection refused at prepare or in the sandbox's init makes the outcome a
``setup_error`` whose ``error_code`` is the refusal's code (``projection_digest_mismatch``,
``projection_symlink``, ...); ``error_code`` is present only then.

A PTY session's ``output`` has one stream, ``pty``; its ``transcript`` commits to the
terminal's bytes as the transcript ring keeps them (``glove.session._transcript_format``)::

    {"format": "glove-transcript/v1", "bytes": N, "digest": "sha256:...",
     "evicted": N, "ring_bytes": N, "complete": true | false}

``complete`` is false after a crash (``daemon_lost``): ``bytes`` and ``digest`` are then
those of the transcript's last durable record; a transcript that does not verify has null
numbers and an ``error``.

A **refinement plan** (one with an ``evaluation``) ends with a *refinement envelope*
instead: the same members, ``"receipt": "glove-refinement/v1"`` (its envelope domain),
and ``evaluation`` (``glove.session._evaluation.evaluation_entry``), appended as a
``REFINEMENT`` record (its own HMAC domain) to the same journal, so it shares the global
sequence, the chain head, the Merkle tree and the checkpoints. :func:`check_envelope`
refuses the wrong kind for a plan, either way, before anything is appended.
"""

from __future__ import annotations

from typing import Final

import msgspec

from glove.container import SandboxResult
from glove.journal import REFINEMENT_ENVELOPE, RESOURCE_ENVELOPE, RecordKind
from glove.protocol import JsonObject
from glove.records import (
    AuditDigest,
    EvaluationEntry,
    LimitEntry,
    OutcomeKind,
    OutputDigest,
    PlanDigests,
    Projection,
    Receipt,
    ReceiptOutcome,
    RefinementEnvelope,
    SessionReceipt,
    Times,
    TranscriptEntry,
    Usage,
)
from glove.session.errors import EnvelopeMismatch

RECEIPT_FORMAT: Final = RESOURCE_ENVELOPE
REFINEMENT_FORMAT: Final = REFINEMENT_ENVELOPE


def is_refinement_plan(plan: JsonObject) -> bool:
    """Whether a persisted plan (its canonical JSON, decoded) carries an evaluation."""
    return plan.get("evaluation") is not None


def envelope_record_kind(plan: JsonObject) -> RecordKind:
    """The record kind a plan's terminal envelope must be appended as."""
    return RecordKind.REFINEMENT if is_refinement_plan(plan) else RecordKind.RECEIPT


def check_envelope(plan: JsonObject, payload: Receipt, kind: RecordKind) -> None:
    """Refuse a terminal envelope that does not fit its plan: a resource receipt for a
    refinement plan, a refinement envelope for a resource plan, or a record kind that is
    not the payload's (its type is its domain, and only a refinement envelope carries an
    evaluation).

    Raises:
        EnvelopeMismatch: any of those (a bug; nothing is appended).
    """
    want = envelope_record_kind(plan)
    if kind != want:
        raise EnvelopeMismatch(
            f"a {'refinement' if want == RecordKind.REFINEMENT else 'resource'} plan's "
            f"terminal envelope is a {want.name} record, not {kind.name}"
        )
    carried = (
        RecordKind.REFINEMENT if isinstance(payload, RefinementEnvelope) else RecordKind.RECEIPT
    )
    if carried != kind:
        domain = REFINEMENT_ENVELOPE if kind == RecordKind.REFINEMENT else RESOURCE_ENVELOPE
        raise EnvelopeMismatch(
            f"a {kind.name} record carries the {domain} envelope, not "
            f"{type(payload).__struct_config__.tag!r}"
        )


def _micro(seconds: float) -> int:
    return round(seconds * 1_000_000)


def outcome_of(
    result: SandboxResult | None,
    *,
    kind: OutcomeKind | None = None,
    error: str | None = None,
    error_code: str | None = None,
) -> ReceiptOutcome:
    """The receipt's ``outcome`` from a sandbox result (or from ``kind`` without one);
    ``error_code`` (a refused projection's code) is added only when given."""
    code: str | msgspec.UnsetType = msgspec.UNSET if error_code is None else error_code
    if result is None:
        return ReceiptOutcome(
            kind=kind or "setup_error",
            exit_code=None,
            signal=None,
            limit=None,
            mechanism=None,
            error=error,
            error_code=code,
        )
    limit = next((name for name, r in result.limits.items() if r.hit), None)
    outcome_kind: OutcomeKind = kind or result.outcome
    if outcome_kind == "signaled" and result.error == "cancelled by the caller":
        outcome_kind = "cancelled"
    return ReceiptOutcome(
        kind=outcome_kind,
        exit_code=result.exit_code,
        signal=result.signal,
        limit=limit,
        mechanism=result.limits[limit].mechanism if limit is not None else None,
        error=error or result.error,
        error_code=code,
    )


def terminal_receipt(
    *,
    session_id: str,
    plan_sha256: str,
    plan_blake3: str,
    launch_binding: str | None,
    result: SandboxResult | None,
    outcome: ReceiptOutcome,
    output: dict[str, OutputDigest],
    created_ns: int,
    launched_ns: int | None,
    ended_ns: int,
    audit: AuditDigest | None = None,
    counts: dict[str, int] | None = None,
    transcript: TranscriptEntry | None = None,
    evaluation: EvaluationEntry | None = None,
    projections: list[Projection] | None = None,
) -> Receipt:
    """The receipt (encode it with :func:`glove.records.encode_receipt`).

    ``audit`` is the digest of the session's audit log (its MCP decisions and egress
    records; null without tools or network), ``counts`` what was refused, and a PTY
    session's receipt carries its ``transcript``; a session with projections lists what
    was mounted (``projections``). With ``evaluation`` it is a refinement envelope (module
    docstring).
    """
    limits: dict[str, LimitEntry] = {}
    usage = Usage(
        cpu_user_us=0,
        cpu_system_us=0,
        peak_rss_bytes=0,
        disk_bytes=None,
        output_bytes=0,
        wall_us=0,
    )
    if result is not None:
        limits = {
            name: LimitEntry(value=r.value, mechanism=r.mechanism, hit=r.hit)
            for name, r in result.limits.items()
        }
        usage = Usage(
            cpu_user_us=_micro(result.usage.cpu_user_s),
            cpu_system_us=_micro(result.usage.cpu_system_s),
            peak_rss_bytes=result.usage.peak_rss_bytes,
            disk_bytes=result.usage.disk_bytes,
            output_bytes=result.output.bytes,
            wall_us=_micro(result.durations.total_s),
        )
    receipt = SessionReceipt(
        session_id=session_id,
        plan=PlanDigests(sha256=plan_sha256, blake3=plan_blake3),
        launch_binding=launch_binding,
        outcome=outcome,
        limits=limits,
        usage=usage,
        output=dict(output),
        times=Times(
            created_us=created_ns // 1000,
            launched_us=launched_ns // 1000 if launched_ns is not None else None,
            ended_us=ended_ns // 1000,
        ),
        audit=audit,
        counts=dict(counts or {}),
        transcript=msgspec.UNSET if transcript is None else transcript,
        projections=list(projections) if projections else msgspec.UNSET,
    )
    if evaluation is None:
        return receipt
    return RefinementEnvelope(**msgspec.structs.asdict(receipt), evaluation=evaluation)
