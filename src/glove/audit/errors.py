"""Errors raised by the activity (audit) log.

::

    AuditError
    ├── AuditRecordInvalid    the record is not a JSON object, is too large, or uses a reserved key
    ├── AuditWriteFailed      the write or fdatasync failed; nothing was acknowledged
    └── AuditUnavailable      the log is closed, crashed or busy: the caller must fail closed

Every failure of :meth:`glove.audit.AuditLog.append` is one of these, so a caller that
needs "audit before forwarding" catches :class:`AuditError` and refuses the request.
"""

from __future__ import annotations

from glove.errors import GloveError


class AuditError(GloveError):
    """Base class of every audit-log error; catch it to fail closed."""


class AuditRecordInvalid(AuditError):
    """The record cannot be written: not JSON-encodable, too large, or a reserved key."""


class AuditWriteFailed(AuditError):
    """Writing or syncing the record failed; it is not acknowledged."""


class AuditUnavailable(AuditError):
    """The log actor is not running (closed, crashed) or its mailbox is full."""
