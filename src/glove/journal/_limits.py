"""Journal kinds and their limits: what happens when a journal is full.

Every journal is bounded. A segment holds at most ``max_segment_bytes`` and
``max_segment_records``; a journal keeps at most ``max_segments`` segment files. What happens
at the limit is a property of the journal's kind, never a silent default:

==========  ==========================================================================
kind        at the limit
==========  ==========================================================================
RECEIPTS    rotate into a sealed segment; the oldest segment is deleted only once every
            receipt in it is acknowledged, otherwise the append is refused (JournalFull)
SESSION     rotate into a sealed segment; the oldest sealed segment is deleted
PLAN        refuse (JournalFull): a plan/state journal never loses its beginning
==========  ==========================================================================
"""

from __future__ import annotations

import enum
from typing import Final

import msgspec

DEFAULT_MAX_SEGMENT_BYTES: Final = 64 * 1024 * 1024
DEFAULT_MAX_SEGMENT_RECORDS: Final = 1_000_000
DEFAULT_MAX_SEGMENTS: Final = 16
MIN_SEGMENT_BYTES: Final = 4 * 1024
"""Smallest accepted segment bound (a header, a seal record and some records)."""


class JournalKind(enum.IntEnum):
    """What a journal holds; decides what happens at its limit (see the module docstring)."""

    RECEIPTS = 1
    SESSION = 2
    PLAN = 3


class OnFull(enum.Enum):
    """What a journal does when its active segment is full."""

    ROTATE = "rotate"
    ROTATE_ACKED = "rotate-acknowledged"
    REFUSE = "refuse"


ON_FULL: Final = {
    JournalKind.RECEIPTS: OnFull.ROTATE_ACKED,
    JournalKind.SESSION: OnFull.ROTATE,
    JournalKind.PLAN: OnFull.REFUSE,
}


class JournalLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Bounds of one journal; all three always apply."""

    max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES
    max_segment_records: int = DEFAULT_MAX_SEGMENT_RECORDS
    max_segments: int = DEFAULT_MAX_SEGMENTS

    def __post_init__(self) -> None:
        if self.max_segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(f"max_segment_bytes must be at least {MIN_SEGMENT_BYTES}")
        if self.max_segment_records < 1 or self.max_segments < 1:
            raise ValueError("max_segment_records and max_segments must be at least 1")
