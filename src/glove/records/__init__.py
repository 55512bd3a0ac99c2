"""Glove's durable records as typed values: the session journal's events, session
outcomes and terminal receipts (msgspec Structs, decoded strictly).

Every record keeps the bytes it has always had: encoding a decoded record gives the bytes
it was decoded from (the journal's sorted-key JSON, the receipts' RFC 8785), since both
are hashed and the receipts signed. An unknown kind or member is a
:class:`~glove.records.errors.RecordInvalid`, never a silent drop.
"""

from glove.records._events import (
    Cleaned,
    Created,
    SessionEvent,
    State,
    StateChanged,
    StateDetails,
    Terminal,
    decode_event,
    encode_event,
)
from glove.records._outcome import OutcomeKind, ReceiptOutcome
from glove.records._receipt import (
    AuditDigest,
    EvaluationEntry,
    FixtureRef,
    LimitEntry,
    OutputDigest,
    PlanDigests,
    Projection,
    Receipt,
    RefinementEnvelope,
    SessionReceipt,
    Times,
    TranscriptEntry,
    Usage,
    decode_receipt,
    encode_receipt,
)
from glove.records.errors import RecordInvalid

__all__ = [
    "AuditDigest",
    "Cleaned",
    "Created",
    "EvaluationEntry",
    "FixtureRef",
    "LimitEntry",
    "OutcomeKind",
    "OutputDigest",
    "PlanDigests",
    "Projection",
    "Receipt",
    "ReceiptOutcome",
    "RecordInvalid",
    "RefinementEnvelope",
    "SessionEvent",
    "SessionReceipt",
    "State",
    "StateChanged",
    "StateDetails",
    "Terminal",
    "Times",
    "TranscriptEntry",
    "Usage",
    "decode_event",
    "decode_receipt",
    "encode_event",
    "encode_receipt",
]
