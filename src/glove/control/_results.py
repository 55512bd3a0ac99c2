"""What the control client's typed calls return: the session service's results as Structs.

gloved's session methods answer with Structs of :mod:`glove.session` (``SessionView``,
``SessionPage``, ``PlanVerdict``, ``ExposureView``, the receipts' and the terminal's results
and ``session.attach``'s events), a layer above the control client. These are the client's
side of the same shapes, decoded strictly (every field typed, an unknown field refused: a
reply that does not match is a ``DaemonProtocolError``, never a half-read dict), encoded as
the server encodes them (the same ``omit_defaults`` and tags), so printing one prints what
gloved sent. ``tests/control/test_results.py`` holds each to its server Struct field by
field, so they cannot drift apart.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from glove.protocol import JsonObject

#: A session's states, in the order of its life.
SessionState = Literal["created", "preparing", "composed", "running", "finalizing", "terminal"]


class SessionStatus(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.status`` (and ``session.create``, ``stop``, ``cleanup``): one session."""

    session_id: str
    state: SessionState
    harness: str
    created_ns: int
    updated_ns: int
    plan_sha256: str
    plan_blake3: str
    receipt_seq: int | None = None
    #: The receipt's outcome as JSON: read tolerantly (a newer gloved may add a kind or a
    #: member; ``glove.records.ReceiptOutcome`` is the daemon's strict type).
    outcome: JsonObject | None = None
    launch_binding: str | None = None
    cleaned: bool = False
    terminal: str = "pipes"
    #: A refinement session's verdict as JSON, read tolerantly like ``outcome``.
    evaluation: JsonObject | None = None


class SessionPage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.list``: a page of sessions and the cursor of the next (None at the end)."""

    sessions: list[SessionStatus]
    next: str | None


class PlanVerdict(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """``plan.validate``: valid with both digests, or invalid with every problem."""

    valid: bool
    sha256: str | None = None
    blake3: str | None = None
    errors: list[dict[str, str]] | None = None
    #: A refinement plan's evaluation as JSON, read tolerantly like ``outcome``.
    evaluation: JsonObject | None = None


class Exposure(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """``exposure.create`` and ``exposure.revoke``: an exposure as its owner sees it."""

    alias: str
    generation: int
    mode: str
    target: str
    path: str | None = None
    revoked: bool = False


class ReceiptRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One row of ``receipts.page``: where the receipt sits in the receipt journal."""

    seq: int
    session_id: str | None
    checkpoint: str
    t_ns: int
    #: The signed payload as JSON, handed on as it is (the client verifies it; its schema is
    #: the receipt's, ``glove.records.Receipt``, and older receipts have fewer members).
    receipt: JsonObject
    kind: str


class ReceiptPage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``receipts.page``: receipts in order, the next cursor and the acknowledged position."""

    receipts: list[ReceiptRow]
    next_cursor: int
    acked: int


class Acked(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``receipts.ack``: the sequence number now acknowledged."""

    acked: int


class InputResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.input``: bytes taken, and bytes still queued for the agent."""

    accepted: int
    queued: int


class ResizeResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.resize``: the terminal's size now."""

    rows: int
    cols: int


#: The signals ``session.signal`` sends, by name.
SignalName = Literal["INT", "QUIT", "TSTP", "TERM", "HUP", "USR1", "USR2"]


class SignalResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.signal``: where it went (``foreground``, or ``command``)."""

    signal: str
    to: str


class DetachResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``session.detach``: the viewer, and the offset its stream had reached."""

    viewer: int
    offset: int


class AttachModes(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The terminal modes an agent left away from their defaults (``glove.session``'s
    ``TerminalModes``, which applies them)."""

    on: tuple[int, ...] = ()
    off: tuple[int, ...] = ()
    keypad: bool = False


class Attached(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="attached", tag_field="kind"
):
    """``session.attach``'s first event: who this viewer is, what the transcript holds."""

    viewer: int
    writer: bool
    offset: int
    start: int
    end: int
    evicted: int
    rows: int
    cols: int
    modes: AttachModes
    live: bool


class Output(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="data", tag_field="kind"):
    """Transcript bytes ``[offset, offset + len(data))``; ``end`` is its end now."""

    offset: int
    data: bytes
    end: int


class Gap(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="gap", tag_field="kind"):
    """Bytes ``[offset, until)`` were evicted before this viewer read them."""

    offset: int
    until: int
    evicted: int


class Role(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="role", tag_field="kind"):
    """This viewer's role changed; ``by`` is the writer now."""

    writer: bool
    by: int | None


class Ended(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="end", tag_field="kind"):
    """``session.attach``'s last event: where this viewer stopped, and why."""

    offset: int
    reason: Literal["closed", "detached", "caught_up"]


#: One event of ``session.attach``.
AttachEvent = Attached | Output | Gap | Role | Ended
