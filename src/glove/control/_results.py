"""What the control client's typed calls return: the session service's results as Structs.

gloved's session methods answer with Structs of :mod:`glove.session` (``SessionView``,
``SessionPage``, ``PlanVerdict``, ``ExposureView``), a layer above the control client. These
are the client's side of the same shapes, decoded strictly (every field typed, an unknown
field refused: a reply that does not match is a ``DaemonProtocolError``, never a half-read
dict). ``tests/control/test_results.py`` holds each to its server Struct field by field, so
they cannot drift apart.
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


class PlanVerdict(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``plan.validate``: valid with both digests, or invalid with every problem."""

    valid: bool
    sha256: str | None = None
    blake3: str | None = None
    errors: list[dict[str, str]] | None = None
    #: A refinement plan's evaluation as JSON, read tolerantly like ``outcome``.
    evaluation: JsonObject | None = None


class Exposure(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``exposure.create`` and ``exposure.revoke``: an exposure as its owner sees it."""

    alias: str
    generation: int
    mode: str
    target: str
    path: str | None = None
    revoked: bool = False
