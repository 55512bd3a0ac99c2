"""The error of a durable record that does not decode as its type."""

from __future__ import annotations

from glove.errors import GloveError


class RecordInvalid(GloveError):
    """Bytes that are not a record of the kind expected: not JSON, an unknown kind (a
    journal event's ``t``, a receipt's ``receipt``), a member missing, of the wrong type or
    not known. Nothing is dropped silently: the reader refuses the record."""
