"""The activity (audit) log: structured JSONL records, each durable before its append returns.

Not protected against a same-user process that can rewrite the file (the spec says so); the
tamper-evident record of what ran is the receipt journal, :mod:`glove.journal`.
"""

from glove.audit._log import (
    AUDIT_APPEND_TIMEOUT_S,
    DEFAULT_KEEP_FILES,
    DEFAULT_MAX_AUDIT_BYTES,
    MAX_AUDIT_RECORD_BYTES,
    AuditAck,
    AuditLog,
    PendingRecord,
)
from glove.audit.errors import (
    AuditError,
    AuditRecordInvalid,
    AuditUnavailable,
    AuditWriteFailed,
)

__all__ = [
    "AUDIT_APPEND_TIMEOUT_S",
    "DEFAULT_KEEP_FILES",
    "DEFAULT_MAX_AUDIT_BYTES",
    "MAX_AUDIT_RECORD_BYTES",
    "AuditAck",
    "AuditError",
    "AuditLog",
    "AuditRecordInvalid",
    "AuditUnavailable",
    "AuditWriteFailed",
    "PendingRecord",
]
