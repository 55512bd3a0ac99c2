"""A session's terminal envelope (its receipt), as the receipt journal holds it.

Two kinds, tagged by ``receipt``: ``glove-session/v1`` (a resource plan's receipt) and
``glove-refinement/v1`` (a refinement plan's envelope: the same members and its
``evaluation``). The members are those ``glove.session._receipt`` documents; the receipt is
encoded with RFC 8785 (``glove.plan.jcs_dumps``) of :func:`msgspec.to_builtins`, so a
receipt decoded and encoded again is the same bytes (an optional member absent stays
absent). Receipts are decoded strictly: an unknown kind or member is refused.
"""

from __future__ import annotations

import msgspec

from glove.evaluate import Evidence, Outcome, Termination
from glove.plan import jcs_dumps
from glove.records._outcome import ReceiptOutcome
from glove.records.errors import RecordInvalid


class _Member(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class PlanDigests(_Member, frozen=True, kw_only=True):
    """The plan's canonical-JSON digests."""

    sha256: str
    blake3: str


class LimitEntry(_Member, frozen=True, kw_only=True):
    """One limit: its value (a fractional number of seconds is a float), how it was
    enforced, and whether it was hit (null when that cannot be known)."""

    value: int | float
    mechanism: str
    hit: bool | None


class Usage(_Member, frozen=True, kw_only=True):
    """What the sandbox used (times in microseconds)."""

    cpu_user_us: int
    cpu_system_us: int
    peak_rss_bytes: int
    disk_bytes: int | None
    output_bytes: int
    wall_us: int


class OutputDigest(_Member, frozen=True, kw_only=True):
    """One output stream's bytes on disk."""

    bytes: int
    sha256: str


class AuditDigest(_Member, frozen=True, kw_only=True):
    """The session's audit log, as the receipt commits to it (``files`` is absent in
    receipts written before the log rotated: one file)."""

    records: int
    bytes: int
    sha256: str
    files: int | msgspec.UnsetType = msgspec.UNSET


class Times(_Member, frozen=True, kw_only=True):
    """When the session was created, launched (null: never) and ended, in microseconds."""

    created_us: int
    launched_us: int | None
    ended_us: int


class TranscriptEntry(_Member, frozen=True, kw_only=True):
    """A PTY session's transcript; null numbers and an ``error`` when it did not verify."""

    format: str
    bytes: int | None
    digest: str | None
    evicted: int | None
    ring_bytes: int | None
    complete: bool
    error: str | msgspec.UnsetType = msgspec.UNSET


class Projection(_Member, frozen=True, kw_only=True):
    """One projection mounted into the sandbox (the launch binding commits to it too)."""

    alias: str
    target: str
    digest: str
    size: int
    mount_flags: list[str]
    freeze_method: str


class FixtureRef(_Member, frozen=True, kw_only=True):
    """The fixture a refinement run was judged against."""

    digest: str
    size: int


class EvaluationEntry(_Member, frozen=True, kw_only=True):
    """A refinement envelope's ``evaluation``: what was judged, from what, the verdict."""

    kind: str
    fixture: FixtureRef
    refusal: str | None
    termination: Termination | None
    evidence: Evidence | None
    outcome: Outcome


class _Envelope(_Member, frozen=True, kw_only=True, tag_field="receipt"):
    session_id: str
    plan: PlanDigests
    launch_binding: str | None
    outcome: ReceiptOutcome
    limits: dict[str, LimitEntry]
    usage: Usage
    output: dict[str, OutputDigest]
    times: Times
    #: Absent in receipts of the first format (before the audit log and its counts).
    audit: AuditDigest | msgspec.UnsetType | None = msgspec.UNSET
    counts: dict[str, int] | msgspec.UnsetType = msgspec.UNSET
    transcript: TranscriptEntry | msgspec.UnsetType = msgspec.UNSET
    projections: list[Projection] | msgspec.UnsetType = msgspec.UNSET


class SessionReceipt(_Envelope, frozen=True, kw_only=True, tag="glove-session/v1"):
    """A resource plan's terminal receipt."""


class RefinementEnvelope(_Envelope, frozen=True, kw_only=True, tag="glove-refinement/v1"):
    """A refinement plan's terminal envelope: the receipt's members and its verdict."""

    evaluation: EvaluationEntry


Receipt = SessionReceipt | RefinementEnvelope

_decoder = msgspec.json.Decoder(Receipt)


def decode_receipt(payload: bytes) -> Receipt:
    """A receipt journal record's payload, strictly.

    Raises:
        RecordInvalid: not JSON, an unknown ``receipt`` kind, or a member missing, unknown
            or of the wrong type.
    """
    try:
        return _decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise RecordInvalid(f"the record is no receipt: {exc}") from exc


def encode_receipt(receipt: Receipt) -> bytes:
    """The receipt's RFC 8785 bytes (what is appended, hashed and signed)."""
    return jcs_dumps(msgspec.to_builtins(receipt))
